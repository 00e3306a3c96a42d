"""The pure SKILL.md parser: bytes in, a :class:`Skill` or a :class:`SkillError` out.

Every dialect is read as it is and unknown keys are ignored. A value of the wrong shape is
dropped with a warning naming its key; spec violations (name rules, lengths, a name that differs
from its folder) are warnings too. Only a file that cannot be read at all (not UTF-8, binary,
too large, YAML that cannot be decoded even leniently) raises, with the file and the line.

No filesystem access happens here: the walk in ``roots.py`` reads the bytes and passes them in
(with a ``capabilities.json`` beside the SKILL.md, if any), so property tests drive this directly.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pincer.config import SkillsSettings
from pincer.core.errors import SkillError
from pincer.skills.agentskills import (
    MAX_COMPATIBILITY_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    SPEC_FIELDS,
    name_problems,
    normalize_name,
)
from pincer.skills.declared import read_capabilities
from pincer.skills.frontmatter import parse_yaml, split_frontmatter
from pincer.skills.model import (
    DEFAULT_MAX_CONTEXT_TOKENS,
    Activation,
    Dialect,
    Parameter,
    ParamType,
    Requires,
    Skill,
    Trigger,
    Trust,
)
from pincer.skills.reader import MAX_LIST_ITEMS, FieldReader, kind_of, param_type
from pincer.skills.sections import capability_sections, first_paragraph

__all__ = [
    "parse_skill",
    "MAX_SKILL_FILE_BYTES",
    "MAX_NAME_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_COMPATIBILITY_CHARS",
    "MAX_KEYWORDS",
    "MAX_PATTERNS",
    "MAX_TAGS",
]

MAX_SKILL_FILE_BYTES = SkillsSettings().max_file_bytes  # [skills] max_file_bytes's default
MAX_KEYWORDS = 20
MAX_PATTERNS = 5
MAX_TAGS = 10
MAX_PATTERN_CHARS = 256
# A name pincer can use at all (in file names, URIs, the CLI): Unicode letters and digits too, as
# the Agent Skills spec allows them; others fall back to the folder's.
_USABLE_NAME = re.compile(r"\w[\w.:@+-]{0,127}")
_USABLE_RULE = "letters, digits, '_', '.', ':', '@', '+' and '-', at most 128, not starting with a sign"
_CAPABILITY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A quantified group that itself holds a quantifier: the shape of catastrophic backtracking.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*[+*{]")
_TRIGGER_KINDS = ("webhook", "command", "schedule", "manual")
_TRIGGER_VALUE_KEYS = ("value", "event", "name", "command", "cron", "schedule", "expression")
_PINCER_KEYS = frozenset({"parameters", "triggers", "tools", "capabilities"})
_IRONCLAW_KEYS = frozenset({"activation", "requires", "credentials"})
_OPENCLAW_KEYS = frozenset({"command-dispatch", "command-tool", "command-arg-mode", "homepage"})
_CLAUDE_KEYS = frozenset({"when_to_use", "argument-hint", "arguments", "model", "context", "agent", "hooks"})
_SHARED_KEYS = frozenset({"user-invocable", "disable-model-invocation"})
_AGENT_SKILLS_KEYS = frozenset({"license", "compatibility", "allowed-tools", "metadata"})
_CLAUDE_BODY = re.compile(r"\$ARGUMENTS|\$\{CLAUDE_SKILL_DIR\}")
_OPENCLAW_OS = {"darwin", "linux", "win32", "windows", "macos", "freebsd"}


# --------------------------------------------------------------------------------------------


def parse_skill(
    data: bytes,
    *,
    path: Path,
    root: str = "",
    trust: Trust = Trust.TRUSTED,
    max_bytes: int = MAX_SKILL_FILE_BYTES,
    capabilities_json: bytes | None = None,
    claude_root: bool = False,
) -> Skill:
    """Read one SKILL.md. ``path`` is where it sits (its folder names the skill when the file
    does not); nothing is read from the filesystem."""
    source = str(path)
    if len(data) > max_bytes:
        raise SkillError(
            f"the file is {len(data):,} bytes, larger than the {max_bytes:,} byte limit for a SKILL.md",
            source=source,
            hint="move long reference material into files beside it, or raise [skills] max_file_bytes",
        )
    if b"\0" in data:
        raise SkillError(
            "the file is binary (it holds NUL bytes), not Markdown text",
            source=source,
            line=data[: data.index(b"\0")].count(b"\n") + 1,
            hint="a SKILL.md must be UTF-8 text",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(
            f"the file is not UTF-8 text (byte {exc.start})",
            source=source,
            line=data[: exc.start].count(b"\n") + 1,
            hint="save it as UTF-8",
        ) from None
    folder = path.parent.name or path.stem
    front = split_frontmatter(text.replace("\r\n", "\n"), source=source)
    reader = FieldReader()
    if front.lenient:
        reader.warn(
            "", "the frontmatter is not strict YAML (an unquoted ': ' in a value?); it was read with those values quoted", 2
        )
    written = front.data
    fm = _with_pincer_block(reader, written, source=source)
    body = front.body
    sections = capability_sections(body)
    dialects = _dialects(fm, body, sections=bool(sections), claude_root=claude_root)
    fm = fm or {}

    name = _name(reader, fm, folder, has_frontmatter=front.data is not None)
    description = _description(reader, fm, body, has_frontmatter=front.data is not None)
    metadata = reader.mapping(fm, "metadata")
    openclaw = _openclaw_block(reader, metadata)

    compatibility = reader.text(fm, "compatibility")
    if compatibility is not None and not 1 <= len(compatibility) <= MAX_COMPATIBILITY_CHARS:
        reader.warn("compatibility", f"is {len(compatibility)} characters; the Agent Skills spec allows 1-{MAX_COMPATIBILITY_CHARS}")

    tools = reader.strings(fm, "tools") + reader.strings(fm, "allowed-tools")
    requires = _requires(reader, fm, openclaw)
    capabilities = read_capabilities(reader, fm, sections, capabilities_json)
    parameters = _parameters(reader, fm)
    homepage = reader.text(fm, "homepage") or (reader.text(openclaw, "homepage", where="metadata.openclaw.") if openclaw else None)
    user_invocable = reader.flag(fm, "user-invocable", True)
    model_invocable = not reader.flag(fm, "disable-model-invocation", False)
    if "user_invocable" in fm:
        user_invocable = reader.flag(fm, "user_invocable", user_invocable)
    return Skill(
        name=name,
        description=description,
        path=path,
        base_dir=path.parent,
        dialect=dialects[0],
        dialects=dialects,
        body=body,
        body_line=front.body_line,
        content_hash=hashlib.sha256(data).hexdigest(),
        version=reader.text(fm, "version") or _metadata_version(fm),
        trust=trust,
        root=root,
        tags=_bounded(reader, "tags", reader.strings(fm, "tags"), MAX_TAGS * 5),
        tools=tuple(dict.fromkeys(tools)),
        parameters=parameters,
        triggers=_triggers(reader, fm),
        activation=_activation(reader, fm),
        requires=requires,
        credentials=_records(reader, fm, "credentials"),
        install=_records(reader, openclaw, "install", where="metadata.openclaw.") if openclaw else (),
        capabilities=capabilities,
        license=reader.text(fm, "license"),
        compatibility=compatibility,
        homepage=homepage,
        when_to_use=reader.text(fm, "when_to_use"),
        argument_hint=reader.text(fm, "argument-hint"),
        user_invocable=user_invocable,
        model_invocable=model_invocable,
        always=reader.flag(openclaw, "always", False, where="metadata.openclaw.") if openclaw else False,
        skill_key=reader.text(openclaw, "skillKey", where="metadata.openclaw.") if openclaw else None,
        primary_env=reader.text(openclaw, "primaryEnv", where="metadata.openclaw.") if openclaw else None,
        emoji=reader.text(openclaw, "emoji", where="metadata.openclaw.") if openclaw else None,
        command_dispatch=reader.text(fm, "command-dispatch"),
        command_tool=reader.text(fm, "command-tool"),
        command_arg_mode=reader.text(fm, "command-arg-mode"),
        metadata=metadata,
        frontmatter=written or {},
        warnings=tuple(reader.warnings),
    )


def _with_pincer_block(reader: FieldReader, fm: dict[str, Any] | None, *, source: str) -> dict[str, Any] | None:
    """The frontmatter with ``metadata.pincer``'s keys beside its own (its own win). The Agent
    Skills spec puts a client's fields under ``metadata`` as text, so the block may be a YAML
    document in a string (``pincer: |``) as well as a mapping; a skill written so passes the
    spec's reference validator and keeps pincer's parameters, triggers and activation."""
    metadata = fm.get("metadata") if fm else None
    if not isinstance(metadata, dict) or "pincer" not in metadata:
        return fm
    block = metadata["pincer"]
    if isinstance(block, str):
        try:
            block, _ = parse_yaml(block, source=source)
        except SkillError as exc:
            reader.warn("metadata.pincer", f"is not a YAML mapping ({exc.detail}); ignored")
            return fm
    if not isinstance(block, dict):
        reader.warn("metadata.pincer", f"expected a mapping (or YAML text holding one), got {kind_of(block)}; ignored")
        return fm
    extension = {key: value for key, value in block.items() if key not in SPEC_FIELDS}
    return {**extension, **(fm or {})}


def _metadata_version(fm: Mapping[str, Any]) -> str | None:
    """``metadata.version``, where the Agent Skills spec's example keeps a version."""
    metadata = fm.get("metadata")
    version = metadata.get("version") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) and version.strip() else None


