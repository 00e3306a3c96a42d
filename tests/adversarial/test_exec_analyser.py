"""Issue 9, items 2 and 3: the exec analyser must see the program bash would really run.

Failed on main before the option tables (b2b07b6): every row of ``ITEM_2`` and ``ITEM_3`` was
answered *allow*. Item 2: wrapper and builtin options that take a value were skipped as one word
(``exec -a /usr/bin/ls id`` ran ``id`` as if it were ``ls``), unknown options were skipped, ``+c``
was not ``-c``, a shell running a ``-c`` line did not need to be allowlisted itself, and words whose
value is only known at run time (brace expansion, xargs input) decided the program. Item 3:
``_inline_eval`` stopped at the first word without ``-``, so ``python3 -W ignore -c``, ``perl -I lib
-e`` and friends ran unasked for an allowlisted interpreter.

The resolver is a fixed table (no file system), so every row is exact about which binary a word
names; the end-to-end test with the real ``exec`` tool and sandbox is in this file too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pincer.core.effects import Mode
from pincer.core.errors import Denied
from pincer.core.values import HostContext
from pincer.policy.exec_approvals import Ask, ExecApprovalPolicy, analyze_command, evaluate
from pincer.runtimes.script import ScriptRuntime, ScriptSettings

PROGRAMS = {
    "sh": ("/usr/bin/sh", "/usr/bin/dash"),
    "rbash": ("/usr/bin/rbash", "/usr/bin/bash"),
    "python3": ("/usr/bin/python3", "/usr/bin/python3.11"),
    "foo": ("/usr/local/bin/foo",),  # shadows /usr/bin/foo on PATH
    **{
        name: (f"/usr/bin/{name}",)
        for name in (
            "bash", "dash", "env", "nice", "nohup", "timeout", "stdbuf", "xargs", "setsid", "chrt", "ionice",
            "taskset", "flock", "time", "sudo", "nsenter", "ls", "cat", "id", "curl", "echo", "printf", "node",
            "perl", "ruby", "php", "lua", "osascript", "deno", "bun", "touch",
        )
    },
}  # fmt: skip


def resolve(word: str) -> tuple[str, ...]:
    if word.startswith("/"):
        for paths in PROGRAMS.values():
            if word == paths[0]:
                return paths
        if word == "/bin/ls":
            return ("/bin/ls", "/usr/bin/ls")  # /bin is a symlink to /usr/bin, as on Debian
        return (word,) if word == "/usr/bin/foo" else ()
    return PROGRAMS.get(word, ())


def policy(*programs: str) -> ExecApprovalPolicy:
    """The issue's exec-approvals.json: allowlist, ask off, these programs allowlisted."""
    return ExecApprovalPolicy.from_json(
        {"security": "allowlist", "ask": "off", "allowlist": [PROGRAMS[p][0] for p in programs]}
    )


LS = ("ls",)
SHELLS = ("bash", "sh", "dash")

