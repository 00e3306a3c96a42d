"""``portfolio`` through the real call chain against a local stand-in for Dune Sim's balances API
(``GET /v1/evm/balances/{address}``, key in ``X-Sim-Api-Key``). ``scan`` reads, ``propose``
computes, ``build_intent`` builds an *unsigned* intent and asks first (``financial``) even where a
grant allows ``network``. Nothing signs or submits: no signing key is ever asked for, and no
endpoint that could take a signed payload is reachable.

Dune publishes no machine-readable description of the Sim API in a package registry (npm
``@duneanalytics/client-sdk`` and PyPI ``dune-client`` are clients of Dune Analytics' query API,
not of Sim), so the stand-in's pages follow Sim's documented balances answer and are checked
against nothing published."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from pincer.builtins import portfolio
from pincer.core.effects import EffectKind
from pincer.core.values import CallRequest, HostContext
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

KEY = "sim_dUneTestKey0123456789abcdefXYZ"
WALLET = "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045"
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"

PAGES = {
    None: {"wallet_address": WALLET.lower(), "next_offset": "dKMBWDLqM7vlyn5OMEXsLWp0nI4AAAABA5JLazNO7x4poVGqUwsgxgqvvIg",
           "request_time": "2026-01-02T10:00:00Z", "response_time": "2026-01-02T10:00:00Z",
           "balances": [{"chain": "ethereum", "chain_id": 1, "address": "native", "amount": "605371497350928252303",
                         "symbol": "ETH", "name": "Ether", "decimals": 18, "price_usd": 3000.0,
                         "value_usd": 1816114.49, "pool_size": 5.4, "low_liquidity": False}]},
    "dKMBWDLqM7vlyn5OMEXsLWp0nI4AAAABA5JLazNO7x4poVGqUwsgxgqvvIg": {
        "wallet_address": WALLET.lower(),
        "balances": [{"chain": "base", "chain_id": 8453, "address": USDC, "amount": "25000000000", "symbol": "USDC",
                      "name": "USD Coin", "decimals": 6, "price_usd": 1.0, "value_usd": 25000.0}]},
}


@contextmanager
def serve_dune() -> Iterator[Any]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            state.seen.append((self.command, url.path, query, dict(self.headers.items())))
            if self.headers.get("X-Sim-Api-Key") != KEY:
                status, payload = 401, {"error": "invalid API key"}
            elif url.path == f"/v1/evm/balances/{WALLET.lower()}" and query.get("offset") in PAGES:
                status, payload = 200, PAGES[query.get("offset")]
            else:
                status, payload = 404, {"error": "not found"}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            state.seen.append((self.command, self.path, {}, dict(self.headers.items())))
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True

    class State:
        seen: list[Any]
        origin = f"http://127.0.0.1:{server.server_address[1]}"

    state = State()
    state.seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)


def _config(origin: str, extra: str = "") -> str:
    return f"""
[builtins.dune]
base_url = "{origin}"

[builtins.portfolio]
enabled = true
{extra}

[approvals]
timeout_s = 30

