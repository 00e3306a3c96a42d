"""MCP-Registry ``server.json`` documents as a catalog source.

A source ``path`` names one document, a folder of them (``*.json``, or ``*/server.json``), or a
registry API answer saved to a file (``{"servers": [{"server": {...}, "_meta": ...}]}``). Each
server becomes a ``mcp-servers/NAME`` entry, NAME being the part of the registry name after its
namespace (``io.github.acme/weather`` -> ``weather``). Installing one writes a pincer MCP server
entry made from the document (:func:`entry_from_document`):

- the first ``packages`` item with a stdio transport: npm -> ``npx -y ID@VERSION``, pypi ->
  ``uvx ID==VERSION``, oci -> ``docker run -i --rm ID:VERSION``, with its runtime and package
  arguments; environment variables become ``${secret:NAME}`` unless they have a non-secret
  default;
- else the first ``remotes`` item (streamable-http or sse) with its URL; secret headers become
  ``${secret:NAME}`` references.

Unknown keys are ignored; documents carry no signatures (``--allow-unsigned``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pincer.core.errors import ArtifactNotFound, ArtifactRefused, ManifestError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, is_version
from pincer.hub.sources import DOWNLOAD_TIMEOUT_S, CatalogEntry, Progress, Resolved

logger = logging.getLogger(__name__)

__all__ = ["McpRegistrySource", "entry_from_document", "is_server_document", "short_name"]

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def is_server_document(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    schema = str(data.get("$schema", ""))
    return "server.schema.json" in schema or ("name" in data and ("packages" in data or "remotes" in data))


def short_name(registry_name: str) -> str:
    tail = registry_name.rsplit("/", 1)[-1]
    cleaned = _NOT_NAME.sub("-", tail).strip("-.") or "server"
    return cleaned[:64]


def _documents(data: Any) -> Iterator[dict[str, Any]]:
    if isinstance(data, dict) and isinstance(data.get("servers"), list):
        for item in data["servers"]:
            if isinstance(item, dict):
                yield from _documents(item)
        return
    if isinstance(data, dict) and isinstance(data.get("server"), dict):
        yield data["server"]
        return
    if is_server_document(data):
        yield data


class McpRegistrySource:
    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = Path(path)
        self.problems: list[str] = []
        self._docs: dict[ArtifactKey, tuple[dict[str, Any], bytes]] | None = None
        self._docs_stamp: tuple[Any, ...] | None = None

    def _files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        return sorted({*self.path.glob("*.json"), *self.path.glob("*/server.json")})

    def stamp(self) -> tuple[Any, ...]:
        return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in self._files())

    def _load(self) -> dict[ArtifactKey, tuple[dict[str, Any], bytes]]:
        try:
            stamp = self.stamp()
        except OSError:
            stamp = None
        if self._docs is not None and stamp == self._docs_stamp:
            return self._docs
        self._docs_stamp = stamp
        found: dict[ArtifactKey, tuple[dict[str, Any], bytes]] = {}
        self.problems = []
        for file in self._files():
            try:
                raw = file.read_bytes()
                if len(raw) > MAX_DOCUMENT_BYTES:
                    raise ValueError(f"larger than {MAX_DOCUMENT_BYTES:,} bytes")
                data = json.loads(raw)
            except (OSError, ValueError) as exc:
                self.problems.append(f"{file}: {exc}")
                continue
            for doc in _documents(data):
                if not isinstance(doc.get("name"), str):
                    self.problems.append(f"{file}: a server without a name")
                    continue
                key = ArtifactKey(kind=ArtifactKind.MCP_SERVER, name=short_name(doc["name"]))
                if key in found:
                    self.problems.append(f"{file}: {doc['name']} clashes with another server named {key.name!r}; kept the first")
                    continue
                found[key] = (doc, json.dumps(doc, indent=2, sort_keys=True).encode("utf-8") + b"\n")
        for problem in self.problems:
            logger.warning("hub source %s: skipped %s", self.name, problem)
        self._docs = found
        return found

    def entries(self) -> list[CatalogEntry]:
        from pincer.hub.scanner import ScanReport, scan_command

        out = []
        for key, (doc, _raw) in sorted(self._load().items()):
            try:
                entry = entry_from_document(doc, name=key.name)
                verdict = ScanReport(
                    findings=tuple(scan_command(entry.get("command"), entry.get("args", []), entry.get("env", {}), file=str(key)))
                ).verdict
            except ManifestError:
                verdict = "unscanned"
            out.append(
                CatalogEntry(
                    kind=key.kind, name=key.name, version=_version(doc), source=self.name,
                    display_name=str(doc.get("title") or doc.get("name") or ""), description=str(doc.get("description") or ""),
                    keywords=tuple(str(doc["name"]).replace("/", ".").split(".")), verdict=verdict,
                )
            )
        return out

    def search(self, query: str, *, kind: ArtifactKind | None, limit: int) -> list[CatalogEntry] | None:
        return None

    def versions(self, key: ArtifactKey) -> list[str]:
        found = self._load().get(key)
        return [_version(found[0])] if found else []

    def resolve(self, key: ArtifactKey, wanted: str | None) -> Resolved:
        found = self._load().get(key)
        if found is None:
            raise ArtifactNotFound(f"source {self.name!r} has no {key}", hint=f"`pincer search {key.name}` shows what the sources have")
        doc, raw = found
        version = _version(doc)
        if wanted not in (None, "latest", version):
            raise ArtifactNotFound(f"source {self.name!r} has {key} only at version {version}, not {wanted}")
        entry = entry_from_document(doc, name=key.name)
        shown: dict[str, Any] = {k: entry[k] for k in ("command", "args", "url") if k in entry}
        return Resolved(key=key, version=version, source=self.name, files={"server.json": raw},
                        description=str(doc.get("description") or ""), requested=shown)  # fmt: skip

    def fetch(self, resolved: Resolved, *, max_bytes: int, progress: Progress | None = None, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> bytes:
        raise ArtifactRefused(f"{resolved.label} is an entry, not an archive")


def _version(doc: dict[str, Any]) -> str:
    version = doc.get("version")
    if isinstance(version, str) and is_version(version):
        return version.strip()
    return "0.0.0"


def _arguments(items: Any) -> list[str]:
    args: list[str] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        value = item.get("value", item.get("default"))
        if item.get("type") == "named" and isinstance(item.get("name"), str):
            args.append(item["name"])
            if isinstance(value, str):
                args.append(value)
        elif isinstance(value, str):
            args.append(value)
    return args


def _secret_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:128] or "secret"


def entry_from_document(doc: dict[str, Any], *, name: str) -> dict[str, Any]:
    """A server.json document -> an IronClaw-registry-shaped MCP server entry (what
    :func:`pincer.runtimes.mcp.importers.import_data` reads). ManifestError when it names
    neither a stdio package nor a remote pincer can run."""
    source = str(doc.get("name") or name)
    for package in doc.get("packages") or []:
        if not isinstance(package, dict):
            continue
        raw_transport = package.get("transport")
        transport: dict[str, Any] = raw_transport if isinstance(raw_transport, dict) else {}
        if transport.get("type", "stdio") != "stdio":
            continue
        registry, ident = package.get("registryType"), package.get("identifier")
        if not isinstance(ident, str) or not ident:
            continue
        version = package.get("version") if isinstance(package.get("version"), str) else None
        if registry == "npm":
            command, head = "npx", ["-y", f"{ident}@{version}" if version else ident]
        elif registry == "pypi":
            command, head = "uvx", [f"{ident}=={version}" if version else ident]
        elif registry == "oci":
            command, head = "docker", ["run", "-i", "--rm", f"{ident}:{version}" if version and ":" not in ident else ident]
        else:
            continue
        env: dict[str, str] = {}
        for variable in package.get("environmentVariables") or []:
            if isinstance(variable, dict) and isinstance(variable.get("name"), str):
                default = variable.get("default") if isinstance(variable.get("default"), str) else None
                if default is not None and not variable.get("isSecret"):
                    env[variable["name"]] = default
                else:
                    env[variable["name"]] = "${secret:" + _secret_name(variable["name"]) + "}"
        args = _arguments(package.get("runtimeArguments")) + head + _arguments(package.get("packageArguments"))
        entry: dict[str, Any] = {"name": name, "kind": "mcp_server", "command": command, "args": args}
        if env:
            entry["env"] = env
        if doc.get("description"):
            entry["description"] = str(doc["description"])[:500]
        return entry
    for remote in doc.get("remotes") or []:
        if not isinstance(remote, dict) or not isinstance(remote.get("url"), str):
            continue
        kind = remote.get("type", "streamable-http")
        if kind not in ("streamable-http", "sse"):
            continue
        entry = {"name": name, "kind": "mcp_server", "url": remote["url"], "transport": "sse" if kind == "sse" else "http"}
        headers = {}
        for header in remote.get("headers") or []:
            if isinstance(header, dict) and isinstance(header.get("name"), str):
                if header.get("isSecret") or not isinstance(header.get("value"), str):
                    headers[header["name"]] = "${secret:" + _secret_name(f"{name}_{header['name']}") + "}"
                else:
                    headers[header["name"]] = header["value"]
        if headers:
            entry["headers"] = headers
        if doc.get("description"):
            entry["description"] = str(doc["description"])[:500]
        return entry
    raise ManifestError("names no stdio package (npm, pypi, oci) and no remote pincer can connect to", source=source)
