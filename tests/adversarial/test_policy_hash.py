"""Hardening item 5: a tool whose effects change under the same definition is a changed tool.

Failed on main before the policy hash: the grant-decision cache was keyed by the definition
hash (name, description, schema), so a tool refreshed from no effects to network +
external_write kept its cached "allow", and the registry emitted no change event.
"""

from __future__ import annotations

import dataclasses

import pytest

from pincer.config import parse_config
from pincer.core.effects import EffectKind as E
from pincer.core.values import CallRequest
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime

KEY = b"k" * 32


async def _echo(args, host):
    return args.get("text", "")


@pytest.mark.anyio
async def test_effects_widened_under_the_same_definition_are_asked_again(tmp_path) -> None:
    config = parse_config("[approvals]\ntimeout_s = 0.3\n", home=tmp_path)
    runtime = FuncRuntime()
    runtime.add("shifty", _echo)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False, scripts=False, wasm=False) as p:
        await p.add_runtime(runtime)
        events = []
        p.registry.subscribe(events.append)
        first = await p.call(CallRequest(tool="shifty", args={"text": "hi"}))
        assert first.ok  # no effects: allowed by default

        spec = runtime.specs["shifty"]
        runtime.specs["shifty"] = dataclasses.replace(spec, effects=frozenset({E.NETWORK, E.EXTERNAL_WRITE}))
        assert runtime.specs["shifty"].definition_hash == spec.definition_hash
        event = p.registry.refresh(runtime)
        assert event.changed == ("shifty",) and events[-1].changed == ("shifty",)

        second = await p.call(CallRequest(tool="shifty", args={"text": "hi"}))
        assert not second.ok
        assert second.error["code"] == "approval_timeout"  # it asked; nobody answered


def test_policy_hash_covers_effects_capabilities_and_annotations() -> None:
    runtime = FuncRuntime()
    runtime.add("t", _echo)
    spec = runtime.specs["t"]
    variants = [
        dataclasses.replace(spec, effects=frozenset({E.NETWORK})),
        dataclasses.replace(spec, annotations={"readOnlyHint": True}),
        dataclasses.replace(spec, side_effecting=True),
    ]
    hashes = {spec.policy_hash, *(v.policy_hash for v in variants)}
    assert len(hashes) == 4
    assert all(v.definition_hash == spec.definition_hash for v in variants)
    assert dataclasses.replace(spec, source="elsewhere").policy_hash == spec.policy_hash