def _dialects(fm: dict[str, Any] | None, body: str, *, sections: bool, claude_root: bool) -> tuple[Dialect, ...]:
    if fm is None:
        return (Dialect.CLAUDE, Dialect.PLAIN) if claude_root and _CLAUDE_BODY.search(body) else (Dialect.PLAIN,)
    keys = set(fm)
    found: list[Dialect] = []
    if keys & _PINCER_KEYS or sections:
        found.append(Dialect.PINCER)
    if keys & _IRONCLAW_KEYS:
        found.append(Dialect.IRONCLAW)
    metadata = fm.get("metadata")
    has_openclaw = isinstance(metadata, dict) and ("openclaw" in metadata or "clawdbot" in metadata)
    if isinstance(metadata, str) and ("openclaw" in metadata or "clawdbot" in metadata):
        has_openclaw = True
    is_claude = bool(keys & _CLAUDE_KEYS) or claude_root or bool(_CLAUDE_BODY.search(body))
    if has_openclaw or keys & _OPENCLAW_KEYS or (keys & _SHARED_KEYS and not is_claude):
        found.append(Dialect.OPENCLAW)
    if is_claude:
        found.append(Dialect.CLAUDE)
    if keys & _AGENT_SKILLS_KEYS or not found:
        found.append(Dialect.AGENT_SKILLS)
    return tuple(found)


