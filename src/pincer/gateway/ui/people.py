"""``/ui/tokens``: a signed-in person's own personal access tokens (make one, shown once; list
them with their last use; revoke one), and ``/ui/people``: the people of this store for an admin
(add, set roles, remove). Server-rendered forms with the sign-in's CSRF token, no script needed.

The acts are store/people_acts.py's, as the CLI and REST make them. A person sees, makes and
revokes only their own tokens (another's is answered as no token at all), scoped to roles they
hold and, unless signed in with a main session, to the session they are signed in to (a token
must not see more than the sign-in that made it). A token's value is on the one page that made
it (never cached: every dashboard page is ``no-store``), never in a log or a record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.errors import UsageError
from pincer.gateway.access import MANAGE_PEOPLE_FORBIDDEN_HINT, may_manage_people
from pincer.gateway.ui.auth import UI_PREFIX, UiIdentity, read_form, read_form_pairs, require_csrf, require_identity
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.policy.roles import Roles, parse_roles
from pincer.store.people import NewToken, PeopleStore, parse_expiry
from pincer.store.people_acts import add_person, make_token, remove_person, revoke_token, set_person_roles

__all__ = ["routes"]

_NO_PERSON = "personal access tokens are a person's: sign in with your own token or single sign-on"
_DONE = {"revoked": "token revoked", "added": "person added", "roles": "roles set", "removed": "person removed"}


# -- a person's own tokens ---------------------------------------------------------------------


async def _tokens_page(request: Request, identity: UiIdentity, *, status: int = 200, error: str | None = None,
                       made: NewToken | None = None, notice: str | None = None) -> Response:  # fmt: skip
    person = identity.session.person
    services = services_of(request)
    held = await services.people.get(person) if person is not None else None
    context: dict[str, Any] = {
        "person": person, "tokens": await services.people.tokens(person) if person is not None else [],
        "own_roles": held.roles.written() if held is not None else [], "made": made, "error": error or (None if person else _NO_PERSON),
        "notice": notice, "session_free": identity.is_main, "now": time.time(),
    }  # fmt: skip
    return pages_of(request).render(request, "tokens.html", context, status=status)


async def tokens_page(request: Request) -> Response:
    identity = await require_identity(request)
    return await _tokens_page(request, identity, notice=_DONE.get(request.query_params.get("done") or ""))


async def make(request: Request) -> Response:
    identity = await require_identity(request)
    pairs = await read_form_pairs(request)
    form = dict(reversed(pairs))  # a repeated field keeps its first value
    require_csrf(identity, form)
    person = identity.session.person
    if person is None:
        return await _tokens_page(request, identity, status=403)
    session = form.get("session", "").strip() or identity.name
    if session != identity.name and not identity.is_main:
        return await _tokens_page(request, identity, status=403,
                                  error=f"a token made here runs under your session {identity.name!r} (signed in with a main session, choose another)")  # fmt: skip
    services = services_of(request)
    now = time.time()
    try:
        expires_at = parse_expiry(form.get("expires", "").strip() or None, now=now)
        roles = await _token_roles(services.people, identity, [value for key, value in pairs if key == "roles"])
        made = await make_token(services.people, services.audit, actor=identity.actor, person=person, now=now,
                                expires_at=expires_at, session=session, roles=roles)  # fmt: skip
    except UsageError as exc:
        return await _tokens_page(request, identity, status=400, error=f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
    return await _tokens_page(request, identity, made=made)


async def _token_roles(people: PeopleStore, identity: UiIdentity, chosen: list[str]) -> Roles | None:
    """The roles a token made here carries: those chosen, each held by this sign-in; none chosen,
    the sign-in's own. A sign-in with a scoped token holds no more than its scope, so it cannot
    make a token wider than itself (the person's other roles stay out of its reach)."""
    signed_in = identity.session.roles or Roles()
    if chosen:
        roles = parse_roles(chosen)
        beyond = [str(r) for r in roles.roles if not signed_in.covers(r)]
        if beyond:
            raise UsageError(f"this sign-in does not hold the role(s) {', '.join(beyond)}",
                             hint="sign in with a token of yours that holds them, or `pincer people token NAME --role ROLE`")  # fmt: skip
        return roles
    held = await people.get(identity.session.person or "")
    return None if held is not None and held.roles == signed_in else signed_in


async def revoke(request: Request) -> Response:
    identity = await require_identity(request)
    require_csrf(identity, await read_form(request))
    person = identity.session.person
    if person is None:
        return await _tokens_page(request, identity, status=403)
    services = services_of(request)
    try:
        await revoke_token(services.people, services.audit, actor=identity.actor, token_id=request.path_params["token_id"],
                           now=time.time(), of=person)  # fmt: skip
    except UsageError as exc:
        return await _tokens_page(request, identity, status=404, error=exc.message)
    return RedirectResponse(f"{UI_PREFIX}/tokens?done=revoked", status_code=303)


# -- people, for an admin ----------------------------------------------------------------------


def _roles_of(text: str) -> list[str]:
    """One role a line (a scope holds commas, so a line, not a comma, separates roles)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


async def _people_page(request: Request, identity: UiIdentity, *, status: int = 200, error: str | None = None,
                       form: dict[str, str] | None = None) -> Response:  # fmt: skip
    allowed = may_manage_people(identity.session)
    people = await services_of(request).people.all() if allowed else []
    if not allowed:
        status, error = 403, f"{identity.actor} may not manage people; {MANAGE_PEOPLE_FORBIDDEN_HINT}"
    context = {"people": people, "allowed": allowed, "error": error, "form": form or {},
               "notice": _DONE.get(request.query_params.get("done") or "")}  # fmt: skip
    return pages_of(request).render(request, "people.html", context, status=status)


async def people_page(request: Request) -> Response:
    return await _people_page(request, await require_identity(request))


# One admin act of a form: (the service, who asks, the form, the path's name) -> the act done.
_AdminAct = Callable[[DashboardServices, UiIdentity, dict[str, str], str], Awaitable[object]]


async def _admin_act(request: Request, act: _AdminAct, done: str) -> Response:
    """The form's CSRF token, then the admin's role, then the act: 403 for anyone else, 400 with
    what was wrong for bad input (nothing changed), else back to the list."""
    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    if not may_manage_people(identity.session):
        return await _people_page(request, identity)
    try:
        await act(services_of(request), identity, form, request.path_params.get("name", ""))
    except UsageError as exc:
        return await _people_page(request, identity, status=400, error=exc.message, form=form)
    return RedirectResponse(f"{UI_PREFIX}/people?done={done}", status_code=303)


async def _add(services: DashboardServices, identity: UiIdentity, form: dict[str, str], _: str) -> object:
    return await add_person(services.people, services.audit, actor=identity.actor, name=form.get("name", "").strip(),
                            roles=parse_roles(_roles_of(form.get("roles", ""))), email=form.get("email", "").strip() or None,
                            now=time.time())  # fmt: skip


async def _set_roles(services: DashboardServices, identity: UiIdentity, form: dict[str, str], name: str) -> object:
    roles = parse_roles(_roles_of(form.get("roles", "")))
    await set_person_roles(services.people, services.audit, actor=identity.actor, name=name, roles=roles)
    return roles


async def _remove(services: DashboardServices, identity: UiIdentity, form: dict[str, str], name: str) -> object:
    return await remove_person(services.people, services.audit, actor=identity.actor, name=name,
                               forget_credentials=services.secrets.delete_for)  # fmt: skip


async def add(request: Request) -> Response:
    return await _admin_act(request, _add, "added")


async def set_roles(request: Request) -> Response:
    return await _admin_act(request, _set_roles, "roles")


async def remove(request: Request) -> Response:
    return await _admin_act(request, _remove, "removed")


def routes() -> list[Route]:
    return [
        Route("/tokens", tokens_page, methods=["GET"]),
        Route("/tokens", make, methods=["POST"]),
        Route("/tokens/{token_id:str}/revoke", revoke, methods=["POST"]),
        Route("/people", people_page, methods=["GET"]),
        Route("/people", add, methods=["POST"]),
        Route("/people/{name:str}/roles", set_roles, methods=["POST"]),
        Route("/people/{name:str}/remove", remove, methods=["POST"]),
    ]
