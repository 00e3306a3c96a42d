"""``POST /api/v1/commands``: a ``/NAME args`` command, fired like ``pincer chat`` fires it.

``{"text": "/review src/app.py focus=security"}`` -> 202 with the run id, the skill and its
parameters; the run starts in the background. An unknown command is 404 and lists the known
ones; arguments that do not fit the skill's parameters are 422. The run's session is the token's
(a main session may name another with ``"session"``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from pincer.core.errors import Denied
from pincer.gateway.rest.common import ServicesDep, SessionDep, json_body_route
from pincer.policy.visibility import require_skills_visible, skills_visible
from pincer.triggers.commands import MAX_COMMAND_CHARS

__all__ = ["CommandBody", "router"]

router = APIRouter(route_class=json_body_route())


class CommandBody(BaseModel):
    """``POST /commands``."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=2, max_length=MAX_COMMAND_CHARS, description='The command, e.g. "/review src/app.py".')
    session: str | None = Field(default=None, min_length=1, max_length=128)


@router.get("/commands", summary="The /commands this session can run, with their skills")
async def list_commands(services: ServicesDep, session: SessionDep) -> dict[str, Any]:
    # the one rule for skills: a session that may not see the skill tool is shown none
    table = services.triggers().commands() if skills_visible(services.config().session(session.name)) else {}
    return {
        "commands": [
            {"command": name, "skill": skill.name, "description": skill.description,
             "parameters": [p.to_dict() for p in skill.parameters]}
            for name, skill in sorted(table.items())
        ]
    }  # fmt: skip

@router.post(
    "/commands",
    status_code=202,
    summary="Run a /command: its skill starts in the background",
    responses={404: {"description": "no such command"}, 422: {"description": "the arguments do not fit"}},
)
async def run_command(services: ServicesDep, session: SessionDep, body: CommandBody) -> JSONResponse:
    require_skills_visible(services.config().session(session.name), session.name)  # every command starts a skill
    target = body.session or session.name
    if target != session.name and not session.is_main:
        raise Denied(
            f"session {session.name!r} may not run commands as session {target!r}",
            hint="leave out 'session', or use a token of a main session",
        )
    firing = await services.triggers().fire_command(body.text, session=target, fired_by=f"rest:{session.name}")
    status = 202 if firing.status == "queued" else 422
    return JSONResponse(firing.to_dict(), status_code=status)