def _name(reader: FieldReader, fm: Mapping[str, Any], folder: str, *, has_frontmatter: bool) -> str:
    """The declared name, NFKC-normalized as the Agent Skills spec compares names; the folder's
    when there is none or it cannot be used. A skill neither can name is not loaded."""
    raw = fm.get("name")
    fallback = normalize_name(folder)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if not _USABLE_NAME.fullmatch(fallback):
            raise _unnamed(None, folder)
        if has_frontmatter:
            reader.warn("name", f"missing; the folder name {fallback!r} is used")
        return fallback
    name = normalize_name(str(raw)) if isinstance(raw, (str, int, float)) and not isinstance(raw, bool) else None
    if name is None or not _USABLE_NAME.fullmatch(name):
        if not _USABLE_NAME.fullmatch(fallback):
            raise _unnamed(raw, folder)
        shown = repr(str(raw)[:80]) if name is not None else kind_of(raw)
        reader.warn("name", f"{shown} cannot name a skill ({_USABLE_RULE}); the folder name {fallback!r} is used")
        return fallback
    problems = name_problems(name)
    if problems:
        reader.warn("name", f"{name!r} breaks the Agent Skills rules: " + "; ".join(problems))
    if name != fallback:
        reader.warn("name", f"{name!r} differs from its folder name {folder!r} (the Agent Skills spec wants them equal)")
    return name


