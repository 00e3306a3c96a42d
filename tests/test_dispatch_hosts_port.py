"""Hosts with a port through the call chain (issue 27 item 3): an asked call to
``http://127.0.0.1:8080/`` is approved for ``127.0.0.1:8080``, not for every port of that
address, in the call's HostContext and in the grant an ``allow_always`` records; a grant's
``hosts`` entry that is not a host pattern is a config error naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pincer.config import parse_config
from pincer.core.effects import EffectKind as E
from pincer.core.errors import ConfigError
from pincer.core.values import CallRequest
from pincer.dispatch import planned_hosts
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime

KEY = b"k" * 32
URL_SCHEMA = {"type": "object", "properties": {"url": {"type": "string"}}}


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("http://127.0.0.1:8080/x", ("127.0.0.1:8080",)),
        ("https://shop.example/cart", ("shop.example",)),
        ("http://[::1]:9000/", ("[::1]:9000",)),
        ("https://Shop.Example:443/", ("shop.example:443",)),
    ],
)
def test_planned_hosts_keep_an_explicit_port(url: str, hosts: tuple[str, ...]) -> None:
    """Before: the port was dropped, so approving one local service approved every port of its address."""
    spec = FuncRuntime()
    spec.add("fetch", _seen, effects=[E.NETWORK], schema=URL_SCHEMA)
    assert planned_hosts(spec.specs["fetch"], {"url": url}) == hosts


seen: list[Any] = []


async def _seen(args: Any, host: Any) -> str:
    seen.append(host.network_hosts)
    return "ok"


@pytest.mark.anyio
async def test_an_approved_call_and_its_remembered_grant_carry_the_port(tmp_path: Path) -> None:
    config = parse_config("[approvals]\ntimeout_s = 5\n", home=tmp_path)
    runtime = FuncRuntime()
    runtime.add("fetch", _seen, effects=[E.NETWORK], schema=URL_SCHEMA)
    seen.clear()
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False) as pincer:
        await pincer.add_runtime(runtime)

        async def always(approval: Any) -> None:
            assert approval.hosts == ("127.0.0.1:8080",)
            await pincer.dispatcher.answer(approval.id, "allow_always", by="test")

        result = await pincer.call(
            CallRequest(tool="fetch", args={"url": "http://127.0.0.1:8080/a"}), on_approval=always
        )
        assert result.ok, result.error
        assert seen == [("127.0.0.1:8080",)]
        remembered = [g for g in await pincer.grants.all() if g.tool == "fetch"]
        assert [g.hosts for g in remembered] == [("127.0.0.1:8080",)]


def test_a_grant_host_that_is_not_a_pattern_is_a_config_error(tmp_path: Path) -> None:
    text = '[[grants]]\ntool = "http"\neffects = { network = "allow" }\nhosts = ["127.0.0.1:99999"]\n'
    with pytest.raises(ConfigError) as raised:
        parse_config(text, home=tmp_path)
    assert "grants.0" in raised.value.message and "127.0.0.1:99999" in raised.value.message
