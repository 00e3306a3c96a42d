"""The ``portfolio`` built-in, after IronClaw's: ``scan`` a set of EVM wallets (token balances from
Dune Sim, ``GET /v1/evm/balances/{address}``, key ``dune_api_key`` injected as ``X-Sim-Api-Key``),
``propose`` ranked rebalancing moves from those positions, and ``build_intent``: one move as an
*unsigned* intent document for the person's own wallet to sign.

The tool never signs or submits anything: it has no signing key (its manifest allows only
``dune_api_key``), no action that signs, and its allowlist holds only Dune's ``GET`` reads, so no
submit endpoint is reachable even by mistake. ``build_intent`` still carries the ``financial``
effect, so a grant that allows reads leaves it asking: an intent is the first step of moving money.

``propose`` and ``build_intent`` are computations over their input (no request). IronClaw's NEAR
sources (FastNEAR, Intear) and its solver-relay quote are not offered.
"""

from __future__ import annotations

import datetime as dt
import secrets as pysecrets
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from pincer.builtins.actions import READ_EFFECTS, Action
from pincer.builtins.api import ApiClient, error_message, json_body
from pincer.builtins.api_tool import ApiTool
from pincer.builtins.tool import bundled_manifest
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind
from pincer.core.errors import ApiRateLimited, ArgumentsInvalid, ToolError

__all__ = ["ACTIONS", "FIELDS", "STRATEGIES", "portfolio_tool", "manifest", "propose", "build_intent", "DEFAULT_BASE_URL"]

DEFAULT_HOST = "api.sim.dune.com"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
MAX_ADDRESSES = 20
MAX_PAGES_PER_ADDRESS = 5  # Dune Sim pages balances; a wallet past 5 pages is cut (said in the answer)
DEFAULT_FLOOR_APY = 0.04  # IronClaw's config defaults
DEFAULT_MAX_RISK_SCORE = 3
DEFAULT_MAX_SLIPPAGE_BPS = 50
DEFAULT_MIN_HEALTH_FACTOR = 1.5
DEFAULT_DEADLINE_S = 600
STABLECOINS = frozenset({"USDC", "USDT", "DAI", "USDC.E", "USDBC", "FRAX", "LUSD", "PYUSD", "USDS", "GHO"})

_ADDRESS = {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}
_POSITION = {
    "type": "object",
    "properties": {
        "wallet": _ADDRESS,
        "chain": {"type": "string"},
        "token": {"type": "string"},
        "symbol": {"type": "string"},
        "amount": {"type": "string"},
        "value_usd": {"type": ["number", "null"]},
        "apy": {"type": ["number", "null"]},
        "kind": {"type": "string", "enum": ["wallet", "lending", "lp", "staking"]},
        "venue": {"type": "string"},
        "health_factor": {"type": ["number", "null"]},
    },
    "required": ["chain", "token", "symbol", "amount"],
}
_VENUE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "chain": {"type": "string"},
        "token": {"type": "string"},
        "symbol": {"type": "string"},
        "apy": {"type": "number"},
        "risk_score": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["name", "chain", "symbol", "apy", "risk_score"],
}
_MOVE = {
    "type": "object",
    "properties": {
        "wallet": _ADDRESS,
        "chain": {"type": "string"},
        "token": {"type": "string"},
        "symbol": {"type": "string"},
        "amount": {"type": "string"},
        "venue": {"type": "string"},
        "action": {"type": "string"},
    },
    "required": ["chain", "symbol"],
}

