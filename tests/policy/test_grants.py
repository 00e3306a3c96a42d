from __future__ import annotations

import pytest

from pincer.core.effects import EffectKind as E
from pincer.core.effects import Mode, RuntimeKind
from pincer.core.values import ToolSpec
from pincer.policy.grants import Grant, evaluate_grants


def spec(name: str, *effects: E) -> ToolSpec:
    return ToolSpec(
        name=name, description="", input_schema={"type": "object"}, effects=frozenset(effects),
        runtime=RuntimeKind.NATIVE, side_effecting=False, source="test",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("effects", "mode"),
    [
        ((), Mode.ALLOW),
        ((E.READ_FILESYSTEM,), Mode.ALLOW),
        ((E.READ_FILESYSTEM, E.NETWORK), Mode.ASK),
        ((E.WRITE_FILESYSTEM,), Mode.ASK),
        ((E.FINANCIAL,), Mode.ASK),
    ],
)
def test_defaults_without_grants(effects, mode) -> None:
    decision = evaluate_grants(spec("t", *effects), [], now=0)
    assert decision.mode is mode
    assert decision.reason


def test_strictest_effect_decides_and_reason_names_it() -> None:
    grant = Grant(tool="http", effects={E.NETWORK: Mode.ALLOW, E.USE_SECRET: Mode.DENY})
    decision = evaluate_grants(spec("http", E.NETWORK, E.USE_SECRET), [grant], now=0)
    assert decision.mode is Mode.DENY
    assert "use_secret" in decision.reason and grant.id in decision.reason


def test_effects_left_open_fall_back_to_default() -> None:
    grant = Grant(tool="http", effects={E.NETWORK: Mode.ALLOW}, hosts=("api.github.com",))
    decision = evaluate_grants(spec("http", E.NETWORK, E.EXTERNAL_WRITE), [grant], now=0)
    assert decision.mode is Mode.ASK
    assert evaluate_grants(spec("http", E.NETWORK), [grant], now=0).hosts == ("api.github.com",)


def test_exact_grant_beats_pattern_case_insensitively() -> None:
    broad = Grant(tool="GitHub_*", default=Mode.DENY)
    exact = Grant(tool="github_issues", default=Mode.ALLOW)
    assert evaluate_grants(spec("github_issues", E.NETWORK), [broad, exact], now=0).mode is Mode.ALLOW
    assert evaluate_grants(spec("github_repos", E.NETWORK), [broad, exact], now=0).mode is Mode.DENY


def test_expired_and_used_up_grants_are_passed_over_with_a_reason() -> None:
    expired = Grant(tool="t", default=Mode.ALLOW, expires_at=100.0)
    decision = evaluate_grants(spec("t", E.NETWORK), [expired], now=200.0)
    assert decision.mode is Mode.ASK and "expired" in decision.reason
    capped = Grant(tool="t", default=Mode.ALLOW, max_invocations=2)
    assert evaluate_grants(spec("t", E.NETWORK), [capped], now=0, uses=lambda _: 1).mode is Mode.ALLOW
    decision = evaluate_grants(spec("t", E.NETWORK), [capped], now=0, uses=lambda _: 2)
    assert decision.mode is Mode.ASK and "used all 2" in decision.reason


def test_grant_ids_are_stable_and_distinct() -> None:
    a = Grant(tool="t", default=Mode.ALLOW)
    assert a.id == Grant(tool="t", default=Mode.ALLOW).id
    assert a.id != Grant(tool="t", default=Mode.ASK).id