# (command line, allowlisted programs, what the refusal names)
ITEM_2 = [
    # the reproduction, with and without bash allowlisted
    ('bash -c "exec -a /usr/bin/ls id"', LS, "/usr/bin/bash is not in the allowlist"),
    ('bash -c "exec -a /usr/bin/ls id"', ("ls", "bash"), "/usr/bin/id is not in the allowlist"),
    ("exec -a /usr/bin/ls id", LS, "/usr/bin/id"),
    ("exec -la /usr/bin/ls id", LS, "/usr/bin/id"),
    ("exec -cl -a /usr/bin/ls id", LS, "/usr/bin/id"),
    # the shell itself is a program to allow when it runs a -c line
    ("bash -c ls", LS, "/usr/bin/bash is not in the allowlist"),
    ("sh -ec 'ls'", LS, "/usr/bin/sh is not in the allowlist"),
    # +c is -c for bash and dash: `bash +c 'curl x'` runs curl
    ("bash +c 'curl x'", ("bash",), "/usr/bin/curl"),
    ("sh +c 'curl x'", ("sh",), "/usr/bin/curl"),
    # a symlink to bash is bash
    ("rbash -c 'curl x'", ("bash",), "/usr/bin/curl"),
    # -k / -o keyword put NAME=VALUE arguments into the command's environment
    ("bash -kc 'ls LD_PRELOAD=/tmp/x.so'", ("bash", "ls"), "keyword"),
    ("bash -o keyword -c 'ls LD_PRELOAD=/tmp/x.so'", ("bash", "ls"), "keyword"),
    # commands read from standard input were never analysed
    ("echo 'curl x' | sh", ("echo", "sh"), "inline evaluation"),
    ("echo 'curl x' | bash -s", ("echo", "bash"), "inline evaluation"),
    # xargs input choosing the program: appended where a wrapper expects its command, or
    # substituted into a sh -c line
    ("xargs env", ("xargs", "env"), "xargs would append its input"),
    ("xargs nice", ("xargs", "nice"), "xargs would append its input"),
    ("xargs -I{} -L1 env", ("xargs", "env"), "xargs would append its input"),  # -L cancels -I
    ("xargs -I{} sh -c 'ls {}'", ("xargs", "sh", "ls"), "xargs's replace string"),
    ("xargs -I% bash -c 'cat %'", ("xargs", "bash", "cat"), "xargs's replace string"),
    # a wrapper's operand that the shell expands into several words: `timeout 1 id`
    ("timeout {1,id}", ("timeout",), "needs shell expansion"),
    # env -i / command -p look the program up in /bin:/usr/bin, not PATH
    ("env -i foo", ("foo",), "/usr/bin/foo is not in the allowlist"),
    ("env -u PATH foo", ("foo",), "/usr/bin/foo is not in the allowlist"),
    ("command -p foo", ("foo",), "/usr/bin/foo is not in the allowlist"),
    # bash's printf -v assigns PATH, and the next ls is someone else's
    ("bash -c 'printf -v PATH /tmp; ls'", ("bash", "printf", "ls"), "printf -v"),
    # wrappers that change user or namespace are not followed
    ("sudo ls", ("sudo", "ls"), "sudo changes user"),
    ("nsenter -t 1 -m ls", ("nsenter", "ls"), "nsenter runs a command in another namespace"),
    # an option the table does not know: never skipped as one word
    ("nice --frobnicate /usr/bin/ls id", ("nice", "ls"), "not in the analyser's option table"),
    ("timeout --frob 5 ls", ("timeout", "ls"), "not in the analyser's option table"),
]

ITEM_3 = [
    # the reproductions
    ("python3 -W ignore -c 'import os'", ("python3",)),
    ("python3 -X dev -c 'import os'", ("python3",)),
    ("perl -I lib -e 'system(1)'", ("perl",)),
    # the same shape for every interpreter: an option with a separate value before the code
    ("python3 -E -W ignore -X dev -c 'import os'", ("python3",)),
    ("python3 --check-hash-based-pycs never -c 1", ("python3",)),
    ("node -r fs -e 1", ("node",)),
    ("node --require fs --eval 1", ("node",)),
    ("node --input-type module -e 1", ("node",)),
    ("node --import 'data:text/javascript,1' x.js", ("node",)),
    ("ruby -r json -e 1", ("ruby",)),
    ("ruby -I lib -e 1", ("ruby",)),
    ("php -d x=1 -r 'echo 1;'", ("php",)),
    ("php -R 'echo 1;'", ("php",)),
    ("lua -l socket -e 1", ("lua",)),
    ("osascript -l JavaScript -e 1", ("osascript",)),
    ("deno eval 1", ("deno",)),
    # perl -M puts its text into a `use` statement: code
    ("perl '-Mstrict;print(1)' script.pl", ("perl",)),
    # -m runs a module, -i reads code from stdin after the script, - and no script read stdin
    ("python3 -m http.server", ("python3",)),
    ("python3 -i script.py", ("python3",)),
    ("python3 -", ("python3",)),
    ("echo 'import os' | python3", ("echo", "python3")),
    ("python3 /dev/stdin", ("python3",)),
    ("node -i", ("node",)),
    ("perl -F, -an x.pl", ("perl",)),
    ("php -B 'echo 1;' x.php", ("php",)),
    ("deno repl", ("deno",)),
]

KEEPS_ASKING = [
    # forms main already caught; the tables must keep them
    ("python3 -c 1", ("python3",)),
    ("python3 -uc 1", ("python3",)),
    ("python3 -Wignore -c 1", ("python3",)),
    ("python3 -Ic 1", ("python3",)),
    ("node -pe 1", ("node",)),
    ("node --eval=1", ("node",)),
    ("perl -le 'print 1'", ("perl",)),
    ("perl -ne 'print'", ("perl",)),
    ("perl -E 'say 1'", ("perl",)),
    ("bun -e 1", ("bun",)),
    ("bun -p 1", ("bun",)),
]