FIELDS: dict[str, dict[str, Any]] = {
    "addresses": {"type": "array", "items": _ADDRESS, "minItems": 1, "maxItems": MAX_ADDRESSES,
                  "description": "EVM wallet addresses (0x...)"},
    "chains": {"type": "array", "items": {"type": "integer", "minimum": 1}, "description": "Chain ids (default: all)"},
    "positions": {"type": "array", "items": _POSITION, "maxItems": 2000,
                  "description": "scan's positions as it returned them, plus any lending positions (kind: lending, health_factor)"},
    "strategies": {"type": "array", "items": {"type": "string"}, "description": "Strategy names (default: all)"},
    "config": {
        "type": "object",
        "properties": {
            "floor_apy": {"type": "number", "minimum": 0, "maximum": 10},
            "max_risk_score": {"type": "integer", "minimum": 0, "maximum": 10},
            "max_slippage_bps": {"type": "integer", "minimum": 0, "maximum": 10_000},
            "min_health_factor": {"type": "number", "minimum": 1},
            "min_value_usd": {"type": "number", "minimum": 0},
            "deadline_s": {"type": "integer", "minimum": 60, "maximum": 86_400},
            "venues": {"type": "array", "items": _VENUE, "maxItems": 200},
        },
        "additionalProperties": False,
        "description": "Thresholds; venues: where yield is available (name, chain, symbol, apy, risk_score)",
    },
    "plan": {
        "type": "object",
        "properties": {"from": _MOVE, "to": _MOVE, "max_slippage_bps": {"type": "integer", "minimum": 0, "maximum": 10_000}},
        "required": ["from", "to"],
        "description": "One movement of a proposal (its plan)",
    },
}


def _decimal_amount(raw: Any, decimals: Any) -> str:
    try:
        value = Decimal(str(raw)) / (Decimal(10) ** int(decimals or 0))
    except (InvalidOperation, ValueError, TypeError):
        return str(raw)
    return format(value.normalize(), "f")


async def scan(api: ApiClient, args: Mapping[str, Any]) -> Any:
    positions: list[dict[str, Any]] = []
    cut: list[str] = []
    for wallet in args["addresses"]:
        offset: str | None = None
        for _page in range(MAX_PAGES_PER_ADDRESS):
            query = {
                "chain_ids": ",".join(str(c) for c in args["chains"]) if args.get("chains") else None,
                "exclude_spam_tokens": True,
                "offset": offset,
            }
            response = await api.request("GET", f"/v1/evm/balances/{wallet.lower()}", query=query)
            data = _check(response)
            for b in data.get("balances") or []:
                if not isinstance(b, Mapping):
                    continue
                positions.append(
                    {
                        "wallet": wallet,
                        "chain": str(b.get("chain") or b.get("chain_id")),
                        "token": str(b.get("address") or "native"),
                        "symbol": str(b.get("symbol") or "?"),
                        "amount": _decimal_amount(b.get("amount"), b.get("decimals")),
                        "value_usd": b.get("value_usd"),
                        "apy": None,
                        "kind": "wallet",
                    }
                )
            offset = data.get("next_offset") if isinstance(data.get("next_offset"), str) else None
            if not offset:
                break
        else:
            cut.append(wallet)
    total = sum(float(p["value_usd"]) for p in positions if isinstance(p["value_usd"], (int, float)))
    return {"positions": positions, "total_value_usd": round(total, 2), "cut_wallets": cut}


def _check(response: Any) -> dict[str, Any]:
    if response.status == 429:
        raise ApiRateLimited("portfolio: Dune Sim's rate limit is spent", hint="wait and retry")
    if response.status in (401, 403):
        raise ToolError(
            f"portfolio: Dune Sim refused the API key ({response.status}: {error_message(response)})",
            hint="set a valid key with `pincer auth setup portfolio`",
        )
    if response.status != 200:
        raise ToolError(f"portfolio: Dune Sim answered {response.status}: {error_message(response)}", hint="retry later")
    data = json_body(response, "portfolio")
    if not isinstance(data, Mapping):
        raise ToolError("portfolio: Dune Sim answered without a balances object", hint="retry later")
    return dict(data)


