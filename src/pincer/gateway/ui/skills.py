"""``/ui/skills``: the loaded skills (eligible, or why not, with their triggers, commands and
what ``pincer skills check`` warns of), the shadowed ones (and which skill shadows each), and
the files that could not be loaded or were refused. A session that may not
see skills at all (its policy withholds the ``skill`` tool: ``policy/visibility.py``, the rule
every other path applies) sees none here either."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pincer.gateway.ui.auth import require_identity
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import services_of
from pincer.policy.visibility import skills_visible
from pincer.skills.tool_use import tool_problems

__all__ = ["routes"]


def _row(library: Any, skill: Any, offered: set[str]) -> dict[str, Any]:
    eligibility = library.eligibility_of(skill.name)
    triggers = [str(t) for t in skill.triggers]
    # What `pincer skills check` says of it: its own warnings and the tools it names that none here has.
    warnings = [str(w) for w in (*skill.warnings, *tool_problems(skill, offered))]
    return {
        "name": skill.name, "description": skill.description, "root": skill.root, "path": str(skill.path),
        "dialect": skill.dialect.value, "trust": skill.trust.value, "eligible": eligibility.is_eligible,
        "why_not": list(eligibility.reasons), "triggers": [t for t in triggers if not t.startswith("command")],
        "commands": [t for t in triggers if t.startswith("command")], "warnings": warnings,
    }  # fmt: skip


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    services = services_of(request)
    library = services.skills
    context: dict[str, Any] = {"withheld": False, "enabled": library is not None, "skills": [], "shadowed": [],
                               "errors": [], "notices": []}  # fmt: skip
    if not skills_visible(services.config().session(identity.name)):
        context["withheld"] = True
    elif library is not None:
        offered = {spec.name for spec in services.registry.list()}
        context["skills"] = [_row(library, s, offered) for s in library.skills]
        context["shadowed"] = [
            {"name": item.skill.name, "root": item.skill.root, "path": str(item.skill.path), "by": item.by.name,
             "by_root": item.by.root, "by_path": str(item.by.path), "reason": item.reason,
             "lost_commands": list(item.lost_commands)}
            for item in library.report.shadowed
        ]  # fmt: skip
        report = library.report
        context["errors"] = [{"path": str(e.path), "line": e.line, "message": e.message, "hint": e.hint, "root": e.root}
                             for e in report.errors]  # fmt: skip
        context["notices"] = [str(n) for n in (*report.misplaced, *(h.message for h in report.limits))]
    return pages_of(request).render(request, "skills.html", context)


def routes() -> list[Route]:
    return [Route("/skills", page, methods=["GET"])]
