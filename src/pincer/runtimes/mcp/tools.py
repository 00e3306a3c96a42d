"""An upstream tool as a pincer ToolSpec: name, effects, and the block of a changed definition.

Effects, decided in this order (docs/mcp-servers.md shows the same tables):

1. What the server entry says of the tool is its effect set, exactly; annotations and names do
   not change it (the user has said what the tool does). The entry's ``tools`` map is keyed by
   the server's own tool name (``"tools": {"TOOL": {"effects": [...]}}`` in ``servers.json``,
   ``--tool-effects TOOL=a,b`` on ``pincer mcp add``) or by a pattern in which ``*`` stands for
   any run of characters (``"get_*"``, ``"*"``). The exact name wins; among patterns, the one
   with the most characters besides ``*``, then the one written first.
2. Otherwise the base set is the server's ``effects`` (``--effects a,b``), else the default:

   =====================  ====================================================================
   server                 default effects
   =====================  ====================================================================
   remote (http, sse)     ``network`` + ``external_write`` (network is inherent: every call
                          crosses it)
   stdio                  ``external_write`` (a local process gets ``network`` only when its
                          entry declares it, in ``effects``, or a tool says ``openWorldHint``)
   =====================  ====================================================================

3. Then the tool's annotations, the entry's read-only marks and the tool's name change the base
   set:

   ===========================================  ==============================================
   evidence                                     change to the base set
   ===========================================  ==============================================
   ``readOnlyHint: true`` (without              the write effects (``external_write``,
   ``destructiveHint: true``); ``read_only``     ``write_filesystem``, ``delete_filesystem``,
   or ``read_only_tools`` in the entry          ``financial``) are removed
   ``destructiveHint: true`` (without           the write effects stay; with none in the base
   ``readOnlyHint: true``; not read-only in     set, ``external_write`` is added
   the entry)
   neither hint a boolean, and the name reads   the write effects are removed
   (:data:`READ_VERBS`, below)
   the name runs code (:data:`CODE_WORDS`)      ``execute_code`` is added (whatever the hints)
   ``openWorldHint: true``                      ``network`` is added
   ``openWorldHint: false``                     ``network`` is removed (stdio only: a remote
                                                server is reached over the network anyway)
   absent or not a boolean                      no change
   ===========================================  ==============================================

A name is read as words: split at ``_``, ``-``, ``.``, ``/``, spaces and where a lower-case
letter meets an upper-case one (``getTime`` is ``get time``), compared in lower case.

========================================================  ===================================
name                                                      evidence
========================================================  ===================================
first word in :data:`READ_VERBS` (``get_*``, ``list_*``,  reads: writes removed when no hint
``read_*``, ``search_*``, ``find_*``, ``describe_*``,      says ``readOnlyHint`` or
``show_*``, ``view_*``)                                   ``destructiveHint``
a word in :data:`CODE_WORDS` (``eval``, ``evaluate``,      runs code: ``execute_code``
``exec``, ``execute``), or ``run`` followed by a word in
:data:`RUN_OBJECTS` (``run_code*``, ``run_script``,
``run_python``, ``run_shell_command``)
========================================================  ===================================

**Trust.** Annotations and names are the server's own claims, from a server that is not trusted
to describe itself truthfully. They never reach policy but through these tables: the session
lists, grants and approvals decide on the effects computed here, never on the hints a client is
shown. Claims only choose within what the entry allows: they narrow the base set (the transport's
default or the entry's ``effects``, which is the user's bound for the whole server), never a
per-tool or pattern entry; every claim that widens (``destructiveHint``, ``openWorldHint``, a
name that runs code) makes calls stricter. Both the names and the hints that decide are part of
the pin (:mod:`.pins`), so a server cannot start calling a tool read-only, or rename a writer to
``get_*``, without ``pincer mcp trust``. The hints are passed on to clients exactly as the server
sent them; pincer's own decision travels beside them as ``_meta["pincer/effects"]`` and is the
only one that counts here. Under the default policy a tool with no effect left, or only
``read_filesystem``, runs without asking (a read-only tool of a local server, like
``mcp-server-time``'s or an unannotated ``get-time``); any other effect asks until a grant says
otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.values import ToolSpec
from pincer.runtimes.mcp.config import ServerConfig
from pincer.runtimes.mcp.pins import ToolDefinition
from pincer.runtimes.mcp.uris import namespaced_tool_meta

__all__ = [
    "CODE_WORDS",
    "DEFAULT_EFFECTS",
    "READ_VERBS",
    "RUN_OBJECTS",
    "STDIO_DEFAULT_EFFECTS",
    "WRITE_EFFECTS",
    "build_spec",
    "configured_effects",
    "default_effects",
    "effects_for",
    "name_words",
    "reads_by_name",
    "runs_code_by_name",
]

DEFAULT_EFFECTS = frozenset({EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE})  # remote servers
STDIO_DEFAULT_EFFECTS = frozenset({EffectKind.EXTERNAL_WRITE})
WRITE_EFFECTS = frozenset(
    {EffectKind.EXTERNAL_WRITE, EffectKind.WRITE_FILESYSTEM, EffectKind.DELETE_FILESYSTEM, EffectKind.FINANCIAL}
)
READ_VERBS = frozenset({"get", "list", "read", "search", "find", "describe", "show", "view"})
CODE_WORDS = frozenset({"eval", "evaluate", "exec", "execute"})
RUN_OBJECTS = frozenset({"code", "script", "python", "javascript", "js", "shell", "bash", "command", "cmd"})

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> tuple[str, ...]:
    """``browser_runCode-unsafe`` -> ``("browser", "run", "code", "unsafe")``."""
    return tuple(word.lower() for word in _WORD.findall(name))


def reads_by_name(name: str) -> bool:
    words = name_words(name)
    return bool(words) and words[0] in READ_VERBS


def runs_code_by_name(name: str) -> bool:
    words = name_words(name)
    if any(word in CODE_WORDS for word in words):
        return True
    return any(first == "run" and second in RUN_OBJECTS for first, second in pairwise(words))


def default_effects(server: ServerConfig) -> frozenset[EffectKind]:
    """The base set before the evidence: the entry's ``effects``, else the transport's default."""
    if server.effects is not None:
        return server.effects
    return STDIO_DEFAULT_EFFECTS if server.transport == "stdio" else DEFAULT_EFFECTS


def _pattern_matches(pattern: str, name: str) -> bool:
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), name, re.DOTALL) is not None


def configured_effects(server: ServerConfig, tool: str) -> frozenset[EffectKind] | None:
    """The entry's own word on ``tool`` (rule 1): its exact name, else the most specific
    pattern; None when the entry says nothing of it."""
    exact = server.tool_effects.get(tool)
    if exact is not None:
        return exact
    best: tuple[int, frozenset[EffectKind]] | None = None
    for pattern, effects in server.tool_effects.items():
        if "*" in pattern and _pattern_matches(pattern, tool):
            weight = len(pattern) - pattern.count("*")
            if best is None or weight > best[0]:
                best = (weight, effects)
    return best[1] if best is not None else None


def _is_destructive(hints: Mapping[str, Any]) -> bool:
    return hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True


def effects_for(server: ServerConfig, tool: ToolDefinition) -> frozenset[EffectKind]:
    configured = configured_effects(server, tool.name)
    if configured is not None:
        return configured
    effects = set(default_effects(server))
    hints = tool.annotations
    configured_read_only = server.read_only or tool.name in server.read_only_tools
    unannotated = not isinstance(hints.get("readOnlyHint"), bool) and not isinstance(hints.get("destructiveHint"), bool)
    if configured_read_only or (hints.get("readOnlyHint") is True and not _is_destructive(hints)):
        effects -= WRITE_EFFECTS
    elif _is_destructive(hints) and not effects & WRITE_EFFECTS:
        effects.add(EffectKind.EXTERNAL_WRITE)
    elif unannotated and reads_by_name(tool.name):
        effects -= WRITE_EFFECTS
    if runs_code_by_name(tool.name):
        effects.add(EffectKind.EXECUTE_CODE)
    open_world = hints.get("openWorldHint")
    if open_world is True:
        effects.add(EffectKind.NETWORK)
    elif open_world is False and server.transport == "stdio":
        effects.discard(EffectKind.NETWORK)
    return frozenset(effects)


def build_spec(
    server: ServerConfig,
    tool: ToolDefinition,
    *,
    registry_name: str,
    blocked: str | None = None,
) -> ToolSpec:
    """The registry entry for ``tool`` under ``registry_name``. ``blocked``: why calls are
    refused (the definition shown is then the pinned one the caller passes in).

    ``annotations["mcp"]`` holds the upstream's annotations and ``annotations["mcp_meta"]`` its
    ``_meta`` (an MCP App's ``ui.resourceUri`` namespaced like the server's resources), both
    passed on to MCP clients as they are (``gateway/wire.py``)."""
    effects = effects_for(server, tool)
    annotations: dict[str, Any] = {"server": server.name, "upstream_name": tool.name, "mcp": dict(tool.annotations)}
    meta = namespaced_tool_meta(server.name, tool.meta)
    if meta:
        annotations["mcp_meta"] = meta
    if _is_destructive(tool.annotations):
        annotations["destructive"] = True
    if tool.title:
        annotations["title"] = tool.title
    if server.capabilities:
        annotations["capabilities"] = list(server.capabilities)
    if blocked is not None:
        annotations["blocked"] = blocked
    schema: Mapping[str, Any] = tool.input_schema if isinstance(tool.input_schema, Mapping) else {"type": "object"}
    return ToolSpec(
        name=registry_name,
        description=tool.description,
        input_schema=schema,
        effects=effects,
        runtime=RuntimeKind.MCP,
        side_effecting=bool(effects & WRITE_EFFECTS),
        source=f"mcp:{server.name}",
        output_schema=tool.output_schema,
        annotations=annotations,
    )
