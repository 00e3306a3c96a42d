"""``/ui/credentials``: a signed-in person's own values of the per-person secrets (``[secrets]
per_person``, docs/teams.md): each name with whether they hold a value (never the value), a
form to set theirs (a password input: pasted, never shown again) and one to remove it; for a
built-in's OAuth token, a Connect button that runs the provider's login (credential_connect.py).

The person is the sign-in's, and no field or path names another: a person sets and removes
their own values only. The acts are store/people_acts.py's, the ones ``pincer secrets set NAME
--person WHO`` makes; their records name the secret and the person, never the value. A sign-in
with the shared gateway token is nobody's, so it has no credentials to connect.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pincer.core.errors import SecretError, UsageError
from pincer.gateway.ui.auth import UI_PREFIX, UiIdentity, read_form, require_csrf, require_identity
from pincer.gateway.ui.credential_connect import connectable
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import DashboardServices, services_of
from pincer.store.people_acts import remove_own_credential, require_per_person, set_own_credential

__all__ = ["routes"]

_NO_PERSON = ("credentials are a person's own: this sign-in (the gateway's shared token) is nobody's; sign in with "
              "your personal access token (`pincer people token NAME`) or single sign-on")  # fmt: skip
_DONE = {"set": "credential set", "replaced": "credential replaced", "removed": "credential removed",
         "connected": "your own login connected"}


async def _page(request: Request, identity: UiIdentity, *, status: int = 200, error: str | None = None,
                notice: str | None = None) -> Response:  # fmt: skip
    person = identity.session.person
    services = services_of(request)
    held = {i.name: i.updated_at for i in services.secrets.person_names(person)} if person is not None else {}
    names = services.config().secrets.per_person
    context: dict[str, Any] = {
        "person": person, "names": names, "held": held, "now": time.time(), "connectable": connectable(request, names),
        "error": error or (None if person else _NO_PERSON), "notice": notice,
    }  # fmt: skip
    return pages_of(request).render(request, "credentials.html", context, status=403 if person is None else status)


async def credentials_page(request: Request) -> Response:
    identity = await require_identity(request)
    return await _page(request, identity, notice=_DONE.get(request.query_params.get("done") or ""))


async def _act(request: Request, *, remove: bool) -> Response:
    """CSRF, then a person, then the name (one of [secrets] per_person), then the act on the
    sign-in's own value: 403 without a person, 400 with what was wrong, else back to the list."""
    identity = await require_identity(request)
    form = await read_form(request)
    require_csrf(identity, form)
    person = identity.session.person
    if person is None:
        return await _page(request, identity)
    services = services_of(request)
    name = request.path_params["name"]
    per_person = services.config().secrets.per_person
    try:
        require_per_person(name, per_person)
        if remove:
            await remove_own_credential(services.audit, services.secrets, actor=identity.actor, person=person, name=name)
            _forget_own_login(services, person, name)
            done = "removed"
        else:
            value = form.get("value", "").strip()
            if not value:
                raise UsageError("the value is empty", hint=f"paste it, or from a shell: pincer secrets set {name} --person {person}")
            done = await set_own_credential(services.people, services.audit, services.secrets, actor=identity.actor,
                                            person=person, name=name, value=value, per_person=per_person)  # fmt: skip
    except (UsageError, SecretError) as exc:
        return await _page(request, identity, status=400, error=f"{exc.message} ({exc.hint})" if exc.hint else exc.message)
    return RedirectResponse(f"{UI_PREFIX}/credentials?done={done}", status_code=303)


def _forget_own_login(services: DashboardServices, person: str, name: str) -> None:
    """A removed token of a built-in's login takes the person's refresh token and record with it:
    nothing of that login of theirs is left to refresh."""
    from pincer.builtins.oauth import forget_login, login_for_secret

    provider = login_for_secret(name, services.config().builtins)
    if provider is not None:
        forget_login(services.secrets, services.home, provider, person)


async def set_value(request: Request) -> Response:
    return await _act(request, remove=False)


async def remove_value(request: Request) -> Response:
    return await _act(request, remove=True)


def routes() -> list[Route]:
    return [
        Route("/credentials", credentials_page, methods=["GET"]),
        Route("/credentials/{name:str}", set_value, methods=["POST"]),
        Route("/credentials/{name:str}/remove", remove_value, methods=["POST"]),
    ]
