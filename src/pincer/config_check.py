"""Check every settings file pincer reads under a PINCER_HOME, reporting all problems at once.

``pincer config check`` and ``pincer doctor`` use this. Unlike :func:`pincer.config.load_config`,
which stops at the first problem (pincer must not start on a broken policy), this lists every
problem of config.toml with its key; the other files (exec approvals, MCP servers, OpenAPI
services, script tool manifests) report what their own parsers refuse.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pincer.config import CONFIG_FILENAME, MAX_CONFIG_BYTES, Config, ConfigFile, parse_config
from pincer.core.errors import PincerError
from pincer.core.extras import BUILTIN_EXTRAS

__all__ = [
    "FileReport", "Problem", "check_config_file", "check_config_text", "check_home", "settings_files",
    "configured_extras", "missing_extras",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """One thing wrong in a settings file: where (``key``, dotted; "" for the whole file) and what."""

    key: str
    message: str
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "message": self.message, "hint": self.hint}


@dataclass(frozen=True, kw_only=True, slots=True)
class FileReport:
    """One settings file: whether it exists (a missing one means its defaults) and its problems."""

    kind: str
    path: Path
    exists: bool
    problems: tuple[Problem, ...] = ()

    @property
    def is_ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "exists": self.exists,
            "ok": self.is_ok,
            "problems": [p.to_dict() for p in self.problems],
        }


def settings_files(home: Path) -> dict[str, Path]:
    """The settings files pincer reads under ``home``, by kind (script manifests: their folder)."""
    from pincer.runtimes.mcp.config import SERVERS_FILE
    from pincer.runtimes.openapi.config import SERVICES_FILE
    from pincer.runtimes.script.installed import EXEC_APPROVALS_FILE, script_dir

    return {
        "config": home / CONFIG_FILENAME,
        "exec approvals": home / EXEC_APPROVALS_FILE,
        "mcp servers": home / SERVERS_FILE,
        "openapi services": home / SERVICES_FILE,
        "script tools": script_dir(home),
    }


def check_home(home: Path, *, config_file: Path | None = None) -> list[FileReport]:
    """Every settings file under ``home``; ``config_file`` checks that file as config.toml instead."""
    files = settings_files(home)
    reports = [check_config_file(config_file or files["config"], home=home)]
    reports.append(_check_with("exec approvals", files["exec approvals"], lambda: _load_exec_policy(home)))
    reports.append(_check_with("mcp servers", files["mcp servers"], lambda: _load_servers(home)))
    reports.append(_check_with("openapi services", files["openapi services"], lambda: _load_services(home)))
    reports.extend(_check_scripts(files["script tools"]))
    return reports


def check_config_file(path: Path, *, home: Path) -> FileReport:
    if not path.exists():
        return FileReport(kind="config", path=path, exists=False)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return _one("config", path, "", f"larger than {MAX_CONFIG_BYTES} bytes", "is this the right file?")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return _one("config", path, "", "not UTF-8 text", "save it as UTF-8")
    except OSError as exc:
        return _one("config", path, "", f"cannot be read: {exc.strerror}", "check its permissions")
    problems = check_config_text(text, home=home, source=str(path))
    if not problems:  # a valid file: does this installation have what it turns on?
        problems = missing_extras(parse_config(text, home=home, source=str(path)))
    return FileReport(kind="config", path=path, exists=True, problems=tuple(problems))


def check_config_text(text: str, *, home: Path, source: str = CONFIG_FILENAME) -> list[Problem]:
    """Every problem of a config.toml text: its TOML syntax, each key the schema refuses, and
    then the checks across keys (which only run once every key is valid)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return [Problem(key="", message=f"not valid TOML: {exc}", hint="fix the syntax at that line")]
    try:
        ConfigFile.model_validate(raw)
    except ValidationError as exc:
        return [_schema_problem(error) for error in exc.errors()]
    try:
        parse_config(text, home=home, source=source)
    except PincerError as exc:
        key, _, message = exc.message.removeprefix(f"{source}: ").partition(": ")
        return [Problem(key=key, message=message or key, hint=exc.hint)]
    return []


