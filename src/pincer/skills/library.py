"""The loaded skill library: roots walked, eligibility decided, changes watched.

One :class:`SkillLibrary` per Pincer. Everything that shows skills (the CLI, the ``skill``
tool, the gateway's prompts and resources, the skills extension) reads from it; ``reload``
re-walks the roots (only changed files are parsed again) and tells subscribers when the set of
skills changed. ``watch`` does that by itself while a gateway runs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from pincer.core.errors import Denied, IntegrityMismatch, SkillNotFound
from pincer.skills.deps import deps_problem
from pincer.skills.eligibility import Eligibility, Environment, check_all
from pincer.skills.model import Issue, Skill, Trust
from pincer.skills.remote import ORIGIN_FILE, RemoteApprovals, apply_origin
from pincer.skills.roots import (
    WORKSPACE_ROOTS,
    LoadError,
    LoadReport,
    Root,
    SkillLoader,
    WalkLimits,
    default_roots,
    user_home_dir,
)
from pincer.store.skill_writes import SKILL_WRITES_FILE, folder_key, written_folders

if TYPE_CHECKING:
    from pincer.config import Config, SkillsSettings
    from pincer.skills.catalog import Catalog
    from pincer.skills.render import Rendered
    from pincer.skills.selection import Selection

__all__ = ["SkillLibrary", "SKILL_WATCH_INTERVAL_S", "Invoker"]

logger = logging.getLogger(__name__)

SKILL_WATCH_INTERVAL_S = 0.5  # "within a second", and cheap: a listing and a stat per skill

Listener = Callable[[], None]
Invoker = Literal["model", "person"]


class SkillLibrary:
    def __init__(
        self,
        roots: Sequence[Root],
        *,
        limits: WalkLimits | None = None,
        settings: SkillsSettings | None = None,
        home: Path | None = None,
        environ: Mapping[str, str] | None = None,
        admit: Callable[[Skill], str | None] | None = None,
    ) -> None:
        """``admit(skill)`` is asked about every installed skill (the hub's lockfile check):
        None loads it, a reason refuses it (reported as a load error with that reason)."""
        from pincer.config import SkillsSettings

        self.roots = tuple(roots)
        self._admit = admit
        self.settings = settings or SkillsSettings()
        self.home = home
        self._environ = environ
        self._loader = SkillLoader(limits or WalkLimits())
        self._listeners: list[Listener] = []
        self.approvals = RemoteApprovals(home) if home is not None else None
        self.report = LoadReport()
        self.eligibility: dict[str, Eligibility] = {}
        self._by_name: dict[str, Skill] = {}
        self._refused: dict[str, str] = {}  # name -> why the lock check refused it
        self.reload(notify=False)

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        home_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
        bundled: bool = True,
        admit: Callable[[Skill], str | None] | None = None,
    ) -> SkillLibrary:
        settings = config.skills
        if home_dir is None:
            home_dir = user_home_dir(environ)
        roots = default_roots(
            workspace=config.workspace,
            home_dir=home_dir,
            pincer_home=config.home,
            extra_dirs=settings.extra_dirs,
            bundled=bundled,
            trust_workspace=settings.trust_workspace,
        )
        limits = WalkLimits(
            max_candidates_per_root=settings.max_candidates_per_root,
            max_loaded_per_root=settings.max_loaded_per_root,
            max_file_bytes=settings.max_file_bytes,
        )
        return cls(roots, limits=limits, settings=settings, home=config.home, environ=environ, admit=admit)

    # -- loading -------------------------------------------------------------------------------

    def reload(self, *, notify: bool = True) -> bool:
        """Walk the roots again; True (and subscribers told) when any skill changed."""
        approvals = self.approvals
        report = self._loader.load(self.roots, adjust=self._trust_adjuster(), replaces=approvals.replaces if approvals else None)
        refused: list[LoadError] = []
        self._refused = {}
        if self._admit is not None:
            kept = []
            for skill in report.skills:
                reason = self._admit(skill) if skill.trust is Trust.INSTALLED and skill.root == "installed" else None
                if reason is None:
                    kept.append(skill)
                else:
                    self._refused[skill.name] = reason
                    refused.append(LoadError(path=skill.path, message=f"refused: {reason}", root=skill.root,
                                             hint="`pincer verify` lists what changed"))  # fmt: skip
            report = replace(report, skills=tuple(kept), errors=report.errors + tuple(refused))
        skills = tuple(self._with_origin(s) for s in report.skills)
        report = replace(report, skills=skills)
        environment = self._environment()
        eligibility = check_all(skills, environment)
        before = {s.name: (s.content_hash, str(s.path), s.trust) for s in self.report.skills}, self.eligibility
        self.report = report
        self.eligibility = eligibility
        self._by_name = {s.name: s for s in skills}
        changed = before != ({s.name: (s.content_hash, str(s.path), s.trust) for s in skills}, eligibility)
        if changed and notify:
            self.notify_changed()
        return changed

    def _trust_adjuster(self) -> Callable[[Skill], Skill] | None:
        """A skill a run wrote (``skill-writes.json``) is installed-level until a person approves
        that SKILL.md; a workspace skill (installed-level unless ``[skills] trust_workspace``) a
        person approved is trusted."""
        home, approvals = self.home, self.approvals
        if home is None or approvals is None:
            return None
        written = written_folders(home)

        def adjust(skill: Skill) -> Skill:
            approved = approvals.is_trusted(skill)
            by_run = written.get(folder_key(skill.base_dir))
            if by_run is not None and not approved:
                note = Issue(
                    key="trust",
                    message=f"written by a run ({by_run.get('tool', 'a tool')}, session {by_run.get('session', '?')}): "
                    f"untrusted until a person approves it (`pincer skills approve {skill.name}`)",
                )
                return replace(skill, trust=Trust.INSTALLED, warnings=(*skill.warnings, note),
                               metadata={**skill.metadata, "pincer/writtenByRun": dict(by_run)})  # fmt: skip
            if approved and skill.trust is Trust.INSTALLED and (by_run is not None or skill.root in WORKSPACE_ROOTS):
                return replace(skill, trust=Trust.TRUSTED)
            return skill

        return adjust

    def stamp(self) -> tuple[Any, ...]:
        """What the walk would see, and the approvals and the record of writes that decide trust."""
        extra: list[Any] = []
        for path in (self.approvals.path if self.approvals else None, self.home / SKILL_WRITES_FILE if self.home else None):
            try:
                extra.append(path.stat().st_mtime_ns if path is not None else None)
            except OSError:
                extra.append(None)
        return (*self._loader.stamp(self.roots), tuple(extra))

    def notify_changed(self) -> None:
        """Tell every subscriber the skills changed (call it on the event loop)."""
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # one broken subscriber must not stop the others
                logger.exception("skill change listener failed")

    def _environment(self) -> Environment:
        home = self.home

        def problem(skill: Skill) -> str | None:
            return deps_problem(home, skill) if home is not None else None

        base = Environment.current(config=self.settings.config, deps_problem=problem)
        if self._environ is not None:
            base = replace(base, env=dict(self._environ), path=self._environ.get("PATH", base.path))
        return base

    def _with_origin(self, skill: Skill) -> Skill:
        if skill.trust is not Trust.INSTALLED or self.approvals is None:
            return skill
        if not (skill.base_dir / ORIGIN_FILE).is_file():
            return skill
        return apply_origin(skill, self.approvals)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def watch(
        self,
        interval_s: float = SKILL_WATCH_INTERVAL_S,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Reload whenever a SKILL.md (or capabilities.json) is added, changed or removed, or a
        skill folder appears or goes. Runs until cancelled."""
        seen = await anyio.to_thread.run_sync(self.stamp)
        task_status.started()
        while True:
            await anyio.sleep(interval_s)
            now = await anyio.to_thread.run_sync(self.stamp)
            if now == seen:
                continue
            seen = now
            try:
                # Parsing in a worker thread; subscribers (the gateway, the registry) hear of it
                # here, on the event loop.
                changed = await anyio.to_thread.run_sync(lambda: self.reload(notify=False))
            except Exception:  # a bad moment on disk must not end the watch
                logger.exception("reloading skills failed")
                continue
            if changed:
                self.notify_changed()

    # -- reading -------------------------------------------------------------------------------

    @property
    def skills(self) -> tuple[Skill, ...]:
        return self.report.skills

    def get(self, name: str) -> Skill:
        skill = self._by_name.get(name)
        if skill is None and name in self._refused:
            raise IntegrityMismatch(f"skill {name!r} is refused: {self._refused[name]}",
                                    hint="`pincer verify` lists what changed")  # fmt: skip
        if skill is None:
            raise SkillNotFound(f"no skill named {name!r}", hint="`pincer skills list` shows the skills there are")
        return skill

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def refused(self) -> Mapping[str, str]:
        """Installed skills the lock check refused (edited on disk since the install), with why."""
        return dict(self._refused)

    def eligibility_of(self, name: str) -> Eligibility:
        return self.eligibility.get(name) or Eligibility(is_eligible=False, reasons=("not loaded",))

    def eligible(self) -> list[Skill]:
        return [s for s in self.skills if self.eligibility_of(s.name).is_eligible]

    def offered(self) -> list[Skill]:
        """What a model is offered: eligible and model-invocable."""
        return [s for s in self.eligible() if s.model_invocable]

    def user_invocable(self) -> list[Skill]:
        """What a person is offered (MCP prompts, slash commands): eligible and user-invocable."""
        return [s for s in self.eligible() if s.user_invocable]

    def select(self, message: str) -> list[Selection]:
        from pincer.skills.selection import select

        return select(
            message,
            self.offered(),
            max_skills=self.settings.max_selected,
            max_tokens=self.settings.max_selected_tokens,
        )

    def passed_over(self, message: str) -> list[tuple[Selection, str]]:
        """The skills that would score for ``message`` but are not offered to a model, each
        with why not (what it lacks, or ``disable-model-invocation``)."""
        from pincer.skills.selection import select

        offered = {id(s) for s in self.offered()}
        others = [s for s in self.skills if id(s) not in offered]
        found = select(message, others, max_skills=len(others), max_tokens=sys.maxsize)
        result = []
        for item in found:
            eligibility = self.eligibility_of(item.skill.name)
            why = "; ".join(eligibility.reasons) if not eligibility.is_eligible else "it sets disable-model-invocation"
            result.append((item, why))
        return result

    def catalog(self) -> Catalog:
        from pincer.skills.catalog import build_catalog

        return build_catalog(
            self.offered(), max_skills=self.settings.catalog_max_skills, max_chars=self.settings.catalog_max_chars
        )

    def invocable(self, name: str, *, by: Invoker) -> Skill:
        """The one rule for who may start or read a skill, on every path. ``by="model"``: a model
        or another agent asks for it (the ``skill`` tool, ``run_skill``, MCP resources and the
        skills extension); ``disable-model-invocation: true`` refuses it. ``by="person"``: a
        person or a trigger a person set up names it (``pincer run``/``chat``, REST runs and
        commands, ``/NAME``, MCP prompts, cron jobs and webhooks); ``user-invocable: false``
        refuses it. Eligibility is the caller's own check, as before."""
        skill = self.get(name)
        if by == "model" and not skill.model_invocable:
            raise Denied(
                f"skill {name!r} is for people to start only (disable-model-invocation: true): a model cannot load or run it",
                hint=f"a person runs it: `pincer run {name}`, or /{name} in `pincer chat`",
            )
        if by == "person" and not skill.user_invocable:
            raise Denied(
                f"skill {name!r} is not for people to start (user-invocable: false): only a model may load it",
                hint="ask a run to use it, or remove user-invocable: false from its SKILL.md",
            )
        return skill

    def render(self, name: str, params: Mapping[str, Any] | None = None, *, arguments: str | None = None) -> Rendered:
        # jinja2 and the sandboxed renderer load with the first render, not with the library.
        from pincer.skills.render import render_skill

        return render_skill(self.get(name), params, arguments=arguments, max_chars=self.settings.max_render_chars)

    def issues(self) -> list[tuple[str, Issue]]:
        return [(str(s.path), w) for s in self.skills for w in s.warnings]