[[grants]]
tool = "portfolio"
effects = {{ network = "allow", use_secret = "allow" }}
"""


VENUES = [
    {"name": "aave-v3-base", "chain": "base", "token": USDC, "symbol": "USDC", "apy": 0.061, "risk_score": 2},
    {"name": "degen-farm", "chain": "base", "token": USDC, "symbol": "USDC", "apy": 0.40, "risk_score": 9},
    {"name": "compound-base", "chain": "base", "token": USDC, "symbol": "USDC", "apy": 0.052, "risk_score": 2},
]


async def test_scan_propose_and_an_asked_unsigned_intent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    asked: list[Any] = []
    with serve_dune() as dune:
        async with pincer_on(tmp_path, _config(dune.origin), secrets={"dune_api_key": KEY}) as pincer:

            async def allow(approval: Any) -> None:
                asked.append(approval)
                await pincer.dispatcher.answer(approval.id, "allow_once", by="test")

            scan = await pincer.call(CallRequest(tool="portfolio", args={"action": "scan", "addresses": [WALLET],
                                                                         "chains": [1, 8453]}), on_approval=allow)
            proposal = await pincer.call(CallRequest(tool="portfolio", args={
                "action": "propose", "positions": scan.output["positions"],
                "config": {"floor_apy": 0.04, "max_risk_score": 3, "venues": VENUES}}), on_approval=allow)
            assert asked == []  # reads and computations ran under the grant
            plan = proposal.output["proposals"][0]["plan"]
            intent = await pincer.call(CallRequest(tool="portfolio", args={"action": "build_intent", "plan": plan}),
                                       on_approval=allow)
            records = await pincer.audit.records()
    assert scan.ok, scan.error
    assert [(p["symbol"], p["amount"], p["chain"]) for p in scan.output["positions"]] == [
        ("ETH", "605.371497350928252303", "ethereum"), ("USDC", "25000", "base")]
    assert scan.output["total_value_usd"] == 1841114.49
    assert [(m, p, q.get("offset")) for m, p, q, _ in dune.seen] == [
        ("GET", f"/v1/evm/balances/{WALLET.lower()}", None),
        ("GET", f"/v1/evm/balances/{WALLET.lower()}", "dKMBWDLqM7vlyn5OMEXsLWp0nI4AAAABA5JLazNO7x4poVGqUwsgxgqvvIg")]
    assert dune.seen[0][2]["chain_ids"] == "1,8453" and dune.seen[0][3]["X-Sim-Api-Key"] == KEY
    (best,) = proposal.output["proposals"]  # ETH is no stablecoin; degen-farm is over the risk cap
    assert best["rank"] == 1 and best["plan"]["to"]["venue"] == "aave-v3-base"
    assert best["annual_gain_usd"] == 1525.0
    assert intent.ok, intent.error
    (approval,) = asked
    assert list(approval.effects) == ["financial"]
    assert intent.output["signed"] is False and intent.output["intent"]["signer_id"] is None
    body = intent.output["intent"]
    assert body["intent"] == "deposit" and body["venue"] == "aave-v3-base"
    assert body["give"] == {"chain": "base", "token": USDC, "symbol": "USDC", "amount": "25000"}
    assert body["receive"]["min_amount"] == "24875"  # 50 bps of slippage
    for text in (json.dumps([scan.output, proposal.output, intent.output]),
                 json.dumps([dataclasses.asdict(r) for r in records], default=str), caplog.text):
        assert KEY not in text


async def test_build_intent_is_denied_when_nobody_allows_it(tmp_path: Path) -> None:
    plan = {"from": {"chain": "base", "token": USDC, "symbol": "USDC", "amount": "10"},
            "to": {"chain": "base", "token": USDC, "symbol": "USDC", "venue": "aave-v3-base"}}
    with serve_dune() as dune:
        async with pincer_on(tmp_path, _config(dune.origin), secrets={"dune_api_key": KEY}) as pincer:

            async def deny(approval: Any) -> None:
                await pincer.dispatcher.answer(approval.id, "deny", by="test")

            result = await pincer.call(CallRequest(tool="portfolio", args={"action": "build_intent", "plan": plan}),
                                       on_approval=deny)
    assert not result.ok and result.error["code"] == "approval_denied"


class _Recording:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def find(self, name: str) -> str | None:
        self.asked.append(name)
        return KEY if name == "dune_api_key" else None

    def record(self, value: str) -> None:
        return


async def test_nothing_signs_or_submits() -> None:
    """No signing key is ever asked for, no request but Dune's GET reads can leave, and the
    intent carries no signature."""
    caps = portfolio.manifest()
    assert caps.secrets_allowed_names == ("dune_api_key",)
    assert caps.http is not None
    assert {(e.host, e.path_prefix, tuple(e.methods or ())) for e in caps.http.allowlist} == {
        ("api.sim.dune.com", "/v1/evm/", ("GET",))}
    assert {a.name for a in portfolio.ACTIONS} == {"scan", "propose", "build_intent"}
    with serve_dune() as dune:
        tool = portfolio.portfolio_tool(base_url=dune.origin)
        secrets = _Recording()
        host = HostContext(session="main", tool="portfolio", capabilities=tool.spec.capabilities, secrets=secrets)
        scan = await tool.run({"action": "scan", "addresses": [WALLET]}, host)
        proposals = await tool.run({"action": "propose", "positions": scan["positions"],
                                    "config": {"venues": VENUES}}, host)
        intent = await tool.run({"action": "build_intent", "plan": proposals["proposals"][0]["plan"]}, host)
    assert set(secrets.asked) == {"dune_api_key"}
    assert {m for m, *_ in dune.seen} == {"GET"}
    text = json.dumps(intent).lower()
    assert "signature" not in text and '"signed": false' in text
    assert tool.spec.call_effects is not None
    assert tool.spec.call_effects.table["build_intent"] == frozenset({EffectKind.FINANCIAL})


async def test_propose_from_scans_own_output_says_what_else_each_strategy_needs() -> None:
    """Before: scan's positions fed to propose as scan returned them gave ``{"proposals": []}``
    with no word: one strategy needs a ``kind`` scan never emits, the other venues (yields) only
    the caller can give. Now each says so, and with the venues the same positions propose."""
    with serve_dune() as dune:
        tool = portfolio.portfolio_tool(base_url=dune.origin)
        host = HostContext(session="main", tool="portfolio", capabilities=tool.spec.capabilities, secrets=_Recording())
        scan = await tool.run({"action": "scan", "addresses": [WALLET]}, host)
        bare = await tool.run({"action": "propose", "positions": scan["positions"]}, host)
        with_venues = await tool.run({"action": "propose", "positions": scan["positions"], "config": {"venues": VENUES}}, host)
    assert {p["kind"] for p in scan["positions"]} == {"wallet"}  # what scan emits
    assert bare["proposals"] == []
    why = {n["strategy"]: n["why"] for n in bare["not_proposed"]}
    assert why["stablecoin-yield-floor"].startswith("config.venues is empty: scan reads balances, not yields")
    assert why["lending-health-guard"].startswith("no position of kind 'lending' with a health_factor: scan reads wallet")
    (proposal,) = with_venues["proposals"]
    assert proposal["plan"]["from"]["amount"] == "25000" and proposal["plan"]["to"]["venue"] == "aave-v3-base"
    assert [n["strategy"] for n in with_venues["not_proposed"]] == ["lending-health-guard"]
    # the action's description says the same to a model before it calls
    described = tool.spec.description + json.dumps(tool.spec.input_schema)
    assert "stablecoin-yield-floor also needs config.venues" in described
    assert "lending-health-guard needs positions of kind 'lending' with a health_factor" in described


def test_propose_ranks_by_gain_and_refuses_unknown_strategies() -> None:
    positions = [
        {"chain": "base", "token": USDC, "symbol": "USDC", "amount": "1000", "value_usd": 1000.0, "apy": 0.01},
        {"chain": "base", "token": USDC, "symbol": "USDC", "amount": "9000", "value_usd": 9000.0},
        {"chain": "ethereum", "token": "0xdai", "symbol": "DAI", "amount": "500", "value_usd": 500.0, "apy": 0.05},
        {"chain": "ethereum", "token": "0xweth", "symbol": "WETH", "amount": "2", "value_usd": 6000.0,
         "kind": "lending", "venue": "aave-v3", "health_factor": 1.1},
    ]
    out = portfolio.propose(positions, None, {"venues": VENUES})["proposals"]
    assert [(p["strategy"], p["annual_gain_usd"]) for p in out] == [
        ("lending-health-guard", 6000.0), ("stablecoin-yield-floor", 549.0), ("stablecoin-yield-floor", 51.0)]
    assert [p["rank"] for p in out] == [1, 2, 3]
    from pincer.core.errors import ArgumentsInvalid

    with pytest.raises(ArgumentsInvalid, match="near-staking-yield"):
        portfolio.propose(positions, ["near-staking-yield"], {})


def test_read_only_drops_build_intent() -> None:
    tool = portfolio.portfolio_tool(read_only=True)
    assert tool.spec.input_schema["properties"]["action"]["enum"] == ["scan", "propose"]


def test_pincer_auth_setup_dune_is_portfolios_key(tmp_path: Path) -> None:
    from pincer.builtins.auth import target
    from pincer.config import parse_config

    settings = parse_config(_config("http://127.0.0.1:9"), home=tmp_path).builtins
    item = target(settings, "dune")
    assert (item.name, item.secret_name, item.env_var) == ("portfolio", "dune_api_key", "DUNE_API_KEY")
    assert item.base.url("") == "http://127.0.0.1:9"  # [builtins.dune] base_url