@pytest.mark.parametrize(("command", "allowed", "why"), ITEM_2)
def test_item_2_wrapper_and_shell_options(command: str, allowed: tuple[str, ...], why: str) -> None:
    """Failed on main before the option tables: each of these was allowed with ask=off."""
    result = evaluate(policy(*allowed), command, resolve)
    assert result.mode is Mode.DENY, result.reason
    assert why in result.reason


@pytest.mark.parametrize(("command", "allowed"), ITEM_3 + KEEPS_ASKING)
def test_item_3_inline_eval_asks(command: str, allowed: tuple[str, ...]) -> None:
    """Failed on main before the interpreter tables (the ITEM_3 rows): run unasked."""
    result = evaluate(policy(*allowed), command, resolve)
    assert result.mode is Mode.DENY, result.reason
    assert "inline evaluation" in result.reason
    inline = [s for s in result.segments if s.inline_eval]
    assert inline and all(s.matched for s in inline)  # allowlisted, and still asked
    explicit = ExecApprovalPolicy(allowlist=policy(*allowed).allowlist, allow_inline_eval=True)
    assert evaluate(explicit, command, resolve).mode is Mode.ALLOW


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "env LANG=C ls",
        "env -i -- LANG=C ls",
        "env -u HOME -C /tmp ls",
        "nice -n 5 ls", "nice -5 ls", "nice -n5 ls", "nice --adjustment=5 ls",
        "nohup ls", "nohup -- ls",
        "timeout -s KILL -k 1 5 ls", "timeout --signal=KILL --foreground --preserve-status 5 ls", "timeout -sKILL 5s ls",
        "stdbuf -oL -e 0 ls", "stdbuf --output=L ls",
        "xargs -0 -n 1 -P 2 ls", "xargs -I {} ls {}", "xargs -d '\\n' -a list.txt ls", "xargs --max-lines ls",
        "setsid -w ls", "chrt -o 0 ls", "ionice -c 3 -n 7 ls", "taskset -c 0 ls", "flock -w 1 /tmp/lock ls",
        "time -p ls", "command ls", "command -- ls", "exec ls", "builtin exec -- ls",
        "time nice -n 1 env LANG=C timeout 5 ls",
    ],
)  # fmt: skip
def test_wrappers_are_seen_through_to_an_allowlisted_program(command: str) -> None:
    """The tables accept what the wrappers accept: these run ls and only ls."""
    result = evaluate(policy("ls"), command, resolve)
    assert result.mode is Mode.ALLOW, result.reason
    assert [s.argv[0] for s in result.segments] == ["ls"]


def test_shell_and_its_line_both_count_and_allow_always_adds_both() -> None:
    """bash -c "ls" needs bash and ls; allow_always persists both (the shell is a program)."""
    from pincer.policy.exec_approvals import Answer, apply_answer

    asking = ExecApprovalPolicy()
    evaluation = evaluate(asking, "bash -c 'ls -l'", resolve)
    assert [s.executable for s in evaluation.segments] == ["/usr/bin/bash", "/usr/bin/ls"]
    assert evaluation.persistable == ("/usr/bin/bash", "/usr/bin/ls")
    _, updated = apply_answer(asking, evaluation, Answer.ALLOW_ALWAYS)
    assert updated.allowlist == ("/usr/bin/bash", "/usr/bin/ls")
    assert evaluate(updated, "bash -c 'ls -l'", resolve).mode is Mode.ALLOW
    assert evaluate(updated, "bash -c 'curl x'", resolve).mode is Mode.ASK
    assert evaluate(updated, "bash -lc 'ls -l'", resolve).mode is Mode.ASK  # a login shell reads ~/.profile


