"""Skills pincer loads from an MCP server through the skills extension (``io.modelcontextprotocol/skills``).

``skills/list`` gives each skill's ``skill://NAME/SKILL.md`` URI, its frontmatter and every file
with its ``sha256:`` digest and size; each file is read with ``resources/read`` and verified
against that digest before anything is written. A skill whose files do not all match, or that
breaks the extension's per-skill limits, is refused whole. Verified skills are written to
``$PINCER_HOME/installed/skills/NAME/`` (so they are *installed*, attenuated skills) with an
``.pincer-origin.json`` naming the server; their ``allowed-tools`` are ignored until a person
approves them with ``pincer skills approve NAME``, recorded in ``$PINCER_HOME/skill-approvals.json``
against the SKILL.md's digest (a changed skill needs approving again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from pincer.core.errors import SkillError, UsageError
from pincer.skills.model import Issue, Skill
from pincer.store.jsonfile import locked, read_json, write_json_atomic

__all__ = [
    "ORIGIN_FILE",
    "APPROVALS_FILE",
    "SKILLS_EXTENSION",
    "RemoteApprovals",
    "FetchedSkill",
    "apply_origin",
    "fetch_remote_skills",
    "skill_uri",
    "MAX_REMOTE_PAGES",
]

ORIGIN_FILE = ".pincer-origin.json"
APPROVALS_FILE = "skill-approvals.json"
_REPLACE_PREFIX = "replace:"  # not a skill name (names have no ':'): a person's --replace
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
MAX_REMOTE_PAGES = 50
MAX_REMOTE_SKILLS = 1_000
_VERSION_LINE = re.compile(r"^version:\s*[\"']?([0-9A-Za-z.+-]{1,64})", re.MULTILINE)
_VERSION_SCAN_BYTES = 4096  # the frontmatter's first lines


def skill_uri(name: str, path: str = "SKILL.md") -> str:
    return f"skill://{quote(name, safe='')}/{quote(path, safe='/')}"


class RemoteApprovals:
    """``skill-approvals.json``: the allowed-tools a person approved, per skill and SKILL.md digest."""

    def __init__(self, home: Path) -> None:
        self.path = home / APPROVALS_FILE

    def _read(self) -> dict[str, Any]:
        data = read_json(self.path, default={})
        return data if isinstance(data, dict) else {}

    def is_approved(self, skill: Skill) -> bool:
        entry = self._read().get(skill.name)
        return isinstance(entry, dict) and entry.get("digest") == skill.content_hash

    def is_trusted(self, skill: Skill) -> bool:
        """A person approved this very SKILL.md (digest and path) as trusted."""
        entry = self._read().get(skill.name)
        return (
            isinstance(entry, dict)
            and entry.get("trusted") is True
            and entry.get("digest") == skill.content_hash
            and entry.get("path") == str(skill.path)
        )

    def approve_trust(self, skill: Skill, *, by: str) -> dict[str, Any]:
        """Trust a skill an agent could have written (a workspace skill, one a run wrote)."""
        entry = {"digest": skill.content_hash, "trusted": True, "path": str(skill.path), "approved_by": by, "approved_at": time.time()}
        with locked(self.path):
            data = self._read()
            data[skill.name] = entry
            write_json_atomic(self.path, data)
        return entry

    def replaces(self, skill: Skill) -> bool:
        """A person installed this very SKILL.md with ``--replace``: it takes a trusted skill's name."""
        entry = self._read().get(_REPLACE_PREFIX + skill.name)
        return isinstance(entry, dict) and entry.get("digest") == skill.content_hash and entry.get("path") == str(skill.path)

    def approve_replace(self, skill: Skill, *, by: str) -> dict[str, Any]:
        entry = {"digest": skill.content_hash, "path": str(skill.path), "approved_by": by, "approved_at": time.time()}
        with locked(self.path):
            data = self._read()
            data[_REPLACE_PREFIX + skill.name] = entry
            write_json_atomic(self.path, data)
        return entry

    def approve(self, skill: Skill, tools: tuple[str, ...], *, by: str) -> dict[str, Any]:
        entry = {"digest": skill.content_hash, "allowed_tools": list(tools), "approved_by": by, "approved_at": time.time()}
        with locked(self.path):
            data = self._read()
            data[skill.name] = entry
            write_json_atomic(self.path, data)
        return entry


def read_origin(base_dir: Path) -> dict[str, Any]:
    data = read_json(base_dir / ORIGIN_FILE, default={})
    return data if isinstance(data, dict) else {}


def apply_origin(skill: Skill, approvals: RemoteApprovals) -> Skill:
    """A skill from an MCP server names no tools until its allowed-tools are approved."""
    origin = read_origin(skill.base_dir)
    if not skill.tools or approvals.is_approved(skill):
        return skill
    server = origin.get("server", "an MCP server")
    note = Issue(
        key="allowed-tools",
        message=f"from {server}: {' '.join(skill.tools)} ignored until a person approves them "
        f"(`pincer skills approve {skill.name}`)",
    )
    return replace(skill, tools=(), warnings=(*skill.warnings, note), metadata={**skill.metadata, "pincer/pendingTools": list(skill.tools)})


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchedSkill:
    name: str
    path: Path
    files: int
    bytes: int
    version: str | None = None  # the frontmatter's, a label for pincer.lock

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "files": self.files, "bytes": self.bytes, "version": self.version}