def _unnamed(raw: Any, folder: str) -> SkillError:
    given = f"the name {str(raw)[:80]!r} nor " if raw is not None else ""
    return SkillError(
        f"neither {given}the folder name {folder[:80]!r} can name a skill ({_USABLE_RULE})",
        hint="set name: to lowercase letters, digits and '-' (the Agent Skills rule) and give the folder that name",
    )


def _description(reader: FieldReader, fm: Mapping[str, Any], body: str, *, has_frontmatter: bool) -> str:
    description = reader.text(fm, "description")
    if description is None or not description.strip():
        derived = first_paragraph(body)
        if has_frontmatter:
            reader.warn("description", "missing; the first paragraph of the body is used")
        return derived[:MAX_DESCRIPTION_CHARS]
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        reader.warn(
            "description", f"is {len(description)} characters; the Agent Skills spec allows at most {MAX_DESCRIPTION_CHARS}"
        )
    return description


def _openclaw_block(reader: FieldReader, metadata: dict[str, Any]) -> dict[str, Any]:
    for key in ("openclaw", "clawdbot", "clawdis"):
        if key in metadata:
            block = reader.mapping(metadata, key, where="metadata.")
            if block:
                return block
    return {}


def _bounded(reader: FieldReader, key: str, items: tuple[str, ...], limit: int) -> tuple[str, ...]:
    if len(items) > limit:
        reader.warn(key, f"has {len(items)} entries; only the first {limit} are used")
        return items[:limit]
    return items


def _requires(reader: FieldReader, fm: Mapping[str, Any], openclaw: Mapping[str, Any]) -> Requires:
    top = reader.mapping(fm, "requires")
    claw = reader.mapping(openclaw, "requires", where="metadata.openclaw.") if openclaw else {}

    def both(*keys: str) -> tuple[str, ...]:
        out: list[str] = []
        for source, where in ((top, "requires."), (claw, "metadata.openclaw.requires.")):
            for key in keys:
                out.extend(reader.strings(source, key, where=where))
        return tuple(dict.fromkeys(out))

    os_names = both("os") + (reader.strings(openclaw, "os", where="metadata.openclaw.") if openclaw else ())
    for value in os_names:
        if value.lower() not in _OPENCLAW_OS:
            reader.warn("metadata.openclaw.os", f"unknown platform {value!r} (known: darwin, linux, win32)")
    return Requires(
        bins=both("bins"),
        any_bins=both("anyBins", "any_bins"),
        env=both("env"),
        config=both("config"),
        skills=both("skills"),
        os=tuple(dict.fromkeys(os_names)),
    )


def _records(reader: FieldReader, data: Mapping[str, Any], key: str, *, where: str = "") -> tuple[Mapping[str, Any], ...]:
    value = data.get(key)
    if value is None:
        return ()
    if isinstance(value, dict):
        value = [{"name": k, **v} if isinstance(v, dict) else {"name": k, "value": v} for k, v in value.items()]
    if not isinstance(value, list):
        reader.warn(where + key, f"expected a list, got {kind_of(value)}; ignored")
        return ()
    records = []
    for index, item in enumerate(value[:MAX_LIST_ITEMS]):
        if isinstance(item, dict):
            records.append(item)
        else:
            reader.warn(f"{where}{key}.{index}", f"expected a mapping, got {kind_of(item)}; ignored")
    return tuple(records)


