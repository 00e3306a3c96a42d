"""Reading other clients' MCP server lists into pincer's :class:`ServerConfig`.

Four shapes are recognised by their top-level keys:

* IronClaw's ``mcp-servers.json``: ``{"schema_version": 1, "servers": [{"name", "url",
  "transport": {"transport": "stdio", "command", "args", "env"} | {"transport": "http"}, "headers",
  "enabled", "description", "oauth"}]}`` (a flattened ``"transport": "stdio"`` with the command
  beside it is read too);
* an IronClaw registry entry (``registry/mcp-servers/*.json``): ``{"name", "kind": "mcp_server",
  "url", "auth"}`` or with ``command``/``args``/``env``; a directory of them is read whole;
* ``{"mcpServers": {NAME: {"command", "args", "env", "cwd"} | {"url", "type", "headers"}}}`` as
  desktop MCP clients write it;
* OpenClaw's ``openclaw.json``: the same entries under ``{"mcp": {"servers": {NAME: ...}}}``.

In the two map shapes OpenClaw also writes entries that are not MCP servers pincer should connect
to as such: ``{"url": ..., "specPath": "./openapi-spec.yaml"}`` (an OpenAPI document served as
tools by openapi-mcp) becomes an OpenAPI service, since pincer reads OpenAPI itself (``specPath``,
``spec`` or ``openapi``; a relative path is resolved against the imported file's folder; the
service's base URL is the document's first server; the entry's ``url``, openapi-mcp's own
endpoint, is not used). ``"capabilities": ["discord", "telegram"]`` is kept on the server entry
(labels: see :mod:`.config`).

Keys pincer does not read are never silently dropped: ``ImportResult.unknown_keys`` lists them
per entry for the import summary (the entries themselves are still imported). A malformed entry is
a ManifestError naming the file, the entry and the key, and nothing is imported. Literal
credentials found in ``env`` or
``headers`` are not written to the server file: they are returned in ``ImportResult.secrets`` for
the caller to put into the secret store, and the entry refers to them as ``${secret:NAME}``.
``${VAR}`` references (environment interpolation in other clients) become ``${secret:VAR}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pincer.core.errors import ManifestError, PincerError, UsageError
from pincer.runtimes.mcp.config import ServerConfig, check_capability, sanitize
from pincer.runtimes.mcp.environment import SECRET_REF, is_forbidden_variable
from pincer.runtimes.openapi.config import ServiceConfig
from pincer.runtimes.openapi.document import Fetch

__all__ = ["ImportResult", "import_path", "import_data", "protect_env", "protect_headers", "MAX_IMPORT_BYTES"]

MAX_IMPORT_BYTES = 4 * 1024 * 1024
_SECRETISH_KEY = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH)", re.I)
_SECRETISH_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "x-auth-token", "cookie"})
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}")
_HTTP_TYPES = {"http": "http", "streamable-http": "http", "streamablehttp": "http", "streamable_http": "http", "sse": "sse"}
_SPEC_KEYS = ("specPath", "spec", "openapi")
_SERVICE_NAME = re.compile(r"[^A-Za-z0-9_-]")
# What each shape's entries may hold that pincer reads (or knowingly passes over: metadata).
_MAP_KEYS = frozenset({
    "command", "args", "env", "cwd", "url", "serverUrl", "type", "transport", "headers", "disabled", "enabled",
    "description", "capabilities", *_SPEC_KEYS,
})
_IRONCLAW_KEYS = frozenset({"name", "url", "transport", "headers", "enabled", "description", "oauth",
                            "command", "args", "env", "cwd"})
_IRONCLAW_TRANSPORT_KEYS = frozenset({"transport", "command", "args", "env", "cwd"})
_REGISTRY_KEYS = frozenset({"name", "display_name", "kind", "description", "keywords", "url", "auth", "command",
                            "args", "env", "cwd", "transport", "headers"})


@dataclass(kw_only=True, slots=True)
class ImportResult:
    servers: list[ServerConfig] = field(default_factory=list)
    services: list[ServiceConfig] = field(default_factory=list)  # OpenAPI entries (specPath)
    secrets: dict[str, str] = field(default_factory=dict, repr=False)  # name -> value for the store
    notes: list[str] = field(default_factory=list)
    unknown_keys: dict[str, list[str]] = field(default_factory=dict)  # entry -> keys pincer does not read
    format: str = ""


def import_path(path: Path, *, fetch: Fetch | None = None) -> ImportResult:
    """Read a file (any of the four shapes) or a directory of registry entries. ``fetch`` reads
    an OpenAPI document an entry names by URL (None: such entries are skipped with a note)."""
    if path.is_dir():
        result = ImportResult(format="registry directory")
        files = sorted(p for p in path.glob("*.json") if not p.name.startswith("_"))
        if not files:
            raise ManifestError("the directory holds no *.json registry entries", source=str(path))
        for file in files:
            part = import_data(_read(file), source=str(file), base=file.parent, fetch=fetch)
            result.servers.extend(part.servers)
            result.services.extend(part.services)
            result.secrets.update(part.secrets)
            result.notes.extend(part.notes)
            result.unknown_keys.update(part.unknown_keys)
        _check_unique(result.servers, str(path))
        return result
    return import_data(_read(path), source=str(path), base=path.parent, fetch=fetch)


def _read(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_IMPORT_BYTES:
            raise ManifestError(f"the file is larger than {MAX_IMPORT_BYTES} bytes", source=str(path))
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist", hint="give the path of an mcp-servers.json or mcpServers file") from None
    except UnicodeDecodeError:
        raise ManifestError("the file is not UTF-8 text", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", source=str(path)) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def import_data(
    data: Any, *, source: str, base: Path | None = None, fetch: Fetch | None = None
) -> ImportResult:
    """Parse already-loaded JSON; ``base`` is the folder relative ``specPath``s are resolved
    against (default: the current directory). Raises ManifestError (or UsageError) only."""
    try:
        return _import(data, source, base or Path.cwd(), fetch)
    except ManifestError:
        raise
    except PincerError as exc:
        raise ManifestError(exc.message, source=source, hint=exc.hint) from None


def _openclaw_servers(data: Mapping[str, Any]) -> Any:
    mcp = data.get("mcp")
    return mcp.get("servers") if isinstance(mcp, Mapping) and "servers" in mcp else None


def _import(data: Any, source: str, base: Path, fetch: Fetch | None) -> ImportResult:
    if not isinstance(data, Mapping):
        raise ManifestError(f"expected a JSON object, got {type(data).__name__}", source=source)
    openclaw = _openclaw_servers(data)
    if "mcpServers" in data or openclaw is not None:
        key = "mcpServers" if "mcpServers" in data else "mcp.servers"
        result = ImportResult(format="mcpServers" if key == "mcpServers" else "OpenClaw mcp.servers")
        servers = data["mcpServers"] if key == "mcpServers" else openclaw
        if not isinstance(servers, Mapping):
            raise ManifestError("expected an object of servers", source=source, key=key)
        for name, entry in servers.items():
            label = f"{key}.{name}"
            _note_unknown(result, label, entry, _MAP_KEYS)
            spec_key = next((k for k in _SPEC_KEYS if isinstance(entry, Mapping) and k in entry), None)
            if spec_key is not None:
                _add_service(result, str(name), entry, spec_key, source, label, base, fetch)
            else:
                _add(result, _from_mcp_servers_entry(str(name), entry, source, key), source)
    elif "servers" in data:
        version = data.get("schema_version", 1)
        if version != 1:
            raise ManifestError(
                f"schema_version {version!r} is not supported (only 1)", source=source, key="schema_version"
            )
        servers = data["servers"]
        if not isinstance(servers, list):
            raise ManifestError("expected a list of servers", source=source, key="servers")
        result = ImportResult(format="IronClaw mcp-servers.json")
        for index, entry in enumerate(servers):
            label = f"servers.{index}"
            _note_unknown(result, label, entry, _IRONCLAW_KEYS)
            if isinstance(entry, Mapping) and isinstance(entry.get("transport"), Mapping):
                _note_unknown(result, f"{label}.transport", entry["transport"], _IRONCLAW_TRANSPORT_KEYS)
            _add(result, _from_ironclaw_entry(entry, source, label), source)
    elif data.get("kind") == "mcp_server":
        result = ImportResult(format="IronClaw registry entry")
        _note_unknown(result, source, data, _REGISTRY_KEYS)
        _add(result, _from_registry_entry(data, source), source)
    else:
        raise ManifestError(
            "not an MCP server list: expected 'mcpServers', 'mcp.servers' (openclaw.json), 'servers' "
            "(mcp-servers.json) or a registry entry with \"kind\": \"mcp_server\"",
            source=source,
        )
    _check_unique(result.servers, source)
    _check_unique(result.services, source)
    return result


def _note_unknown(result: ImportResult, label: str, entry: Any, known: frozenset[str]) -> None:
    if isinstance(entry, Mapping):
        unknown = sorted(str(k) for k in entry if k not in known)
        if unknown:
            result.unknown_keys[label] = unknown


def _capabilities(value: Any, source: str, key: str) -> tuple[str, ...]:
    labels = _strings(value, source, key)
    for label in labels:
        try:
            check_capability(label, source=key)
        except UsageError as exc:
            raise ManifestError(exc.message, source=source, key=key, hint=exc.hint) from None
    return tuple(dict.fromkeys(labels))


def _add_service(
    result: ImportResult,
    raw_name: str,
    entry: Mapping[str, Any],
    spec_key: str,
    source: str,
    label: str,
    base: Path,
    fetch: Fetch | None,
) -> None:
    """An entry naming an OpenAPI document: read it now, as ``pincer openapi add`` does."""
    from pincer.runtimes.openapi import Resolver, load_document, server_urls
    from pincer.runtimes.openapi.importing import read_service

    spec = entry[spec_key]
    key = f"{label}.{spec_key}"
    if not isinstance(spec, str) or not spec.strip():
        raise ManifestError("expected the path or URL of an OpenAPI document", source=source, key=key)
    name = _SERVICE_NAME.sub("_", raw_name.strip())[:40].lstrip("_-") or "service"
    if name != raw_name:
        result.notes.append(f"{raw_name!r} is imported as {name!r}")
    is_url = spec.startswith(("http://", "https://"))
    if is_url and fetch is None:
        result.notes.append(
            f"{name}: its OpenAPI document is at a URL, which import does not fetch; skipped: "
            f"pincer openapi add {name} --spec {spec}"
        )
        return
    location: str | Path = spec if is_url else (base / Path(spec).expanduser())
    if isinstance(location, Path) and not location.is_file():  # never a device, a pipe or a folder
        raise ManifestError(f"the OpenAPI document {location} does not exist or is not a file", source=source, key=key)
    try:
        document, where = load_document(location, fetch=fetch)
    except PincerError as exc:
        raise ManifestError(exc.message, source=source, key=key, hint=exc.hint) from None
    base_url = next(iter(server_urls(document, where)), None)
    if base_url is None:
        result.notes.append(
            f"{name}: the OpenAPI document names no server to call; skipped: "
            f"pincer openapi add {name} --spec {where} --base-url https://..."
        )
        return
    try:
        imported = read_service(name, document, where, base_url=base_url, resolver=Resolver(document, where, fetch=fetch),
                                fetch=fetch)
    except UsageError as exc:
        raise ManifestError(exc.message, source=source, key=label, hint=exc.hint) from None
    except PincerError as exc:
        raise ManifestError(exc.message, source=source, key=key, hint=exc.hint) from None
    service = imported.service
    operations = service.operations
    result.notes.extend(f"{name}: {note}" for note in imported.notes)
    result.services.append(service)
    result.notes.append(
        f"{name}: an OpenAPI document ({spec_key} {spec}); imported as an OpenAPI service with "
        f"{len(operations)} tools calling {base_url}"
        + (" (the entry's url, openapi-mcp's own endpoint, is not used)" if "url" in entry else "")
    )
    if "capabilities" in entry:
        result.notes.append(f"{name}: capabilities apply to MCP servers only; not kept for an OpenAPI service")


# -- one entry each ------------------------------------------------------------------------------

_Parsed = tuple[dict[str, Any] | None, dict[str, str], list[str]]  # fields, secrets, notes


def _add(result: ImportResult, parsed: _Parsed, source: str) -> None:
    fields, secrets, notes = parsed
    result.notes.extend(notes)
    if fields is None:
        return
    try:
        config = ServerConfig(**fields)
    except UsageError as exc:
        raise ManifestError(exc.message, source=source, key=str(fields.get("name")), hint=exc.hint) from None
    result.servers.append(config)
    result.secrets.update(secrets)


def _check_unique(servers: list[ServerConfig] | list[ServiceConfig], source: str) -> None:
    seen: set[str] = set()
    for server in servers:
        if server.name in seen:
            raise ManifestError(f"two servers are named {server.name!r}", source=source, hint="rename one of them")
        seen.add(server.name)


def _name(raw: Any, source: str, key: str) -> tuple[str, list[str]]:
    if not isinstance(raw, str) or not raw.strip():
        raise ManifestError("the server has no name", source=source, key=key)
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", raw.strip())[:64].lstrip("_.-") or "server"
    notes = [f"{raw!r} is imported as {name!r}"] if name != raw else []
    return name, notes


def _strings(value: Any, source: str, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError("expected a list of strings", source=source, key=key)
    return list(value)


def _string_map(value: Any, source: str, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError("expected an object of strings", source=source, key=key)
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ManifestError(f"the value of {k!r} is not a string", source=source, key=key)
        out[str(k)] = str(v)
    return out


def _protect(
    server: str, values: dict[str, str], *, is_secret: Any, kind: str
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Replace literal credentials by store references; ``${VAR}`` becomes ``${secret:VAR}``."""
    kept: dict[str, str] = {}
    secrets: dict[str, str] = {}
    notes: list[str] = []
    for key, value in values.items():
        refs = _ENV_REF.findall(value)
        if refs:
            value = _ENV_REF.sub(lambda m: "${secret:" + m.group(1) + "}", value)
            notes.append(
                f"{server}: {kind} {key} takes {', '.join(refs)} from the secret store now: "
                + " ".join(f"`pincer secrets set {r}`" for r in refs)
            )
        elif is_secret(key) and value and not SECRET_REF.search(value):
            secret_name = sanitize(f"mcp_{server}_{key}").lower()
            prefix = ""
            if kind == "header" and key.lower() in ("authorization", "proxy-authorization") and " " in value:
                prefix, _, value = value.partition(" ")
                prefix += " "
            secrets[secret_name] = value
            value = prefix + "${secret:" + secret_name + "}"
            notes.append(f"{server}: the value of {kind} {key} moves into the secret store as {secret_name}")
        kept[key] = value
    return kept, secrets, notes