def _uri_parts(uri: str) -> tuple[str, list[str]]:
    parts = urlsplit(uri)
    if parts.scheme != "skill":
        raise ValueError("not a skill:// URI")
    return unquote(parts.netloc), [unquote(p) for p in parts.path.split("/") if p]


async def fetch_remote_skills(
    client: Any,
    *,
    server: str,
    home: Path,
    names: tuple[str, ...] = (),
    max_files: int = 512,
    max_bytes: int = 16 * 1024 * 1024,
) -> tuple[list[FetchedSkill], list[str]]:
    """Fetch, verify and install the server's skills (or only ``names``). Returns what was
    installed and, per refused skill, why."""
    from pincer.skills.agentskills import is_spec_name
    from pincer.skills.files import safe_relative

    entries = await _list_entries(client)
    installed: list[FetchedSkill] = []
    refused: list[str] = []
    for entry in entries[:MAX_REMOTE_SKILLS]:
        uri = str(entry.get("uri", ""))
        try:
            name, segments = _uri_parts(uri)
            if segments != ["SKILL.md"] or not is_spec_name(name):
                raise ValueError(f"{uri!r} is not skill://NAME/SKILL.md with a valid name")
            if names and name not in names:
                continue
            resources = entry.get("resources")
            if not isinstance(resources, list):
                raise ValueError("it lists no static files (resources: dynamic)")
            if len(resources) > max_files:
                raise ValueError(f"it has {len(resources)} files, more than the extension's limit of {max_files}")
            files: dict[str, tuple[str, int]] = {}
            total = 0
            for record in resources:
                if not isinstance(record, Mapping):
                    raise ValueError(f"a file entry is {type(record).__name__}, not an object")
                r_uri = str(record.get("uri", ""))
                r_name, r_segments = _uri_parts(r_uri)
                if r_name != name or not r_segments:
                    raise ValueError(f"file {r_uri!r} is outside the skill")
                rel = safe_relative("/".join(r_segments))
                digest, size = str(record.get("digest", "")), record.get("size")
                if not digest.startswith("sha256:") or not isinstance(size, int) or isinstance(size, bool) or size < 0:
                    raise ValueError(f"file {rel!r} has no sha256 digest and size")
                total += size
                files[rel] = (digest, size)
            if "SKILL.md" not in files:
                raise ValueError("it lists no SKILL.md")
            if total > max_bytes:
                raise ValueError(f"its files hold {total:,} bytes, more than the extension's limit of {max_bytes:,}")
            contents: dict[str, bytes] = {}
            for rel, (digest, size) in files.items():
                data = await _read(client, skill_uri(name, rel))
                if len(data) != size:
                    raise ValueError(f"file {rel!r} is {len(data)} bytes; the listing promised {size}")
                actual = "sha256:" + hashlib.sha256(data).hexdigest()
                if actual != digest:
                    raise ValueError(f"file {rel!r} does not match its listed digest ({actual} != {digest})")
                contents[rel] = data
            installed.append(_install(home, name, contents, origin={"server": server, "uri": uri, "fetched_at": time.time()}))
        except (ValueError, UsageError, SkillError) as exc:
            message = exc.message if isinstance(exc, (UsageError, SkillError)) else str(exc)
            refused.append(f"{uri or '(no uri)'}: {message}")
    return installed, refused


async def _list_entries(client: Any) -> list[Mapping[str, Any]]:
    entries: list[Mapping[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_REMOTE_PAGES):
        params: dict[str, Any] = {"cursor": cursor} if cursor else {}
        result = await _request(client, "skills/list", params)
        page = result.get("skills", [])
        if isinstance(page, list):
            entries.extend(e for e in page if isinstance(e, Mapping))
        cursor = result.get("nextCursor")
        if not cursor:
            return entries
    return entries


async def _request(client: Any, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    from mcp_types import PaginatedRequestParams, Request, Result
    from pydantic import ConfigDict

    class _Params(PaginatedRequestParams):
        model_config = ConfigDict(extra="allow")

    class _Request(Request[_Params, str]):
        method: str
        params: _Params

    class _Any(Result):
        model_config = ConfigDict(extra="allow")

    session = getattr(client, "session", client)
    result: _Any = await session.send_request(_Request(method=method, params=_Params(**params)), _Any)
    return result.model_dump(by_alias=True, exclude_none=True)


async def _read(client: Any, uri: str) -> bytes:
    result = await client.read_resource(uri)
    contents = getattr(result, "contents", result)
    if len(contents) != 1:
        raise ValueError(f"{uri} came back as {len(contents)} parts, not one")
    (content,) = contents
    text = getattr(content, "text", None)
    if text is not None:
        return str(text).encode("utf-8")
    return base64.b64decode(getattr(content, "blob", "") or "")


def _install(home: Path, name: str, contents: Mapping[str, bytes], *, origin: Mapping[str, Any]) -> FetchedSkill:
    root = home / "installed" / "skills"
    root.mkdir(parents=True, exist_ok=True)
    target = root / name
    partial = root / f".{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    for rel, data in contents.items():
        path = partial / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (partial / ORIGIN_FILE).write_text(json.dumps(dict(origin), indent=2))
    old = root / f".{name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.rename(target, old)
    os.rename(partial, target)
    shutil.rmtree(old, ignore_errors=True)
    version = _VERSION_LINE.search(contents.get("SKILL.md", b"")[:_VERSION_SCAN_BYTES].decode("utf-8", "replace"))
    return FetchedSkill(name=name, path=target, files=len(contents), bytes=sum(len(d) for d in contents.values()),
                        version=version.group(1) if version else None)  # fmt: skip
