"""OpenClaw's cron files, read as they are: ``cron.yaml`` and the jobs JSON.

- ``cron.yaml``: a list of ``{name, schedule, message}`` (or a mapping with that list under
  ``jobs``/``cron``). ``schedule`` is a cron expression, an ``@alias``, an ISO time (a one-shot
  job) or ``every 30m``; ``tz``, ``skill``, ``params``, ``session`` and ``enabled`` are read
  when present.
- the jobs JSON (``~/.openclaw/cron/jobs.json``): ``{"version": 1, "jobs": [...]}``, each job
  ``{id, name, enabled, schedule: {kind: cron|at|every, expr|cron, tz, at|atMs, everyMs,
  anchorMs}, sessionTarget: main|isolated, payload: {kind: systemEvent, text} | {kind:
  agentTurn, message, timeoutSeconds}, state: {nextRunAtMs}}``, with the legacy spellings
  (``jobId``, ``schedule.cron``, ``atMs``) too.

A job OpenClaw runs in the main session keeps ``session = "main"``; an isolated one runs in
``cron:NAME`` as OpenClaw's does. Keys pincer has no use for (delivery channels, wake modes,
models) are listed per job, never dropped silently. A job that cannot be read is reported with
its index and why; the others still import.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pincer.core.errors import PincerError, UsageError
from pincer.schedule import Schedule, parse_at, parse_cron, parse_every
from pincer.triggers.jobs import JobSpec, check_job_name
from pincer.triggers.requests import Budgets

__all__ = ["ImportedJobs", "read_cron_file", "MAX_CRON_FILE_BYTES"]

MAX_CRON_FILE_BYTES = 4 * 1024 * 1024
_YAML_KEYS = frozenset({"name", "schedule", "message", "tz", "skill", "params", "session", "enabled", "cron", "id"})
_JSON_KEYS = frozenset({
    "id", "jobId", "name", "enabled", "schedule", "sessionTarget", "payload", "state", "createdAtMs", "updatedAtMs",
    "description",
})  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportedJobs:
    format: str  # cron.yaml | jobs.json
    jobs: tuple[JobSpec, ...] = ()
    next_runs: Mapping[str, float] = field(default_factory=dict)  # OpenClaw's own next run, when it has one
    problems: tuple[str, ...] = ()
    unknown_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "jobs": [j.to_dict() for j in self.jobs],
            "problems": list(self.problems),
            "unknown_keys": {k: list(v) for k, v in self.unknown_keys.items()},
        }


def read_cron_file(path: Path) -> ImportedJobs:
    """Read an OpenClaw ``cron.yaml`` or jobs JSON; ``UsageError`` when it is neither."""
    try:
        if path.stat().st_size > MAX_CRON_FILE_BYTES:
            raise UsageError(f"{path} is larger than {MAX_CRON_FILE_BYTES:,} bytes", hint="is this the right file?")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}", hint="check the path") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text", hint="give an OpenClaw cron.yaml or jobs.json") from None
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{path} is not valid JSON: {exc}", hint="fix the file, or give the cron.yaml") from None
        if isinstance(data, Mapping) and isinstance(data.get("jobs"), list) and any(
            isinstance(j, Mapping) and isinstance(j.get("schedule"), Mapping) for j in data["jobs"]
        ):
            return _from_json(data)
        if isinstance(data, Mapping) and data.get("version") == 1 and isinstance(data.get("jobs"), list):
            return _from_json(data)
        return _from_yaml_data(data, str(path))
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {exc}", hint="fix the file") from None
    return _from_yaml_data(data, str(path))


def _from_yaml_data(data: Any, source: str) -> ImportedJobs:
    if isinstance(data, Mapping):
        data = data.get("jobs", data.get("cron"))
    if not isinstance(data, list):
        raise UsageError(
            f"{source}: expected a list of jobs (name, schedule, message) or {{version: 1, jobs: [...]}}",
            hint="give OpenClaw's cron.yaml or ~/.openclaw/cron/jobs.json",
        )
    jobs: list[JobSpec] = []
    problems: list[str] = []
    unknown: dict[str, tuple[str, ...]] = {}
    for index, entry in enumerate(data):
        try:
            if not isinstance(entry, Mapping):
                raise UsageError(f"a job is a mapping, not {type(entry).__name__}")
            name = check_job_name(str(entry.get("name") or entry.get("id") or "").strip() or f"job-{index + 1}")
            raw = entry.get("schedule", entry.get("cron"))
            if isinstance(raw, (dt.datetime, dt.date)):
                raw = raw.isoformat()  # YAML read an unquoted time as a timestamp
            if not isinstance(raw, (str, int)) or not str(raw).strip():
                raise UsageError("no schedule")
            schedule = _schedule_text(str(raw), tz=_opt_str(entry.get("tz")))
            message = _opt_str(entry.get("message"))
            skill = _opt_str(entry.get("skill"))
            if message is None and skill is None:
                raise UsageError("neither a message nor a skill")
            params = entry.get("params") if isinstance(entry.get("params"), Mapping) else {}
            jobs.append(
                JobSpec(
                    name=name, schedule=schedule, skill=skill, params=dict(params or {}), message=message,
                    session=_opt_str(entry.get("session")), source="import", enabled=entry.get("enabled", True) is not False,
                )
            )  # fmt: skip
            extra = sorted(str(k) for k in entry if k not in _YAML_KEYS)
            if extra:
                unknown[name] = tuple(extra)
        except PincerError as exc:
            problems.append(f"jobs.{index}: {exc.message}")
    return ImportedJobs(format="cron.yaml", jobs=tuple(jobs), problems=tuple(problems), unknown_keys=unknown)


def _schedule_text(text: str, *, tz: str | None) -> Schedule:
    raw = text.strip()
    if raw.lower().startswith("every "):
        return parse_every(raw)
    if raw[:4].isdigit() and "-" in raw[:8]:
        return parse_at(raw)
    return parse_cron(raw, tz=tz)


def _from_json(data: Mapping[str, Any]) -> ImportedJobs:
    jobs: list[JobSpec] = []
    problems: list[str] = []
    unknown: dict[str, tuple[str, ...]] = {}
    next_runs: dict[str, float] = {}
    for index, entry in enumerate(data.get("jobs") or ()):
        try:
            if not isinstance(entry, Mapping):
                raise UsageError(f"a job is an object, not {type(entry).__name__}")
            name = check_job_name(str(entry.get("name") or entry.get("id") or entry.get("jobId") or f"job-{index + 1}").strip())
            schedule = _schedule_json(entry.get("schedule"))
            raw_payload = entry.get("payload")
            payload: Mapping[str, Any] = raw_payload if isinstance(raw_payload, Mapping) else {}
            message = _opt_str(payload.get("message")) or _opt_str(payload.get("text")) or _opt_str(entry.get("message"))
            if message is None:
                raise UsageError("the payload has no message or text")
            target = entry.get("sessionTarget")
            session = "main" if target == "main" or payload.get("kind") == "systemEvent" else None
            timeout = payload.get("timeoutSeconds")
            budgets = Budgets(deadline_s=float(timeout)) if isinstance(timeout, (int, float)) and timeout > 0 else Budgets()
            jobs.append(
                JobSpec(
                    name=name, schedule=schedule, message=message, session=session, source="import", budgets=budgets,
                    enabled=entry.get("enabled", True) is not False,
                )
            )  # fmt: skip
            raw_state = entry.get("state")
            state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
            if isinstance(state.get("nextRunAtMs"), (int, float)):
                next_runs[name] = float(state["nextRunAtMs"]) / 1000
            extra = sorted(str(k) for k in entry if k not in _JSON_KEYS)
            extra += sorted(f"payload.{k}" for k in payload if k not in ("kind", "message", "text", "timeoutSeconds"))
            if extra:
                unknown[name] = tuple(extra)
        except PincerError as exc:
            problems.append(f"jobs.{index}: {exc.message}")
    return ImportedJobs(
        format="jobs.json", jobs=tuple(jobs), next_runs=next_runs, problems=tuple(problems), unknown_keys=unknown
    )


def _schedule_json(raw: Any) -> Schedule:
    if isinstance(raw, str):
        return _schedule_text(raw, tz=None)
    if not isinstance(raw, Mapping):
        raise UsageError("no schedule")
    kind = raw.get("kind")
    if kind == "at" or (kind is None and ("at" in raw or "atMs" in raw)):
        if isinstance(raw.get("atMs"), (int, float)):
            return Schedule(kind="at", at=float(raw["atMs"]) / 1000)
        return parse_at(str(raw.get("at")))
    if kind == "every" or (kind is None and "everyMs" in raw):
        every = raw.get("everyMs")
        if not isinstance(every, (int, float)) or every <= 0:
            raise UsageError(f"everyMs {every!r} is not a positive number of milliseconds")
        anchor = raw.get("anchorMs")
        schedule = parse_every(f"{float(every) / 1000}s")
        return Schedule(kind="every", every_s=schedule.every_s, anchor=float(anchor) / 1000 if isinstance(anchor, (int, float)) else None)
    expr = raw.get("expr", raw.get("cron"))
    if not isinstance(expr, str):
        raise UsageError(f"schedule kind {kind!r} without an expression")
    return parse_cron(expr, tz=_opt_str(raw.get("tz")))


def _opt_str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return None