def protect_env(server: str, env: dict[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Env values for a server entry: forbidden variables dropped, literal credentials moved out.
    Returns (values to store in the entry, secrets for the store, notes for the user)."""
    notes: list[str] = []
    clean: dict[str, str] = {}
    for key, value in env.items():
        if is_forbidden_variable(key):
            notes.append(f"{server}: env {key} is dropped (pincer never passes LD_*, DYLD_*, PYTHON*, NODE_OPTIONS)")
        else:
            clean[key] = value
    kept, secrets, more = _protect(server, clean, is_secret=lambda k: bool(_SECRETISH_KEY.search(k)), kind="env")
    return kept, secrets, notes + more


def protect_headers(server: str, headers: dict[str, str]) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Header values for a server entry, literal credentials moved out (see ``protect_env``)."""
    return _protect(
        server,
        headers,
        is_secret=lambda k: k.lower() in _SECRETISH_HEADERS or bool(_SECRETISH_KEY.search(k)),
        kind="header",
    )


def _stdio_fields(name: str, command: Any, args: Any, env: Any, cwd: Any, source: str, key: str) -> _Parsed:
    if not isinstance(command, str) or not command:
        raise ManifestError("a stdio server needs a command", source=source, key=f"{key}.command")
    kept, secrets, notes = protect_env(name, _string_map(env, source, f"{key}.env"))
    fields = {
        "name": name,
        "transport": "stdio",
        "command": command,
        "args": tuple(_strings(args, source, f"{key}.args")),
        "env": kept,
        "cwd": cwd if isinstance(cwd, str) and cwd else None,
    }
    return fields, secrets, notes


def _http_fields(name: str, url: Any, transport: str, headers: Any, source: str, key: str) -> _Parsed:
    if not isinstance(url, str) or not url:
        raise ManifestError("an http server needs a url", source=source, key=f"{key}.url")
    kept, secrets, notes = protect_headers(name, _string_map(headers, source, f"{key}.headers"))
    return {"name": name, "transport": transport, "url": url, "headers": kept}, secrets, notes


def _guess_http_transport(url: str, declared: Any) -> str:
    if isinstance(declared, str) and declared.lower() in _HTTP_TYPES:
        return _HTTP_TYPES[declared.lower()]
    return "sse" if url.rstrip("/").endswith("/sse") else "http"


def _from_mcp_servers_entry(raw_name: str, entry: Any, source: str, where: str = "mcpServers") -> _Parsed:
    key = f"{where}.{raw_name}"
    if not isinstance(entry, Mapping):
        raise ManifestError("expected an object", source=source, key=key)
    name, notes = _name(raw_name, source, key)
    declared = entry.get("type", entry.get("transport"))
    if "command" in entry or declared == "stdio":
        fields, secrets, more = _stdio_fields(
            name, entry.get("command"), entry.get("args"), entry.get("env"), entry.get("cwd"), source, key
        )
    else:
        url = entry.get("url", entry.get("serverUrl"))
        fields, secrets, more = _http_fields(
            name, url, _guess_http_transport(str(url or ""), declared), entry.get("headers"), source, key
        )
    assert fields is not None
    if entry.get("disabled") is True or entry.get("enabled") is False:
        fields["enabled"] = False
    if isinstance(entry.get("description"), str):
        fields["description"] = entry["description"]
    if "capabilities" in entry:
        fields["capabilities"] = _capabilities(entry["capabilities"], source, f"{key}.capabilities")
    return fields, secrets, notes + more


def _from_ironclaw_entry(entry: Any, source: str, key: str) -> _Parsed:
    if not isinstance(entry, Mapping):
        raise ManifestError("expected an object", source=source, key=key)
    name, notes = _name(entry.get("name"), source, f"{key}.name")
    transport = entry.get("transport")
    if isinstance(transport, str):  # flattened: the command sits beside "transport"
        transport = {**entry, "transport": transport}
    kind = transport.get("transport") if isinstance(transport, Mapping) else None
    if transport is not None and not isinstance(transport, Mapping):
        raise ManifestError("expected an object", source=source, key=f"{key}.transport")
    if kind == "stdio":
        assert isinstance(transport, Mapping)
        fields, secrets, more = _stdio_fields(
            name, transport.get("command"), transport.get("args"), transport.get("env"), transport.get("cwd"),
            source, f"{key}.transport",
        )
    elif kind in (None, "http"):
        fields, secrets, more = _http_fields(
            name, entry.get("url"), _guess_http_transport(str(entry.get("url") or ""), None), entry.get("headers"),
            source, key,
        )
    else:
        return None, {}, notes + [f"{name}: transport {kind!r} is not supported by pincer; skipped"]
    assert fields is not None
    if entry.get("oauth") is not None:
        more.append(
            f"{name}: OAuth is not done by pincer; give it a token header instead: "
            f'pincer mcp add {name} --url ... --header "Authorization:Bearer ${{secret:NAME}}"'
        )
    if entry.get("enabled") is False:
        fields["enabled"] = False
    if isinstance(entry.get("description"), str):
        fields["description"] = entry["description"]
    return fields, secrets, notes + more


def _from_registry_entry(entry: Mapping[str, Any], source: str) -> _Parsed:
    name, notes = _name(entry.get("name"), source, "name")
    if entry.get("command"):
        fields, secrets, more = _stdio_fields(
            name, entry.get("command"), entry.get("args"), entry.get("env"), entry.get("cwd"), source, "(entry)"
        )
    else:
        url = entry.get("url")
        fields, secrets, more = _http_fields(
            name, url, _guess_http_transport(str(url or ""), entry.get("transport")), entry.get("headers"),
            source, "(entry)",
        )
    assert fields is not None
    auth = entry.get("auth")
    if isinstance(auth, str) and auth not in ("none", ""):
        more.append(
            f"{name}: the registry says auth {auth!r}; pincer does not run OAuth flows, so give the server a "
            f'token: pincer mcp add {name} --url {fields.get("url", "URL")} --header "Authorization:Bearer ${{secret:NAME}}"'
        )
    description = entry.get("description")
    if isinstance(description, str):
        fields["description"] = description
    return fields, secrets, notes + more