def configured_extras(config: Config) -> list[tuple[str, str]]:
    """(extra, config key) for every optional part config.toml turns on (core/extras.py)."""
    wanted: list[tuple[str, str]] = []
    if config.store.url is not None:
        wanted.append(("postgres", "store.url"))
    if config.cache.url is not None:
        wanted.append(("redis", "cache.url"))
    if config.telemetry.traces:
        wanted.append(("telemetry", "telemetry.traces"))
    if config.llm.default.model:
        wanted.append(("agent", "llm.model"))
    wanted += [("agent", f"llm.profiles.{n}.model") for n, p in config.llm.profiles.items() if p.model]
    wanted += [
        (BUILTIN_EXTRAS[name], f"builtins.{name}.enabled")
        for name, item in config.builtins.items()
        if item.enabled and name in BUILTIN_EXTRAS
    ]
    # single sign-on checks the id_token with joserfc and makes the PKCE challenge with authlib
    wanted += [("oauth", f"auth.oidc.{name}") for name in config.auth.oidc]
    return wanted


def missing_extras(config: Config) -> list[Problem]:
    """A problem for each part config.toml turns on whose extra is not installed, naming it."""
    from pincer.core.extras import EXTRAS, available, install_hint

    return [
        Problem(key=key, message=f"needs {EXTRAS[extra].feature}, which is not installed", hint=install_hint(extra))
        for extra, key in configured_extras(config)
        if not available(extra)
    ]


def _schema_problem(error: Any) -> Problem:
    loc = tuple(str(part) for part in error["loc"])
    key = ".".join(loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        section, leaf = ".".join(loc[:-1]), loc[-1]
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(leaf, known, n=1)
        where = f"[{section}]" if section else "the top level"
        hint = f"did you mean {close[0]}? " if close else ""
        hint += f"{where} has: {', '.join(known)}" if known else "remove it"
        return Problem(key=key, message="not a setting pincer knows", hint=hint)
    return Problem(key=key, message=error["msg"], hint="docs/config.md lists every key with its type and bounds")


def _known_keys(loc: tuple[str, ...]) -> list[str]:
    """The keys the schema allows at ``loc`` (list indexes and map names skipped)."""
    from pincer.config_template import schema_keys

    wanted = [part for part in loc if not part.isdigit()]
    keys = schema_keys()
    sections = {k.section for k in keys}
    names = []
    for key in keys:
        path = [p for p in key.path.split(".")[:-1] if p != "*"]
        if len(wanted) >= 2 and ".".join(wanted[:-1]) in sections and path == wanted[:-1]:
            names.append(key.name)  # inside a map entry: sessions.NAME.key
        elif path == wanted:
            names.append(key.name)
    if not wanted:
        names = sorted({k.path.split(".")[0] for k in keys})
    return list(dict.fromkeys(names))


def _check_with(kind: str, path: Path, load: Callable[[], object]) -> FileReport:
    if not path.exists():
        return FileReport(kind=kind, path=path, exists=False)
    try:
        load()
    except PincerError as exc:
        return _one(kind, path, getattr(exc, "key", ""), exc.message, exc.hint)
    return FileReport(kind=kind, path=path, exists=True)


def _check_scripts(folder: Path) -> list[FileReport]:
    from pincer.runtimes.script.installed import _SUFFIXES
    from pincer.runtimes.script.manifest import load_manifest

    if not folder.is_dir():
        return []
    reports = []
    for path in sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES):
        reports.append(_check_with("script tool", path, lambda path=path: load_manifest(path)))  # type: ignore[misc]
    return reports


def _one(kind: str, path: Path, key: str, message: str, hint: str | None) -> FileReport:
    return FileReport(kind=kind, path=path, exists=True, problems=(Problem(key=key, message=message, hint=hint),))


def _load_exec_policy(home: Path) -> object:
    from pincer.runtimes.script.installed import load_exec_policy

    return load_exec_policy(home)


def _load_servers(home: Path) -> object:
    from pincer.runtimes.mcp.config import ServerStore

    return ServerStore(home).load()


def _load_services(home: Path) -> object:
    from pincer.runtimes.openapi.config import ServiceStore

    return ServiceStore(home).load()