@pytest.mark.parametrize(
    ("command", "segments"),
    [
        ("bash -o pipefail -c 'ls | cat'", ["bash", "ls", "cat"]),
        ("bash -oc pipefail 'ls'", ["bash", "ls"]),  # -o takes the next word, the cluster goes on
        ("bash --norc --noprofile -c ls", ["bash", "ls"]),
        ("bash -norc -c ls", ["bash", "ls"]),  # bash reads one-dash long options first
        ("bash -O extglob +O nullglob -c ls", ["bash", "ls"]),
        ("bash -c -e ls", ["bash", "ls"]),  # options go on after -c; the first operand is the line
        ("bash -c -- ls", ["bash", "ls"]),
        ("sh -c 'ls' curl", ["sh", "ls"]),  # curl is $0
        ("dash -ec ls", ["dash", "ls"]),
        ("bash script.sh", ["bash"]),
    ],
)
def test_shell_option_forms(command: str, segments: list[str]) -> None:
    assert [s.argv[0] for s in analyze_command(command, resolve)] == segments


@pytest.mark.parametrize(
    "command",
    [
        "bash --rcfile=x -c ls",  # bash has no --opt=value
        "bash -e --norc -c ls",  # long options only come first
        "sh -posix -c ls",  # dash reads this as -p -o osix -s -i -x: not bash's --posix
        "bash -Z -c ls",
        "fish -c ls",
        "env -S 'ls -l'",
        "env --split-string='ls -l'",
        "env --unse=HOME ls",  # getopt would take the abbreviation; the table does not guess
        "timeout -f 5 ls",
        "xargs --process-slot-var=LD_PRELOAD ls",
        "chrt -o ls",  # the priority is missing: newer chrt may read ls as the priority
        "flock /tmp/lock -c ls",
        "unbuffer -- ls",
        "exec -x ls",
        "python3 --frob x.py",
        "node --frob x.js",
        "node --run build",
        "perl -Z x.pl",
    ],
)
def test_unknown_or_unanalysed_options_fail_closed(command: str) -> None:
    allow_all = policy("bash", "sh", "env", "timeout", "xargs", "chrt", "flock", "ls", "python3", "node", "perl")
    allow_all = ExecApprovalPolicy(allowlist=(*allow_all.allowlist, "/usr/bin/*", "/usr/bin/fish"))
    result = evaluate(allow_all, command, resolve)
    assert result.mode is Mode.ASK, result.reason
    assert any(s.problem or s.inline_eval for s in result.segments), result.reason


@pytest.mark.parametrize(
    "command",
    [
        *(f"{name} ls" for name in ("sudo", "doas", "su", "nsenter", "unshare", "chroot", "strace", "gdb", "watch",
                                    "script", "parallel", "busybox", "toybox", "setarch", "prlimit", "fakeroot", "sg")),
        "alias ls=id", "hash -p /usr/bin/id ls", "export PATH=/tmp", "set -k", "read PATH", "eval ls",
        "source x.sh", ". x.sh", "trap 'id' EXIT", "printf -v PATH /tmp",
        "exec -a python3 /usr/bin/bash -c ls",  # the names disagree: bash, running as python3
        "busybox sh -c ls",
    ],
)  # fmt: skip
def test_programs_and_builtins_that_are_never_allowed(command: str) -> None:
    """Allowlisting everything does not allow them: what they run is not analysed."""
    everything = ExecApprovalPolicy(allowlist=("/usr/bin/*", "/usr/bin/**"))
    result = evaluate(everything, command, lambda word: (f"/usr/bin/{word.rsplit('/', 1)[-1]}",))
    assert result.mode is Mode.ASK, result.reason
    assert any(s.problem for s in result.segments), result.reason


def test_what_a_program_is_comes_from_every_name_it_goes_by() -> None:
    """A symlink to bash is bash; a multi-call binary (coreutils, busybox) is what its argv[0] names."""
    links = {
        "x": ("/work/x", "/usr/bin/bash"),  # a link the agent made to an allowlisted shell
        "env": ("/usr/bin/env", "/usr/bin/coreutils"),
        "ls": ("/usr/bin/ls", "/usr/bin/coreutils"),
        "sh": ("/bin/sh", "/bin/busybox"),
        "curl": ("/usr/bin/curl",),
    }
    bash_and_coreutils = ExecApprovalPolicy(ask=Ask.OFF, allowlist=("/usr/bin/bash", "/usr/bin/coreutils", "/bin/busybox"))

    def decide(command: str) -> Mode:
        return evaluate(bash_and_coreutils, command, lambda word: links.get(word.rsplit("/", 1)[-1], ())).mode

    assert decide("/work/x -c 'curl x'") is Mode.DENY  # seen as bash -c: curl must be allowed
    assert decide("/work/x -c 'ls'") is Mode.ALLOW
    assert decide("env LD_PRELOAD=/tmp/x.so ls") is Mode.DENY  # env through coreutils is still env
    assert decide("env LANG=C ls") is Mode.ALLOW
    assert decide("sh -c 'curl x'") is Mode.DENY  # the busybox sh applet is a shell
    assert decide("exec -a sh /usr/bin/ls -c 'curl x'") is Mode.DENY  # coreutils as "sh": not ls
    assert decide("coreutils --coreutils-prog=env curl") is Mode.DENY


