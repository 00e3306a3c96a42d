"""``/people``: the people of this store and their roles, for an admin (a person whose roles hold
``admin``, or the gateway's main-session token): list, add, set roles, remove. The same acts,
made and recorded the same way, as ``pincer people`` and the dashboard's people page
(store/people_acts.py); anyone else gets 403 and nothing is recorded."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from pincer.gateway.access import MANAGE_PEOPLE_FORBIDDEN_HINT, may_manage_people
from pincer.gateway.rest.common import ServicesDep, SessionDep, json_body_route, refuse
from pincer.gateway.tokens import GatewaySession
from pincer.policy.roles import parse_roles
from pincer.store.people_acts import add_person, remove_person, set_person_roles

__all__ = ["PersonBody", "RolesBody", "router"]

router = APIRouter(route_class=json_body_route())
_NAME = Path(max_length=64)
_ROLE_LIST = Field(min_length=1, max_length=32)


class PersonBody(BaseModel):
    """``POST /people``: a person and their roles (as ``pincer people add`` takes them)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    roles: list[Annotated[str, Field(max_length=512)]] = _ROLE_LIST
    email: str | None = Field(default=None, max_length=320)


class RolesBody(BaseModel):
    """``PUT /people/{name}/roles``: the person's roles become exactly these."""

    model_config = ConfigDict(extra="forbid")
    roles: list[Annotated[str, Field(max_length=512)]] = _ROLE_LIST


def _admin(session: GatewaySession) -> None:
    if not may_manage_people(session):
        who = f"person {session.person!r}" if session.person is not None else f"session {session.name!r}"
        raise refuse(403, "session_forbidden", f"{who} may not manage people", MANAGE_PEOPLE_FORBIDDEN_HINT)


@router.get("/people", summary="People and their roles (admins only)")
async def list_people(services: ServicesDep, session: SessionDep) -> dict[str, Any]:
    _admin(session)
    return {"people": [p.to_dict() for p in await services.people.all()]}


@router.post("/people", status_code=201, summary="Add a person with their roles (admins only)")
async def add(services: ServicesDep, session: SessionDep, body: PersonBody) -> dict[str, Any]:
    _admin(session)
    person = await add_person(services.people, services.audit, actor=session.actor("rest"), name=body.name,
                              roles=parse_roles(body.roles), email=body.email, now=time.time())  # fmt: skip
    return person.to_dict()


@router.put("/people/{name}/roles", summary="Set a person's roles (admins only; the last admin stays one)")
async def set_roles(services: ServicesDep, session: SessionDep, name: Annotated[str, _NAME], body: RolesBody) -> dict[str, Any]:
    _admin(session)
    roles = parse_roles(body.roles)
    await set_person_roles(services.people, services.audit, actor=session.actor("rest"), name=name, roles=roles)
    return {"name": name, "roles": roles.written()}


@router.delete("/people/{name}", summary="Remove a person, their tokens and their own credentials (admins only; not the last admin)")
async def remove(services: ServicesDep, session: SessionDep, name: Annotated[str, _NAME]) -> dict[str, Any]:
    _admin(session)
    tokens, credentials = await remove_person(services.people, services.audit, actor=session.actor("rest"), name=name,
                                              forget_credentials=services.secrets.delete_for)  # fmt: skip
    return {"removed": name, "tokens": tokens, "credentials": credentials}
