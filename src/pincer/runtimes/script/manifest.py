r"""Script tool manifests: a command template run in a sandbox, declared in a JSON or TOML file.
The format as users write it, with every key and examples that run as written, is
``docs/script-tools.md``; this is the shape in brief:

    name = "word_count"
    description = "Count the words of a text"
    command = ["/bin/sh", "-c", "printf '%s' \"$1\" | wc -w", "word_count", "{text}"]
    effects = []

    [input_schema]
    type = "object"
    properties.text = { type = "string" }
    required = ["text"]

    [sandbox]
    network = "none"            # none | allowlist | host
    allow_hosts = []            # with "allowlist": host patterns, "*.example.com", "api.example.com:8443"
    env = { LANG = "C.UTF-8" }  # the whole environment besides PATH and HOME
    mounts = [{ source = "/srv/data", target = "/data", mode = "ro" }]

    [limits]
    timeout_s = 30
    cpu_s = 30
    memory_mb = 512
    pids = 128
    file_size_mb = 64
    tmp_size_mb = 64
    output_bytes = 1048576

The command is an argv template, never a shell line: each ``{name}`` is replaced by the argument of
that name. An element that is exactly ``{name}`` becomes one argv element (or several, for a list
value) and disappears when an optional argument is absent; inside a longer element the value is
spliced into the text. ``{{`` and ``}}`` are literal braces. The program (first element) is fixed:
arguments can never choose what runs. Unknown keys are ignored.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pincer.core.effects import EffectKind, RuntimeKind, parse_effects
from pincer.core.errors import ArgumentsInvalid, ManifestError, UsageError
from pincer.core.schema import schema_problem
from pincer.core.values import ToolSpec
from pincer.safety.hosts import HostPattern

__all__ = [
    "Limits",
    "Mount",
    "NetworkMode",
    "SandboxSpec",
    "ScriptToolManifest",
    "parse_manifest",
    "load_manifest",
    "render_command",
    "placeholders",
]

MIB = 1024 * 1024
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED_TARGETS = ("/", "/proc", "/dev", "/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc", "/work", "/tmp", "/run/pincer")
_RESERVED_ENV = frozenset({"PATH", "HOME", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "NO_PROXY"})


class NetworkMode(StrEnum):
    NONE = "none"
    ALLOWLIST = "allowlist"
    HOST = "host"


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """Hard limits of one run. Memory and process count need cgroups; the rest are rlimits."""

    timeout_s: float = 30.0
    cpu_s: int = 30
    memory_bytes: int = 512 * MIB
    pids: int = 128
    file_size_bytes: int = 64 * MIB
    tmp_size_bytes: int = 64 * MIB
    output_bytes: int = 1 * MIB  # each of stdout and stderr

    def to_dict(self) -> dict[str, Any]:
        return {
            "timeout_s": self.timeout_s,
            "cpu_s": self.cpu_s,
            "memory_mb": self.memory_bytes // MIB,
            "pids": self.pids,
            "file_size_mb": self.file_size_bytes // MIB,
            "tmp_size_mb": self.tmp_size_bytes // MIB,
            "output_bytes": self.output_bytes,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Mount:
    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxSpec:
    network: NetworkMode = NetworkMode.NONE
    allow_hosts: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptToolManifest:
    name: str
    description: str
    command: tuple[str, ...]
    input_schema: Mapping[str, Any]
    effects: frozenset[EffectKind]
    sandbox: SandboxSpec
    limits: Limits
    side_effecting: bool = True
    source: str = "<manifest>"

    def to_spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            effects=self.effects,
            runtime=RuntimeKind.SCRIPT,
            side_effecting=self.side_effecting,
            source=self.source,
            annotations={
                "command": list(self.command),
                "network": self.sandbox.network.value,
                "allow_hosts": list(self.sandbox.allow_hosts),
                "limits": self.limits.to_dict(),
            },
        )


# --- the untrusted shape -------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _MountModel(_Strict):
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    mode: str = "ro"

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in ("ro", "rw"):
            raise ValueError('must be "ro" or "rw"')
        return value

    @field_validator("source", "target")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/") or "\0" in value:
            raise ValueError("must be an absolute path")
        if ".." in PurePosixPath(value).parts:
            raise ValueError("must not contain '..'")
        return value


class _SandboxModel(_Strict):
    network: NetworkMode = NetworkMode.NONE
    allow_hosts: list[str] = Field(default_factory=list)
    mounts: list[_MountModel] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class _LimitsModel(_Strict):
    timeout_s: float = Field(default=30.0, gt=0, le=24 * 3600)
    cpu_s: int = Field(default=30, ge=1, le=24 * 3600)
    memory_mb: int = Field(default=512, ge=8, le=1024 * 1024)
    pids: int = Field(default=128, ge=4, le=65536)
    file_size_mb: int = Field(default=64, ge=1, le=1024 * 1024)
    tmp_size_mb: int = Field(default=64, ge=1, le=1024 * 1024)
    output_bytes: int = Field(default=MIB, ge=1024, le=64 * MIB)


class _ManifestModel(_Strict):
    name: str
    description: str = ""
    command: list[str] = Field(min_length=1)
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    effects: list[str] = Field(default_factory=list)
    side_effecting: bool = True
    sandbox: _SandboxModel = Field(default_factory=_SandboxModel)
    limits: _LimitsModel = Field(default_factory=_LimitsModel)


def _location(loc: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in loc) or "<root>"


def parse_manifest(data: object, *, source: str = "<manifest>") -> ScriptToolManifest:
    """Validate a decoded manifest. Raises ManifestError naming the key; nothing else escapes."""
    if not isinstance(data, Mapping):
        raise ManifestError("a script tool manifest must be a table/object", source=source, hint="see docs: script tools")
    if "schema" in data and "input_schema" not in data:  # accept the short spelling too
        data = {**data, "input_schema": data["schema"]}
    try:
        model = _ManifestModel.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ManifestError(
            str(first.get("msg", "invalid value")),
            source=source,
            key=_location(first.get("loc", ())),
            hint=f"{exc.error_count()} problem(s); fix this one first",
        ) from None
    if not _NAME.match(model.name):
        raise ManifestError(
            f"invalid tool name {model.name!r}",
            source=source,
            key="name",
            hint="start with a letter; letters, digits, '_', '.', '-'; at most 64 characters",
        )
    command = tuple(model.command)
    names = _check_command(command, source)
    schema = _check_schema(model.input_schema, names, source)
    sandbox = _check_sandbox(model.sandbox, source)
    try:
        effects = parse_effects(model.effects, source=f"{source}: effects")
    except UsageError as exc:
        raise ManifestError(exc.message, source=source, key="effects", hint=exc.hint) from None
    if sandbox.network is not NetworkMode.NONE:
        effects |= {EffectKind.NETWORK}
    if any(m.writable for m in sandbox.mounts):
        effects |= {EffectKind.WRITE_FILESYSTEM}
    lim = model.limits
    limits = Limits(
        timeout_s=lim.timeout_s,
        cpu_s=lim.cpu_s,
        memory_bytes=lim.memory_mb * MIB,
        pids=lim.pids,
        file_size_bytes=lim.file_size_mb * MIB,
        tmp_size_bytes=lim.tmp_size_mb * MIB,
        output_bytes=lim.output_bytes,
    )
    return ScriptToolManifest(
        name=model.name,
        description=model.description,
        command=command,
        input_schema=schema,
        effects=frozenset(effects),
        sandbox=sandbox,
        limits=limits,
        side_effecting=model.side_effecting,
        source=source,
    )


def placeholders(element: str, *, source: str = "<manifest>", key: str = "command") -> list[str]:
    """Names used in one template element; stray braces are an error."""
    names = []
    for match in _PLACEHOLDER.finditer(element):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise ManifestError(
                f"stray {token!r} in {element!r}", source=source, key=key, hint="write {{ or }} for a literal brace"
            )
        names.append(match.group(1))
    return names


def _check_command(command: tuple[str, ...], source: str) -> set[str]:
    names: set[str] = set()
    for index, element in enumerate(command):
        if "\0" in element:
            raise ManifestError("NUL byte in the command", source=source, key=f"command.{index}")
        used = placeholders(element, source=source, key=f"command.{index}")
        if index == 0 and used:
            raise ManifestError(
                "the program (first element) cannot be a placeholder",
                source=source,
                key="command.0",
                hint="arguments must never choose what runs; fix the program and pass arguments after it",
            )
        names.update(used)
    if not command[0].strip():
        raise ManifestError("the program is empty", source=source, key="command.0")
    return names


def _check_schema(schema: dict[str, Any], names: set[str], source: str) -> dict[str, Any]:
    problem = schema_problem(schema)
    if problem:
        raise ManifestError(f"not a valid JSON Schema: {problem}", source=source, key="input_schema")
    if schema.get("type") != "object":
        raise ManifestError('input_schema must have "type": "object"', source=source, key="input_schema.type")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ManifestError("properties must be an object", source=source, key="input_schema.properties")
    unknown = sorted(names - set(properties))
    if unknown:
        raise ManifestError(
            f"the command uses {', '.join(unknown)}, which input_schema.properties does not declare",
            source=source,
            key="command",
            hint="declare every placeholder as a property",
        )
    return schema


def _check_sandbox(model: _SandboxModel, source: str) -> SandboxSpec:
    for index, host in enumerate(model.allow_hosts):
        try:
            HostPattern.parse(host)
        except UsageError as exc:
            raise ManifestError(
                f"invalid host pattern {host!r}: {exc.message}",
                source=source,
                key=f"sandbox.allow_hosts.{index}",
                hint='write "api.example.com", "*.example.com" or "api.example.com:8443"',
            ) from None
    if model.network is NetworkMode.ALLOWLIST and not model.allow_hosts:
        raise ManifestError(
            'network "allowlist" needs at least one host', source=source, key="sandbox.allow_hosts", hint='or use "none"'
        )
    if model.network is not NetworkMode.ALLOWLIST and model.allow_hosts:
        raise ManifestError(
            'allow_hosts only applies with network = "allowlist"', source=source, key="sandbox.network"
        )
    mounts = []
    for index, mount in enumerate(model.mounts):
        target = str(PurePosixPath(mount.target))
        if any(target == r or (r != "/" and target.startswith(r + "/") and r in ("/proc", "/dev", "/usr", "/run/pincer")) for r in _RESERVED_TARGETS):
            raise ManifestError(
                f"mount target {target} is reserved by the sandbox",
                source=source,
                key=f"sandbox.mounts.{index}.target",
                hint="mount somewhere else, e.g. /data or /work/input",
            )
        mounts.append(Mount(source=Path(mount.source), target=target, writable=mount.mode == "rw"))
    for name, value in model.env.items():
        if not _ENV_NAME.match(name) or name in _RESERVED_ENV or "\0" in value:
            raise ManifestError(
                f"environment variable {name!r} cannot be declared",
                source=source,
                key=f"sandbox.env.{name}",
                hint="names are letters, digits and _; PATH, HOME and the proxy variables are set by the sandbox",
            )
    return SandboxSpec(network=model.network, allow_hosts=tuple(model.allow_hosts), mounts=tuple(mounts), env=dict(model.env))


def load_manifest(path: str | Path) -> ScriptToolManifest:
    """Read a ``.json`` or ``.toml`` manifest file."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read the manifest: {exc}", source=source) from None
    try:
        if path.suffix == ".toml":
            data: object = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ManifestError(f"not valid {kind}: {exc}", source=source) from None
    return parse_manifest(data, source=source)


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def render_command(template: Sequence[str], args: Mapping[str, Any]) -> list[str]:
    """Fill the argv template. Values go into argv as they are: no shell ever sees them."""
    argv: list[str] = []
    for element in template:
        whole = _PLACEHOLDER.fullmatch(element)
        if whole and whole.group(1):
            name = whole.group(1)
            if name not in args or args[name] is None:
                continue
            value = args[name]
            items = value if isinstance(value, list) else [value]
            for item in items:
                text = _stringify(item)
                if "\0" in text:
                    raise ArgumentsInvalid(f"argument {name!r} contains a NUL byte", hint="remove it")
                argv.append(text)
            continue
        missing = False

        def substitute(match: re.Match[str]) -> str:
            nonlocal missing
            token = match.group(0)
            if token == "{{":
                return "{"
            if token == "}}":
                return "}"
            name = match.group(1)
            if name is None:
                return token
            if name not in args or args[name] is None:
                missing = True
                return ""
            text = _stringify(args[name])
            if "\0" in text:
                raise ArgumentsInvalid(f"argument {name!r} contains a NUL byte", hint="remove it")
            return text

        rendered = _PLACEHOLDER.sub(substitute, element)
        if not missing:
            argv.append(rendered)
    return argv