def test_a_wrapper_without_a_command_is_the_program() -> None:
    """env alone prints the environment: env is what runs, so env is what must be allowlisted."""
    assert evaluate(policy("ls"), "env LANG=C", resolve).mode is Mode.DENY
    assert evaluate(policy("env"), "env LANG=C", resolve).mode is Mode.ALLOW
    assert evaluate(policy("nice"), "nice", resolve).mode is Mode.ALLOW


# --- end to end: the real exec tool, the real sandbox -----------------------------------------------


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory the sandbox uid can reach (pytest's tmp_path sits under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="pincer-adv-"))
    os.chmod(path, 0o777)  # the sandboxed command would have to be able to create the marker
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _exec_runtime(scratch: Path, *, on_host: bool) -> ScriptRuntime:
    approvals = {"security": "allowlist", "ask": "off", "allowlist": ["/usr/bin/ls"]}
    settings = ScriptSettings(
        scratch_root=scratch, exec_policy=ExecApprovalPolicy.from_json(approvals), main_session_on_host=on_host
    )
    return ScriptRuntime([], settings)


@pytest.mark.anyio
@pytest.mark.parametrize("on_host", [False, True], ids=["sandbox", "main-session-on-host"])
async def test_exec_a_is_refused_by_the_real_exec_tool(public_dir: Path, on_host: bool) -> None:
    """Failed on main before the option tables: with ask=off and only /usr/bin/ls allowlisted,
    ``bash -c "exec -a /usr/bin/ls id"`` ran ``id`` (on the host, too, for the main session)."""
    runtime = _exec_runtime(public_dir / "scratch", on_host=on_host)
    spec = next(s for s in runtime.tools() if s.name == "exec")
    host = HostContext(session="main", tool="exec")
    marker = public_dir / "ran"
    for command in ('bash -c "exec -a /usr/bin/ls id"', f'bash -c "exec -a /usr/bin/ls touch {marker}"'):
        with pytest.raises(Denied) as caught:
            await runtime.invoke(spec, {"command": command}, host)
        assert "ask=off" in caught.value.message and "is not in the allowlist" in caught.value.message
    assert not marker.exists()
    # The allowlisted program itself still runs through the same tool.
    out = await runtime.invoke(spec, {"command": "ls /"}, host)
    assert out.value["exit_code"] == 0 and "usr" in out.value["stdout"].split()


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("exec -a env cat id", ("id",)),  # bash runs cat (named env), with the argument id
        ("exec -a env cat id", ("id", "env")),
        (r"exec \-a env 'cat' i\d", ("id",)),
        ("exec -a nice cat id", ("id",)),
        ("exec -a xargs cat id", ("id",)),
        ("exec -a timeout cat 5 id", ("id",)),
        ("exec -anice cat id", ("id",)),
        ("bash -c 'exec -a env cat id'", ("id", "bash")),
    ],
)
def test_exec_a_renaming_a_program_after_a_wrapper_is_not_seen_through(command: str, allowed: tuple[str, ...]) -> None:
    """Failed on main before this test (found by the hypothesis property in the red team's run):
    ``exec -a env cat id`` was read as the wrapper ``env`` running ``id``, so with ``id``
    allowlisted it was allowed, while bash runs ``cat`` under the name ``env``. A program is
    what it is; a name that says it is a wrapper (or a shell) it is not is refused."""
    result = evaluate(policy(*allowed), command, resolve)
    assert result.mode is Mode.DENY, result.reason
    assert "exec -a" in result.reason


def test_exec_a_under_its_own_kind_still_runs_the_program() -> None:
    """The name a program is given does not matter when it says what the program is."""
    assert evaluate(policy("cat"), "exec -a mycat cat notes.txt", resolve).mode is Mode.ALLOW
    assert evaluate(policy("env", "id"), "exec -a env env id", resolve).mode is Mode.ALLOW