def _parameters(reader: FieldReader, fm: Mapping[str, Any]) -> tuple[Parameter, ...]:
    raw = fm.get("parameters")
    items: list[tuple[str, Any]] = []
    if isinstance(raw, list):
        items = [(f"parameters.{i}", item) for i, item in enumerate(raw[:MAX_LIST_ITEMS])]
    elif isinstance(raw, dict):
        items = [(f"parameters.{k}", {"name": k, **v} if isinstance(v, dict) else {"name": k}) for k, v in raw.items()]
    elif raw is not None:
        reader.warn("parameters", f"expected a list of parameters, got {kind_of(raw)}; ignored")
    params: dict[str, Parameter] = {}
    for key, item in items:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            reader.warn(key, f"expected a mapping with name and type, got {kind_of(item)}; ignored")
            continue
        name = item.get("name")
        if not isinstance(name, str) or not _PARAM_NAME.match(name):
            reader.warn(key + ".name", f"{str(name)[:40]!r} is not a parameter name (letters, digits, _); ignored")
            continue
        if name in params:
            reader.warn(key + ".name", f"parameter {name!r} is declared twice; the first one is used")
            continue
        kind = param_type(reader, item.get("type"), key + ".type")
        enum = item.get("enum")
        if enum is not None and not isinstance(enum, list):
            reader.warn(key + ".enum", "expected a list of allowed values; ignored")
            enum = None
        default = item.get("default")
        if default is not None and not _fits(default, kind):
            reader.warn(key + ".default", f"{str(default)[:40]!r} is not a {kind.value}; no default is used")
            default = None
        description = item.get("description")
        params[name] = Parameter(
            name=name,
            type=kind,
            description=description if isinstance(description, str) else "",
            required=item.get("required") is True,
            default=default,
            enum=tuple(enum) if enum else None,
        )
    for index, name in enumerate(_claude_arguments(reader, fm)):
        if name not in params:
            params[name] = Parameter(name=name, description=f"argument {index + 1}")
    return tuple(params.values())


def _claude_arguments(reader: FieldReader, fm: Mapping[str, Any]) -> tuple[str, ...]:
    """Claude Code's named ``arguments`` (a list of names or a space-separated string)."""
    raw = fm.get("arguments")
    if raw is None:
        return ()
    names: list[str] = []
    if isinstance(raw, list):
        for index, item in enumerate(raw[:MAX_LIST_ITEMS]):
            name = item.get("name") if isinstance(item, dict) else item
            if isinstance(name, str) and _PARAM_NAME.match(name):
                names.append(name)
            else:
                reader.warn(f"arguments.{index}", f"{str(name)[:40]!r} is not an argument name; ignored")
    elif isinstance(raw, str):
        names = [n for n in re.split(r"[,\s]+", raw) if _PARAM_NAME.match(n)]
    else:
        reader.warn("arguments", f"expected a list of names, got {kind_of(raw)}; ignored")
    return tuple(dict.fromkeys(names))


def _fits(value: Any, kind: ParamType) -> bool:
    if kind is ParamType.STRING:
        return isinstance(value, str)
    if kind is ParamType.INTEGER:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is ParamType.NUMBER:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is ParamType.BOOLEAN:
        return isinstance(value, bool)
    if kind is ParamType.ARRAY:
        return isinstance(value, list)
    return isinstance(value, dict)


def _triggers(reader: FieldReader, fm: Mapping[str, Any]) -> tuple[Trigger, ...]:
    raw = fm.get("triggers")
    if raw is None:
        return ()
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list):
        reader.warn("triggers", f"expected a list of triggers, got {kind_of(raw)}; ignored")
        return ()
    triggers: list[Trigger] = []
    for index, item in enumerate(raw[:MAX_LIST_ITEMS]):
        trigger = _trigger(item)
        if trigger is None:
            reader.warn(
                f"triggers.{index}",
                f"{str(item)[:60]!r} is not a trigger (webhook: EVENT, command: /NAME, schedule: CRON or manual); ignored",
            )
            continue
        if trigger.kind == "command" and not trigger.value.startswith("/"):
            trigger = Trigger(kind="command", value="/" + trigger.value)
        if trigger.kind == "schedule" and len(trigger.value.split()) not in (5, 6) and not trigger.value.startswith("@"):
            reader.warn(f"triggers.{index}", f"schedule {trigger.value!r} is not a 5- or 6-field cron expression")
        triggers.append(trigger)
    return tuple(dict.fromkeys(triggers))


