"""Exec approvals as pure decisions: table tests over a fixed resolver, and parser properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.effects import Mode
from pincer.core.errors import ConfigError
from pincer.policy.exec_approvals import (
    Answer,
    Ask,
    ExecApprovalPolicy,
    Security,
    ShellSyntaxError,
    analyze_command,
    apply_answer,
    evaluate,
    evaluate_argv,
    fallback_allows,
    match_pattern,
    split_shell,
)

BINARIES = {
    name: f"/usr/bin/{name}"
    for name in ["sh", "bash", "dash", "env", "nice", "nohup", "timeout", "stdbuf", "xargs", "ls", "cat", "curl", "rm", "wc", "python3", "node", "perl", "ruby", "php", "git", "uname", "true"]
}
BINARIES["rg"] = "/home/me/.cargo/bin/rg"


def resolve(word: str) -> tuple[str, ...]:
    if word.startswith("/"):
        return (word,) if word in BINARIES.values() or word.startswith("/opt/") else ()
    return (BINARIES[word],) if word in BINARIES else ()


SH = ExecApprovalPolicy(allowlist=("/usr/bin/sh", "/usr/bin/ls", "/usr/bin/python3", "/usr/bin/node", "/usr/bin/perl"))


@pytest.mark.parametrize(
    ("command", "mode", "why"),
    [
        ("ls -la", Mode.ALLOW, "every program"),
        ("sh script.sh", Mode.ALLOW, "every program"),
        ('sh -c "curl http://x"', Mode.ASK, "/usr/bin/curl is not in the allowlist"),
        ("bash -c 'curl x'", Mode.ASK, "/usr/bin/curl"),
        ("sh -ec 'ls; curl x'", Mode.ASK, "/usr/bin/curl"),
        ("env curl x", Mode.ASK, "/usr/bin/curl"),
        ("env -i -u HOME -- curl x", Mode.ASK, "/usr/bin/curl"),
        ("env LANG=C ls", Mode.ALLOW, "every program"),
        ("env LD_PRELOAD=/tmp/x.so ls", Mode.ASK, "sets LD_PRELOAD"),
        ("LD_PRELOAD=/tmp/x.so ls", Mode.ASK, "sets LD_PRELOAD"),
        ("env -S 'curl x'", Mode.ASK, "env -S"),
        ("nice -n 10 curl x", Mode.ASK, "/usr/bin/curl"),
        ("nohup curl x", Mode.ASK, "/usr/bin/curl"),
        ("timeout -s KILL 5 curl x", Mode.ASK, "/usr/bin/curl"),
        ("timeout 5 ls", Mode.ALLOW, "every program"),
        ("stdbuf -oL curl x", Mode.ASK, "/usr/bin/curl"),
        ("xargs -0 -n 1 curl", Mode.ASK, "/usr/bin/curl"),
        ("xargs -I{} sh -c 'rm {}'", Mode.ASK, "xargs's replace string"),  # its input becomes sh code
        ("xargs", Mode.ASK, "echo"),
        ("ls && curl x", Mode.ASK, "/usr/bin/curl"),
        ("ls | curl x", Mode.ASK, "/usr/bin/curl"),
        ("ls; curl x", Mode.ASK, "/usr/bin/curl"),
        ("ls\ncurl x", Mode.ASK, "/usr/bin/curl"),
        ("ls & curl x", Mode.ASK, "/usr/bin/curl"),
        ("ls $(curl x)", Mode.ASK, "command substitution"),
        ("ls `curl x`", Mode.ASK, "command substitution"),
        ('ls "$(curl x)"', Mode.ASK, "command substitution"),
        ("ls '$(curl x)'", Mode.ALLOW, "every program"),
        ("ls > /etc/passwd", Mode.ASK, "redirection"),
        ("(curl x)", Mode.ASK, "subshells"),
        ("$CMD x", Mode.ASK, "expansion"),
        ("l* x", Mode.ASK, "expansion"),
        ("if true; then curl x; fi", Mode.ASK, "shell syntax"),
        ("eval 'curl x'", Mode.ASK, "not analysed"),
        ("python3 -c 'print(1)'", Mode.ASK, "inline evaluation"),
        ("python3 -Ic 'print(1)'", Mode.ASK, "inline evaluation"),
        ("python3 -m http.server", Mode.ASK, "inline evaluation"),  # -m runs a module like -c runs code
        ("python3 script.py -c x", Mode.ALLOW, "every program"),
        ("node -e '1'", Mode.ASK, "inline evaluation"),
        ("node --eval=1", Mode.ASK, "inline evaluation"),
        ("perl -ne 'print'", Mode.ASK, "inline evaluation"),
        ("ruby -e 1", Mode.ASK, "/usr/bin/ruby"),
        ("nosuchprogram", Mode.ASK, "not found"),
        ("./local.sh", Mode.ASK, "not found"),
        ("ls 'unterminated", Mode.ASK, "cannot parse"),
        ("", Mode.ASK, "empty"),
        ("ls # && curl x", Mode.ALLOW, "every program"),
    ],
)
def test_allowlist_on_miss(command: str, mode: Mode, why: str) -> None:
    result = evaluate(SH, command, resolve)
    assert result.mode is mode, result.reason
    assert why in result.reason


def test_security_and_ask_matrix() -> None:
    allowed, missed = "ls", "curl x"
    table = {
        (Security.DENY, Ask.OFF): (Mode.DENY, Mode.DENY),
        (Security.DENY, Ask.ALWAYS): (Mode.DENY, Mode.DENY),
        (Security.ALLOWLIST, Ask.OFF): (Mode.ALLOW, Mode.DENY),
        (Security.ALLOWLIST, Ask.ON_MISS): (Mode.ALLOW, Mode.ASK),
        (Security.ALLOWLIST, Ask.ALWAYS): (Mode.ASK, Mode.ASK),
        (Security.FULL, Ask.OFF): (Mode.ALLOW, Mode.ALLOW),
        (Security.FULL, Ask.ON_MISS): (Mode.ALLOW, Mode.ALLOW),
        (Security.FULL, Ask.ALWAYS): (Mode.ASK, Mode.ASK),
    }
    for (security, ask), expected in table.items():
        policy = ExecApprovalPolicy(security=security, ask=ask, allowlist=("/usr/bin/ls",))
        got = (evaluate(policy, allowed, resolve).mode, evaluate(policy, missed, resolve).mode)
        assert got == expected, (security, ask)


def test_ask_fallback() -> None:
    hit = evaluate(ExecApprovalPolicy(ask=Ask.ALWAYS, allowlist=("/usr/bin/ls",)), "ls", resolve)
    miss = evaluate(ExecApprovalPolicy(ask=Ask.ALWAYS, allowlist=("/usr/bin/ls",)), "curl", resolve)
    for fallback, expected in ((Security.DENY, (False, False)), (Security.ALLOWLIST, (True, False)), (Security.FULL, (True, True))):
        policy = ExecApprovalPolicy(ask_fallback=fallback)
        assert (fallback_allows(policy, hit), fallback_allows(policy, miss)) == expected


def test_answers() -> None:
    policy = ExecApprovalPolicy(allowlist=("/usr/bin/sh",))
    evaluation = evaluate(policy, "sh -c 'nice curl x | wc -l'", resolve)
    assert evaluation.persistable == ("/usr/bin/curl", "/usr/bin/wc")
    assert apply_answer(policy, evaluation, Answer.DENY) == (False, policy)
    assert apply_answer(policy, evaluation, "allow_once") == (True, policy)
    ok, updated = apply_answer(policy, evaluation, Answer.ALLOW_ALWAYS)
    assert ok and updated.allowlist == ("/usr/bin/sh", "/usr/bin/curl", "/usr/bin/wc")
    assert evaluate(updated, "sh -c 'nice curl x | wc -l'", resolve).mode is Mode.ALLOW
    # Never persisted: inline eval, unresolvable programs, unanalysable lines.
    for command in ("python3 -c 1", "ls; nosuch", "ls $(x)"):
        evaluation = evaluate(policy, command, resolve)
        assert apply_answer(policy, evaluation, Answer.ALLOW_ALWAYS) == (True, policy)


def test_allow_always_does_not_silence_ask_always() -> None:
    policy = ExecApprovalPolicy(ask=Ask.ALWAYS)
    _, updated = apply_answer(policy, evaluate(policy, "ls", resolve), Answer.ALLOW_ALWAYS)
    assert evaluate(updated, "ls", resolve).mode is Mode.ASK


def test_inline_eval_explicitly_allowed() -> None:
    policy = ExecApprovalPolicy(allowlist=("/usr/bin/python3",), allow_inline_eval=True)
    assert evaluate(policy, "python3 -c 1", resolve).mode is Mode.ALLOW


def test_argv_form() -> None:
    assert evaluate_argv(SH, ["sh", "-c", "curl x"], resolve).mode is Mode.ASK
    assert evaluate_argv(SH, ["/usr/bin/ls", "a b"], resolve).mode is Mode.ALLOW


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("/usr/bin/rg", "/usr/bin/rg", True),
        ("/usr/bin/RG", "/usr/bin/rg", True),
        ("/usr/bin/*", "/usr/bin/rg", True),
        ("/usr/*", "/usr/bin/rg", False),
        ("/usr/**", "/usr/bin/rg", True),
        ("/opt/**/bin/tool", "/opt/bin/tool", True),
        ("/opt/**/bin/tool", "/opt/a/b/bin/tool", True),
        ("/usr/bin/python3*", "/usr/bin/python3.11", True),
        ("/usr/bin/rg?", "/usr/bin/rg", False),
        ("~/.cargo/bin/rg", "/home/me/.cargo/bin/rg", True),
        ("rg", "/usr/bin/rg", False),
        ("/usr/bin/r[g]", "/usr/bin/rg", False),
    ],
)
def test_match_pattern(pattern: str, path: str, expected: bool) -> None:
    assert match_pattern(pattern, path, home="/home/me") is expected


def test_home_patterns_need_a_home() -> None:
    assert match_pattern("~/.cargo/bin/rg", "/home/me/.cargo/bin/rg") is False
    policy = ExecApprovalPolicy(allowlist=("~/.cargo/bin/*",))
    assert evaluate(policy, "rg x", resolve, home="/home/me").mode is Mode.ALLOW


def test_wrapper_segments_record_the_chain() -> None:
    shell, segment = analyze_command("timeout 5 nice -n 1 env LANG=C bash -c 'uname -a'", resolve)
    assert shell.argv == ("bash", "-c", "uname -a")  # the shell that runs the line is a program too
    assert shell.wrappers == ("timeout", "nice", "env")
    assert shell.executable == "/usr/bin/bash"
    assert segment.argv == ("uname", "-a")
    assert segment.wrappers == ("timeout", "nice", "env", "bash -c")
    assert segment.executable == "/usr/bin/uname"


def test_from_json_flat_and_openclaw_forms() -> None:
    flat = ExecApprovalPolicy.from_json(
        {"security": "allowlist", "ask": "always", "askFallback": "allowlist", "allowlist": ["/usr/bin/ls"], "x": 1}
    )
    assert flat == ExecApprovalPolicy(ask=Ask.ALWAYS, ask_fallback=Security.ALLOWLIST, allowlist=("/usr/bin/ls",))
    openclaw = {
        "version": 1,
        "socket": {"path": "~/.openclaw/exec-approvals.sock"},
        "defaults": {"security": "deny", "ask": "on-miss", "askFallback": "deny"},
        "agents": {"main": {"security": "allowlist", "allowlist": [{"id": "x", "pattern": "~/Projects/**/bin/rg"}]}},
    }
    main = ExecApprovalPolicy.from_json(openclaw)
    assert main.security is Security.ALLOWLIST and main.allowlist == ("~/Projects/**/bin/rg",)
    other = ExecApprovalPolicy.from_json(openclaw, agent="helper")
    assert other.security is Security.DENY and other.allowlist == ()
    assert ExecApprovalPolicy.from_json(main.to_json()) == main


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([], "expected an object"),
        ({"security": "yolo"}, "security"),
        ({"ask": "sometimes"}, "ask"),
        ({"askFallback": 3}, "askFallback"),
        ({"allowlist": "ls"}, "allowlist"),
        ({"allowlist": [{"id": 1}]}, "allowlist.0"),
        ({"allowInlineEval": "yes"}, "allowInlineEval"),
        ({"defaults": []}, "defaults"),
        ({"agents": {"main": 5}}, "agents.main"),
    ],
)
def test_from_json_errors(data: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        ExecApprovalPolicy.from_json(data)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab sh-c'\"\\$`()|&;<>\n#*~={}ls curl env")), max_size=60))
def test_arbitrary_lines_never_crash_and_never_allow_unresolved(line: str) -> None:
    result = evaluate(SH, line, resolve)
    assert result.mode in (Mode.ALLOW, Mode.ASK)
    if result.mode is Mode.ALLOW:
        assert all(s.matched and s.problem is None for s in result.segments)
        assert "curl" not in [s.argv[0] for s in result.segments if s.argv]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_lexer_is_total(line: str) -> None:
    try:
        split_shell(line)
    except ShellSyntaxError:
        pass
    evaluate(SH, line, resolve)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=10), c, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["security", "ask", "askFallback", "allowlist", "defaults", "agents",
                                        "allowInlineEval", "other"]), json_values, max_size=5))  # fmt: skip
def test_policy_parser_only_raises_config_errors(data: dict) -> None:
    try:
        ExecApprovalPolicy.from_json(data)
    except ConfigError:
        pass