def _stable_floor(positions: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    floor = float(config.get("floor_apy", DEFAULT_FLOOR_APY))
    max_risk = int(config.get("max_risk_score", DEFAULT_MAX_RISK_SCORE))
    minimum = float(config.get("min_value_usd", 0))
    venues = [v for v in config.get("venues") or [] if v["risk_score"] <= max_risk and v["apy"] >= floor]
    out = []
    for p in positions:
        symbol = str(p["symbol"]).upper()
        value = p.get("value_usd")
        apy = float(p.get("apy") or 0)
        if symbol not in STABLECOINS or apy >= floor or not isinstance(value, (int, float)) or value < minimum:
            continue
        same = [v for v in venues if str(v["symbol"]).upper() == symbol]
        if not same:
            continue
        best = max(same, key=lambda v: (v["apy"], -v["risk_score"]))
        out.append(
            {
                "strategy": "stablecoin-yield-floor",
                "reason": f"{symbol} earns {apy:.2%}, under the {floor:.2%} floor; {best['name']} offers {best['apy']:.2%}",
                "annual_gain_usd": round(float(value) * (best["apy"] - apy), 2),
                "risk_score": best["risk_score"],
                "plan": {
                    "from": {k: p.get(k) for k in ("wallet", "chain", "token", "symbol", "amount")},
                    "to": {"chain": best["chain"], "token": best.get("token", p["token"]), "symbol": best["symbol"],
                           "venue": best["name"], "action": "deposit"},
                    "max_slippage_bps": int(config.get("max_slippage_bps", DEFAULT_MAX_SLIPPAGE_BPS)),
                },
            }
        )
    return out


def _health_guard(positions: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[dict[str, Any]]:
    minimum = float(config.get("min_health_factor", DEFAULT_MIN_HEALTH_FACTOR))
    out = []
    for p in positions:
        health = p.get("health_factor")
        if p.get("kind") != "lending" or not isinstance(health, (int, float)) or health >= minimum:
            continue
        value = float(p.get("value_usd") or 0)
        out.append(
            {
                "strategy": "lending-health-guard",
                "reason": f"health factor {health:.2f} on {p.get('venue', 'a lending market')} is under {minimum:.2f}",
                # Ranked as the value at risk of liquidation, not a gain.
                "annual_gain_usd": round(value, 2),
                "risk_score": 0,
                "plan": {
                    "from": {k: p.get(k) for k in ("wallet", "chain", "token", "symbol", "amount")},
                    "to": {"chain": p["chain"], "token": p["token"], "symbol": p["symbol"],
                           "venue": p.get("venue", ""), "action": "repay"},
                    "max_slippage_bps": int(config.get("max_slippage_bps", DEFAULT_MAX_SLIPPAGE_BPS)),
                },
            }
        )
    return out


STRATEGIES = {"stablecoin-yield-floor": _stable_floor, "lending-health-guard": _health_guard}


def _why_no_yield_move(positions: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> str:
    if not config.get("venues"):
        return ("config.venues is empty: scan reads balances, not yields, so give the venues where yield is available "
                "(name, chain, symbol, apy, risk_score)")
    floor = float(config.get("floor_apy", DEFAULT_FLOOR_APY))
    return (f"no stablecoin position earning under the {floor:.2%} floor (and worth at least config.min_value_usd) "
            "has a venue in config.venues of its symbol within config.max_risk_score that pays the floor")


def _why_no_health_move(positions: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> str:
    if not any(p.get("kind") == "lending" and isinstance(p.get("health_factor"), (int, float)) for p in positions):
        return ("no position of kind 'lending' with a health_factor: scan reads wallet balances only, so add your "
                "lending positions (kind: lending, venue, health_factor) from the lending market")
    minimum = float(config.get("min_health_factor", DEFAULT_MIN_HEALTH_FACTOR))
    return f"every lending position's health factor is at least config.min_health_factor ({minimum:.2f})"


STRATEGY_NEEDS = {"stablecoin-yield-floor": _why_no_yield_move, "lending-health-guard": _why_no_health_move}


def propose(positions: Sequence[Mapping[str, Any]], strategies: Sequence[str] | None, config: Mapping[str, Any]) -> Any:
    """Every chosen strategy's proposals, highest ``annual_gain_usd`` first, and for each strategy
    that proposed nothing, why (most often what scan's positions cannot tell it)."""
    names = list(strategies or STRATEGIES)
    unknown = sorted(set(names) - set(STRATEGIES))
    if unknown:
        raise ArgumentsInvalid(
            f"portfolio.propose: unknown strategy {', '.join(unknown)}",
            hint=f"use some of: {', '.join(STRATEGIES)} (or leave strategies out for all)",
        )
    found: list[dict[str, Any]] = []
    not_proposed = []
    for name in names:
        items = STRATEGIES[name](positions, config)
        found += items
        if not items:
            not_proposed.append({"strategy": name, "why": STRATEGY_NEEDS[name](positions, config)})
    found.sort(key=lambda p: p["annual_gain_usd"], reverse=True)
    return {"proposals": [{"rank": i + 1, **p} for i, p in enumerate(found)], "not_proposed": not_proposed}


def build_intent(plan: Mapping[str, Any], config: Mapping[str, Any], *, now: dt.datetime | None = None) -> Any:
    """One move as an unsigned intent: what leaves, what must arrive, until when. No signature,
    no signer key, nothing sent anywhere."""
    source, target = plan["from"], plan["to"]
    slippage = int(plan.get("max_slippage_bps", config.get("max_slippage_bps", DEFAULT_MAX_SLIPPAGE_BPS)))
    amount = str(source.get("amount") or "")
    try:
        value = Decimal(amount)
    except InvalidOperation:
        raise ArgumentsInvalid(
            f"portfolio.build_intent: plan.from.amount {amount[:40]!r} is not a decimal amount",
            hint="pass the plan of a proposal as propose answered it",
        ) from None
    if value <= 0:
        raise ArgumentsInvalid("portfolio.build_intent: plan.from.amount must be positive", hint="pass a positive amount")
    same_asset = str(source["symbol"]).upper() == str(target["symbol"]).upper()
    minimum = value * (Decimal(10_000 - slippage) / Decimal(10_000)) if same_asset else None
    deadline = (now or dt.datetime.now(dt.UTC)) + dt.timedelta(seconds=int(config.get("deadline_s", DEFAULT_DEADLINE_S)))

    def side(move: Mapping[str, Any]) -> dict[str, Any]:
        return {"chain": move["chain"], "token": move.get("token"), "symbol": move["symbol"]}

    return {
        "signed": False,
        "intent": {
            "intent": target.get("action") or "move",
            "signer_id": None,  # filled in by the wallet that signs it, never by pincer
            "owner": source.get("wallet"),
            "give": {**side(source), "amount": format(value.normalize(), "f")},
            "receive": {**side(target), "min_amount": format(minimum.normalize(), "f") if minimum is not None else None},
            "venue": target.get("venue"),
            "max_slippage_bps": slippage,
            "deadline": deadline.isoformat().replace("+00:00", "Z"),
            "nonce": pysecrets.token_urlsafe(24),
        },
        "next_step": "review the intent, then sign and submit it with your own wallet; pincer never signs or submits",
    }


async def _propose(_api: ApiClient, args: Mapping[str, Any]) -> Any:
    return propose(args["positions"], args.get("strategies"), args.get("config") or {})


async def _build_intent(_api: ApiClient, args: Mapping[str, Any]) -> Any:
    return build_intent(args["plan"], args.get("config") or {})


ACTIONS: tuple[Action, ...] = (
    Action(name="scan", toolset="portfolio", handler=scan, required=("addresses",), optional=("chains",),
           effects=READ_EFFECTS, description="token positions of EVM wallets, with USD values (Dune Sim)"),
    Action(name="propose", toolset="portfolio", handler=_propose, required=("positions",),
           optional=("strategies", "config"), effects=frozenset(),
           description="ranked rebalancing proposals from positions as scan returns them, and per strategy that "
           "proposed nothing, why. stablecoin-yield-floor also needs config.venues (where yield is available: scan "
           "reads balances, not yields); lending-health-guard needs positions of kind 'lending' with a health_factor "
           "(scan returns wallet balances only: add them from the lending market)"),
    # ``writes`` so read_only drops it: an intent is the start of moving money.
    Action(name="build_intent", toolset="portfolio", handler=_build_intent, required=("plan",), optional=("config",),
           writes=True, effects=frozenset({EffectKind.FINANCIAL}),
           description="one proposal's plan as an UNSIGNED intent for your own wallet to sign"),
)

DESCRIPTION = (
    "DeFi portfolio helper: scan EVM wallets' token positions (Dune Sim), propose ranked rebalancing moves, and "
    "build an unsigned intent for one move. Never signs or submits anything; the Dune key is added by pincer."
)


def manifest() -> Capabilities:
    return bundled_manifest("portfolio")


PORTFOLIO = ApiTool(
    name="portfolio", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS, hosts=(DEFAULT_HOST,),
    base_url_key="[builtins.portfolio] base_url (or [builtins.dune] base_url)",
)  # fmt: skip
portfolio_tool = PORTFOLIO.tool
