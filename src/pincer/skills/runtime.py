"""The skills' faces in the registry: the built-in ``skill`` tool and the skills' own tools.

``skill`` (``{"name": ...}``, optionally ``params`` and ``arguments``) returns a skill's rendered
instructions, the list of its files and the tools it may use while active (trust attenuation
applied): how a model reads a skill on demand after seeing the catalog. ``SkillToolRuntime``
holds the tools made from skills' declared capabilities (``skill_tools.py``); both follow the
library, so the registry changes when skills do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import ArgumentsInvalid, Denied, PincerError, ToolNotFound
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.runtimes.base import ChangeListeners
from pincer.skills.files import list_files
from pincer.skills.library import SkillLibrary
from pincer.skills.skill_tools import plan_skill_tools, stage_view
from pincer.skills.trust import tools_for_skill

if TYPE_CHECKING:
    from pincer.policy.grants import Grant
    from pincer.runtimes.script.runtime import ScriptRuntime
    from pincer.runtimes.script.settings import ScriptSettings

__all__ = ["SkillTool", "SkillToolRuntime", "SKILL_TOOL"]

logger = logging.getLogger(__name__)

SKILL_TOOL = "skill"


def _skill_spec() -> ToolSpec:
    return ToolSpec(
        name=SKILL_TOOL,
        description=(
            "Read a skill from <available_skills>: its instructions (rendered with the parameters you pass), "
            "the files it ships and the tools it may use. Call it with the skill's name before following a skill."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 128, "description": "the skill's name"},
                "params": {"type": "object", "description": "values for the skill's declared parameters"},
                "arguments": {"type": "string", "maxLength": 65536, "description": "free-text arguments ($ARGUMENTS)"},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        effects=frozenset({EffectKind.READ_FILESYSTEM}),
        runtime=RuntimeKind.NATIVE,
        side_effecting=False,
        source="builtin:skills",
    )


async def _no_grants() -> Sequence[Grant]:
    return ()


class SkillTool:
    """The ``skill`` tool over a library. ``specs`` and ``grants`` give the trust rule its inputs."""

    kind = RuntimeKind.NATIVE

    def __init__(
        self,
        library: SkillLibrary,
        *,
        specs: Callable[[], Sequence[ToolSpec]] = list,
        grants: Callable[[], Awaitable[Sequence[Grant]]] = _no_grants,
    ) -> None:
        self.library = library
        self._specs = specs
        self._grants = grants
        self._spec = _skill_spec()

    async def start(self) -> None:
        """Nothing to start."""

    async def aclose(self) -> None:
        """Nothing to close."""

    def tools(self) -> Sequence[ToolSpec]:
        return (self._spec,)

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> None:
        """Nothing to refuse before a call: reading a skill's instructions runs nothing."""

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        if spec.name != SKILL_TOOL:
            raise ToolNotFound(f"no tool {spec.name!r} here")
        return ToolOutput(value=await self.describe(args))

    async def describe(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str):
            raise ArgumentsInvalid("skill needs a 'name'", hint='e.g. {"name": "code-review"}')
        skill = self.library.invocable(name, by="model")
        eligibility = self.library.eligibility_of(name)
        if not eligibility.is_eligible:
            raise Denied(f"skill {name!r} is not available here: {eligibility.reason}", hint="`pincer skills show " + name + "`")
        params = args.get("params") or {}
        arguments = args.get("arguments")
        rendered = self.library.render(name, params, arguments=arguments if isinstance(arguments, str) else None)
        listing = list_files(skill)
        access = tools_for_skill(skill, self._specs(), await self._grants())
        return {
            "name": skill.name,
            "description": skill.description,
            "trust": skill.trust.value,
            "path": str(skill.path),
            "base_dir": str(skill.base_dir),
            "instructions": rendered.text,
            "params": dict(rendered.params),
            "files": [{"path": f.path, "size": f.size} for f in listing.files],
            "files_truncated": listing.truncated,
            "tools": access.to_dict(),
        }


class SkillToolRuntime:
    """The tools made from skills' capabilities, run by a script runtime in the sandbox."""

    kind = RuntimeKind.SCRIPT
    _inner: ScriptRuntime  # set by _build, which __init__ calls

    def __init__(self, library: SkillLibrary, *, home: Path, script_settings: ScriptSettings, separator: str = ".") -> None:
        self.library = library
        self.home = home
        self.script_settings = script_settings
        self.separator = separator
        self._changes = ChangeListeners("skill tools")
        self._owner: dict[str, str] = {}
        self.warnings: dict[str, list[str]] = {}
        self._build()
        self._unsubscribe = library.subscribe(self._on_change)

    def _build(self) -> None:
        from pincer.runtimes.script.runtime import ScriptRuntime

        manifests = []
        owner: dict[str, str] = {}
        warnings: dict[str, list[str]] = {}
        for skill in self.library.eligible():
            if not skill.capabilities:
                continue
            try:
                view, has_deps = stage_view(skill, home=self.home, scratch=self.script_settings.scratch())
                plan = plan_skill_tools(skill, view=view, separator=self.separator, has_deps=has_deps)
            except (OSError, PincerError) as exc:
                warnings[skill.name] = [f"its tools are not registered: {exc}"]
                continue
            warnings[skill.name] = [str(w) for w in plan.warnings]
            for manifest in plan.manifests:
                if manifest.name in owner:
                    warnings[skill.name].append(f"tool {manifest.name} is already made by skill {owner[manifest.name]}")
                    continue
                owner[manifest.name] = skill.name
                manifests.append(manifest)
        self._inner = ScriptRuntime(manifests, self.script_settings, include_exec=False)
        self._owner = owner
        self.warnings = warnings

    def _on_change(self) -> None:
        try:
            self._build()
        except Exception:  # keep serving the previous tools rather than none
            logger.exception("rebuilding skill tools failed")
            return
        self._changes.notify()

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        return self._changes.subscribe(listener)

    def owner(self, tool: str) -> str | None:
        return self._owner.get(tool)

    async def start(self) -> None:
        await self._inner.start()

    async def aclose(self) -> None:
        self._unsubscribe()
        await self._inner.aclose()

    def tools(self) -> Sequence[ToolSpec]:
        return self._inner.tools()

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> None:
        """Nothing to refuse before a call: the inner script runtime has no exec tool
        (``include_exec=False``), and a skill tool's checks run with it."""

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        return await self._inner.invoke(spec, args, host)