# -- issue 20, item 15: shells that run a startup file -----------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "bash --rcfile rc.sh -i -c ls",
        "bash --init-file rc.sh -c ls",
        "bash -i -c ls",
        "bash -ic ls",
        "bash -l -c ls",
        "bash -lc ls",
        "bash --login -c ls",
        "bash -login -c ls",  # bash reads one-dash long options too
        "bash --rcfile rc.sh script.sh",
        "sh -i -c ls",  # dash -i reads $ENV, bash as sh reads it too
        "sh -l -c ls",  # a login sh reads ~/.profile
        "dash -i -c ls",
        "dash -l -c ls",
        "zsh -c ls",  # every zsh reads $ZDOTDIR/.zshenv (~/.zshenv) unless -f
        "zsh -i -c ls",
        "ksh -i -c ls",
        "env bash -i -c ls",
        "nice bash --login -c ls",
        "BASH_ENV=rc.sh bash -c ls",
        "ENV=rc.sh sh -i -c ls",
        "ZDOTDIR=/tmp zsh -c ls",
        "env BASH_ENV=rc.sh bash -c ls",
        "env ENV=rc.sh sh -c ls",
        "zsh -f +f -c ls",
        "zsh -f -o rcs -c ls",
        "zsh -f -o GLOBAL_RCS -c ls",
        # A dash in front of argv[0] makes a login shell too (found by the oracle property test:
        # `exec -a -i bash script.sh` ran /etc/profile's `id`): exec -a -NAME, and exec -l.
        "exec -a -i bash -c ls",
        "exec -a -sh sh -c ls",
        "exec -l bash -c ls",
        "exec -la x bash -c ls",
        "exec -a -bash bash --norc --noprofile -c ls",
    ],
)
def test_item_20_15_a_shell_reading_a_startup_file_is_not_allowed(command: str) -> None:
    """Failed on main for every row without an assignment: with bash, sh, dash, zsh, ksh and ls
    allowlisted, ``bash --rcfile FILE -i -c ls`` (and -i alone: ~/.bashrc; -l/--login:
    ~/.bash_profile; zsh: ~/.zshenv) was *allow*, yet bash runs FILE's code before ``ls``."""
    allowed = ExecApprovalPolicy(
        allowlist=(*policy("bash", "sh", "dash", "env", "nice", "ls").allowlist, "/usr/bin/zsh", "/usr/bin/ksh")
    )
    result = evaluate(allowed, command, _resolve_any_shell)
    assert result.mode is Mode.ASK, result.reason
    assert any(s.problem for s in result.segments), result.reason


@pytest.mark.parametrize("command", ["bash -c ls", "bash --norc --noprofile -c ls", "zsh -f -c ls", "sh -c ls",
                                     "exec -a mybash bash -c ls"])
def test_item_20_15_shells_without_a_startup_file_stay_allowed(command: str) -> None:
    allowed = ExecApprovalPolicy(allowlist=(*policy("bash", "sh", "ls").allowlist, "/usr/bin/zsh"))
    result = evaluate(allowed, command, _resolve_any_shell)
    assert result.mode is Mode.ALLOW, result.reason


def _resolve_any_shell(word: str) -> tuple[str, ...]:
    """The fixed table, plus zsh and ksh in /usr/bin."""
    return resolve(word) or ((f"/usr/bin/{word}",) if word in ("zsh", "ksh") else ())


@pytest.mark.parametrize(
    "command",
    [
        "xargs xargs -I {} env",  # the outer xargs appends its input after env: env runs it
        """ls ; ls ; xargs "xargs" '-'"I" \\{\\} env""",  # the form the hypothesis property found
        "xargs xargs -I{} nice",
        "xargs nice xargs -I {} env",
        "xargs xargs -i env",
    ],
)
def test_an_inner_xargs_with_a_replace_string_does_not_stop_the_outer_one_appending(command: str) -> None:
    """Failed on main before this test (found by the hypothesis property during the second
    hardening round): an inner ``xargs -I {}`` reset "xargs appends its input" for the rest of
    the line, so in ``xargs xargs -I {} env`` the outer xargs's input, appended after ``env``,
    was not seen as the command env runs, and with env and xargs allowlisted it was allowed."""
    result = evaluate(policy("ls", "xargs", "env", "nice"), command, resolve)
    assert result.mode is not Mode.ALLOW, result.reason
    assert "append" in result.reason
