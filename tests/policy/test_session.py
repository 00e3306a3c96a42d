from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pincer.core.effects import Mode
from pincer.policy.session import SessionKind, SessionPolicy, evaluate_session


def policy(allow=(), deny=(), kind=SessionKind.MAIN) -> SessionPolicy:
    return SessionPolicy(name="s", kind=kind, allow=tuple(allow), deny=tuple(deny))


def test_empty_lists_allow_everything() -> None:
    assert evaluate_session(policy(), "anything").mode is Mode.ALLOW


def test_deny_wins_over_allow() -> None:
    p = policy(allow=["*"], deny=["http"])
    assert evaluate_session(p, "http").mode is Mode.DENY
    assert "'http'" in evaluate_session(p, "http").reason
    assert evaluate_session(p, "echo").mode is Mode.ALLOW


def test_non_empty_allow_list_blocks_the_rest() -> None:
    p = policy(allow=["echo"])
    assert evaluate_session(p, "echo").mode is Mode.ALLOW
    decision = evaluate_session(p, "time")
    assert decision.mode is Mode.DENY and "allow list" in decision.reason


def test_wildcards_and_case() -> None:
    p = policy(allow=["GitHub_*"], deny=["*_DELETE"])
    assert evaluate_session(p, "github_list").mode is Mode.ALLOW
    assert evaluate_session(p, "GITHUB_delete").mode is Mode.DENY


def test_groups_expand() -> None:
    p = policy(allow=["group:fs"], deny=["group:web"])
    assert evaluate_session(p, "read_file").mode is Mode.ALLOW
    assert evaluate_session(p, "apply_patch").mode is Mode.ALLOW
    assert evaluate_session(p, "http").mode is Mode.DENY
    assert evaluate_session(p, "exec").mode is Mode.DENY


def test_unknown_group_never_widens() -> None:
    assert evaluate_session(policy(allow=["group:typo"]), "echo").mode is Mode.DENY


def test_unconfigured_sessions_are_non_main_with_sandbox_default() -> None:
    main = SessionPolicy.default_for("main")
    assert main.kind is SessionKind.MAIN and evaluate_session(main, "http").mode is Mode.ALLOW
    other = SessionPolicy.default_for("telegram:group:42")
    assert other.kind is SessionKind.NON_MAIN
    for allowed in ("exec", "process", "read", "write", "edit", "apply_patch", "read_file"):
        assert evaluate_session(other, allowed).mode is Mode.ALLOW, allowed
    for denied in ("browser", "canvas", "cron", "gateway", "http"):
        assert evaluate_session(other, denied).mode is Mode.DENY, denied


names = st.text(min_size=0, max_size=40)


@given(allow=st.lists(names, max_size=6), deny=st.lists(names, max_size=6), tool=names)
def test_never_crashes_and_deny_always_wins(allow, deny, tool) -> None:
    decision = evaluate_session(policy(allow, deny), tool)
    assert decision.mode in (Mode.ALLOW, Mode.DENY)
    assert decision.reason
    is_denied_by_name = tool and tool.strip().lower() == tool.lower() and tool.lower() in [d.strip().lower() for d in deny]
    if is_denied_by_name and not any(c in tool for c in "*?[]"):
        assert decision.mode is Mode.DENY