def _trigger(item: Any) -> Trigger | None:
    if isinstance(item, str):
        text = item.strip()
        if text == "manual":
            return Trigger(kind="manual")
        kind, sep, value = text.partition(":")
        if sep and kind.strip() in _TRIGGER_KINDS and value.strip():
            return Trigger(kind=kind.strip(), value=value.strip())
        if text.startswith("/") and len(text) > 1 and " " not in text:
            return Trigger(kind="command", value=text)
        return None
    if not isinstance(item, dict):
        return None
    tagged = item.get("type") or item.get("kind")
    if isinstance(tagged, str) and tagged in _TRIGGER_KINDS:
        if tagged == "manual":
            return Trigger(kind="manual")
        for field_name in (*_TRIGGER_VALUE_KEYS, tagged):
            found = item.get(field_name)
            if isinstance(found, (str, int)) and not isinstance(found, bool) and str(found).strip():
                return Trigger(kind=tagged, value=str(found).strip())
        return None
    if len(item) == 1:
        ((kind, value),) = item.items()
        if kind == "manual":
            return Trigger(kind="manual")
        if kind in _TRIGGER_KINDS and isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return Trigger(kind=kind, value=str(value).strip())
    return None


def _activation(reader: FieldReader, fm: Mapping[str, Any]) -> Activation:
    block = reader.mapping(fm, "activation")
    if not block:
        return Activation(tags=tuple(t.lower() for t in reader.strings(fm, "tags")[:MAX_TAGS]))
    where = "activation."
    keywords = _bounded(reader, where + "keywords", reader.strings(block, "keywords", where=where, split=False), MAX_KEYWORDS)
    excluded = reader.strings(block, "exclude_keywords", where=where, split=False)[:MAX_LIST_ITEMS]
    tags = _bounded(reader, where + "tags", reader.strings(block, "tags", where=where), MAX_TAGS)
    patterns: list[str] = []
    for index, pattern in enumerate(reader.strings(block, "patterns", where=where, split=False)):
        key = f"{where}patterns.{index}"
        if len(pattern) > MAX_PATTERN_CHARS:
            reader.warn(key, f"longer than {MAX_PATTERN_CHARS} characters; ignored")
            continue
        if _NESTED_QUANTIFIER.search(pattern):
            reader.warn(key, f"{pattern!r} nests quantifiers (catastrophic backtracking); ignored")
            continue
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            reader.warn(key, f"{pattern!r} is not a valid regular expression ({exc}); ignored")
            continue
        patterns.append(pattern)
    if len(patterns) > MAX_PATTERNS:
        reader.warn(where + "patterns", f"has {len(patterns)} patterns; only the first {MAX_PATTERNS} are used")
        patterns = patterns[:MAX_PATTERNS]
    tokens = block.get("max_context_tokens", DEFAULT_MAX_CONTEXT_TOKENS)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= 1_000_000:
        reader.warn(where + "max_context_tokens", f"{str(tokens)[:20]!r} is not a positive number of tokens; 2000 is used")
        tokens = DEFAULT_MAX_CONTEXT_TOKENS
    return Activation(
        keywords=tuple(k.lower() for k in keywords),
        exclude_keywords=tuple(k.lower() for k in excluded),
        patterns=tuple(patterns),
        tags=tuple(t.lower() for t in tags),
        max_context_tokens=tokens,
        setup_marker=reader.text(block, "setup_marker", where=where),
    )
