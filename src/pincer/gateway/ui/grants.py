"""``/ui/grants``: the grants in force (config.toml's, read-only here, and the stored ones that
"allow always" answers and this page add), add one, revoke a stored one. Editing takes a main
session (an agent must not widen its own grants, as it must not answer its own approvals), and
every edit is an audit record of effect ``modify_approval``."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.acts import ActKind
from pincer.core.display import honest_json
from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import UsageError
from pincer.gateway.access import OPERATE_FORBIDDEN_HINT, may_operate
from pincer.gateway.ui.auth import UI_PREFIX, UiIdentity, read_form, read_form_pairs, require_csrf, require_identity
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.policy.grants import Grant, grant_applies_to
from pincer.safety.hosts import HostPattern
from pincer.store.acts import act_entry

__all__ = ["MAX_GRANT_HOURS", "routes"]

MAX_GRANT_HOURS = 24 * 365
MAX_GRANT_HOSTS = 64
HOUR_CHOICES = ((1, "1 hour"), (8, "8 hours"), (24, "1 day"), (168, "7 days"), (720, "30 days"))
_TOOL_PATTERN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-*")


async def _visible_grants(services: DashboardServices, identity: UiIdentity) -> list[tuple[Grant, bool]]:
    """(grant, stored) pairs the reader may see: all for a main session, else those covering it."""
    kind = identity.session.kind.value
    pairs = [(g, False) for g in services.config().grants] + [(g, True) for g in await services.grants.all()]
    return [(g, stored) for g, stored in pairs if identity.is_main or grant_applies_to(g, identity.name, kind)]


async def _context(request: Request, identity: UiIdentity, **extra: Any) -> dict[str, Any]:
    services, pages = services_of(request), pages_of(request)
    rows = [{"grant": g, "stored": stored, "effects": sorted((k.value, v.value) for k, v in g.effects.items()),
             "raw": honest_json(pages.redact(g.to_dict()), indent=2)}
            for g, stored in await _visible_grants(services, identity)]  # fmt: skip
    return {"grants": rows, "can_edit": may_operate(identity.session), "effects": [e.value for e in EffectKind],
            "modes": [m.value for m in Mode], "error": None, "notice": None, "form": {}, "chosen": [],
            "hour_choices": HOUR_CHOICES, **extra}  # fmt: skip


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    notice = request.query_params.get("done")
    shown = {"added": "grant added", "revoked": "grant revoked"}.get(notice or "")
    return pages_of(request).render(request, "grants.html", await _context(request, identity, notice=shown))


async def _refused(request: Request, identity: UiIdentity, status: int, message: str, **kept: Any) -> Response:
    """The page again with ``message``; ``kept`` (form, chosen) fills the form in as it was sent."""
    context = await _context(request, identity, error=message, **kept)
    return pages_of(request).render(request, "grants.html", context, status=status)


async def _audit(services: DashboardServices, identity: UiIdentity, grant: Grant, outcome: str) -> None:
    await services.audit.append(
        act_entry(ActKind.GRANT, actor=identity.actor, subject=grant.tool, outcome=outcome,
                  reason=f"grant {grant.id} {outcome}", args=grant.to_dict())
    )  # fmt: skip


def _grant_from(form: dict[str, str], effects: list[str], who: str) -> Grant | str:
    """The grant the form describes, or what is wrong with it."""
    tool = form.get("tool", "").strip()
    if not tool or len(tool) > 256 or not set(tool) <= _TOOL_PATTERN_CHARS:
        return "tool: a tool name or a * pattern (letters, digits, _ . - *)"
    mode = form.get("mode", "")
    if mode not in {m.value for m in Mode}:
        return "mode: allow, ask or deny"
    known = {e.value for e in EffectKind}
    if not effects or not set(effects) <= known:
        return "effects: choose at least one effect"
    sessions = tuple(s.strip() for s in form.get("sessions", "").split(",") if s.strip()) or None
    hosts = tuple(h.strip().lower() for h in form.get("hosts", "").replace("\n", ",").split(",") if h.strip()) or None
    for host in hosts or ():
        try:
            HostPattern.parse(host)
        except UsageError as exc:
            return f"hosts: {host!r} is not a host pattern ({exc.message}); write api.example.com, *.example.com or 127.0.0.1:8080"
    if hosts and len(hosts) > MAX_GRANT_HOSTS:
        return f"hosts: at most {MAX_GRANT_HOSTS} patterns"
    hours = form.get("hours", "").strip()
    expires_at = None
    if hours:
        try:
            value = float(hours)
        except ValueError:
            return "expires in: a number of hours"
        if not 0 < value <= MAX_GRANT_HOURS:
            return f"expires in: between 0 and {MAX_GRANT_HOURS} hours"
        expires_at = time.time() + value * 3600
    return Grant(tool=tool, effects={EffectKind(e): Mode(mode) for e in effects}, sessions=sessions, hosts=hosts,
                 expires_at=expires_at, source=f"dashboard ({who})")  # fmt: skip


_EDIT_FORBIDDEN = "{who} may not edit grants; use a main session's token, or " + OPERATE_FORBIDDEN_HINT


async def add(request: Request) -> Response:
    identity = await require_identity(request)
    pairs = await read_form_pairs(request)
    form: dict[str, str] = {}
    for key, value in pairs:
        form.setdefault(key, value)
    require_csrf(identity, form)
    if not may_operate(identity.session):
        return await _refused(request, identity, 403, _EDIT_FORBIDDEN.format(who=identity.actor))
    effects = [value for key, value in pairs if key == "effects"]
    made = _grant_from(form, effects, str(identity.actor))
    if isinstance(made, str):
        return await _refused(request, identity, 400, made, form=form, chosen=effects)
    services = services_of(request)
    await services.grants.add(made)
    await _audit(services, identity, made, "added")
    return RedirectResponse(f"{UI_PREFIX}/grants?done=added", status_code=303)


async def revoke(request: Request) -> Response:
    identity = await require_identity(request)
    require_csrf(identity, await read_form(request))
    if not may_operate(identity.session):
        return await _refused(request, identity, 403, _EDIT_FORBIDDEN.format(who=identity.actor))
    services = services_of(request)
    grant_id = request.path_params["grant_id"]
    grant = next((g for g in await services.grants.all() if g.id == grant_id), None)
    if grant is None:
        return await _refused(request, identity, 404, f"no stored grant {grant_id!r} (grants in config.toml are edited there)")
    await services.grants.remove(grant_id)
    await _audit(services, identity, grant, "revoked")
    return RedirectResponse(f"{UI_PREFIX}/grants?done=revoked", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/grants", page, methods=["GET"]),
        Route("/grants", add, methods=["POST"]),
        Route("/grants/{grant_id:str}/revoke", revoke, methods=["POST"]),
    ]
