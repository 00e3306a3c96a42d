"""Scheduled jobs: what runs (a skill with parameters, or a message), when, and how.

A job comes from one of four places, recorded as its ``source``: ``pincer cron add`` (``cli``),
``pincer cron import`` (``import``), a ``[[jobs]]`` table in config.toml (``config``) or a
skill's ``schedule:`` trigger (``skill:NAME``). All of them live in the store, so a job's next
run survives a restart; the config's and the skills' are brought in line with their source
whenever it changes (a job whose schedule did not change keeps its next run).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pincer.config import TriggersSettings
from pincer.core.errors import ScheduleInvalid, UsageError
from pincer.schedule import Schedule, host_zone, parse_cron, schedule_from
from pincer.skills.model import Skill, Trust
from pincer.triggers.requests import Budgets

__all__ = [
    "JobSpec",
    "check_job_name",
    "jobs_from_config",
    "jobs_from_skills",
    "skill_job_name",
    "with_anchor",
    "DEFAULT_MAX_CONCURRENT",
]

DEFAULT_MAX_CONCURRENT = TriggersSettings().max_concurrent  # [triggers]'s default
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")


def check_job_name(name: str) -> str:
    text = name.strip()
    if not _NAME.match(text) or text != name:
        raise UsageError(
            f"invalid job name {name[:60]!r}", hint="1-128 printable characters, no leading or trailing spaces"
        )
    return text


@dataclass(frozen=True, kw_only=True, slots=True)
class JobSpec:
    """What a job is. ``None`` options take the ``[triggers]`` defaults when the job fires."""

    name: str
    schedule: Schedule
    skill: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    message: str | None = None
    session: str | None = None  # default: "cron:NAME", a non-main session
    source: str = "cli"
    max_concurrent: int | None = None
    retries: int | None = None
    jitter_s: float | None = None
    budgets: Budgets = field(default_factory=Budgets)
    enabled: bool = True

    @property
    def run_session(self) -> str:
        return self.session or f"cron:{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "schedule": self.schedule.to_dict(),
            "skill": self.skill,
            "params": dict(self.params),
            "message": self.message,
            "session": self.session,
            "source": self.source,
            "max_concurrent": self.max_concurrent,
            "retries": self.retries,
            "jitter_s": self.jitter_s,
            "budgets": self.budgets.to_dict(),
            "enabled": self.enabled,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        return cls(
            name=str(data["name"]),
            schedule=Schedule.from_dict(data["schedule"]),
            skill=data.get("skill"),
            params=dict(data.get("params") or {}),
            message=data.get("message"),
            session=data.get("session"),
            source=str(data.get("source") or "cli"),
            max_concurrent=data.get("max_concurrent"),
            retries=data.get("retries"),
            jitter_s=data.get("jitter_s"),
            budgets=Budgets.from_dict(data.get("budgets")),
            enabled=bool(data.get("enabled", True)),
        )

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True, default=str).encode()).hexdigest()

    def schedule_hash(self) -> str:
        """Changes only when the schedule does: the next run is kept across other edits."""
        return hashlib.sha256(json.dumps(self.schedule.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def jobs_from_config(jobs: Iterable[Any]) -> list[JobSpec]:
    """``[[jobs]]`` tables (already checked when the config was parsed) as job specs."""
    specs = []
    for j in jobs:
        schedule = schedule_from(cron=j.cron, at=j.at, every=j.every, tz=j.tz)
        specs.append(
            JobSpec(
                name=j.name, schedule=schedule, skill=j.skill, params=dict(j.params), message=j.message,
                session=j.session, source="config", max_concurrent=j.max_concurrent, retries=j.retries,
                jitter_s=j.jitter_s, enabled=j.enabled,
            )
        )  # fmt: skip
    return specs


def skill_job_name(skill: str, index: int) -> str:
    return f"skill:{skill}" if index == 0 else f"skill:{skill}#{index + 1}"


def jobs_from_skills(skills: Iterable[Skill]) -> tuple[list[JobSpec], list[tuple[str, str]]]:
    """The jobs of eligible skills' ``schedule:`` triggers (in this machine's zone), and
    ``(skill, problem)`` for schedules that do not parse (the skill still loads). Only a trusted
    skill schedules itself: one from the hub, the workspace or a run would otherwise come back
    on its own every minute it likes; a person names such a skill in ``[[jobs]]``."""
    specs: list[JobSpec] = []
    problems: list[tuple[str, str]] = []
    zone = host_zone()
    for skill in skills:
        if skill.trust is not Trust.TRUSTED:
            continue
        schedules = [t.value for t in skill.triggers if t.kind == "schedule" and t.value]
        for index, expr in enumerate(schedules):
            try:
                schedule = parse_cron(expr, tz=zone)
            except ScheduleInvalid as exc:
                problems.append((skill.name, exc.message))
                continue
            specs.append(
                JobSpec(name=skill_job_name(skill.name, index), schedule=schedule, skill=skill.name, source=f"skill:{skill.name}")
            )
    return specs, problems


def with_anchor(spec: JobSpec, anchor: float) -> JobSpec:
    """An ``every`` job without an anchor counts its intervals from when it was added."""
    if spec.schedule.kind == "every" and spec.schedule.anchor is None:
        return replace(spec, schedule=replace(spec.schedule, anchor=anchor))
    return spec
