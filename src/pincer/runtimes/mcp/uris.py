"""Upstream resource URIs as the gateway serves them: namespaced like tools.

An upstream URI ``scheme://rest`` is served as ``scheme://SERVER/rest``: the server's name goes in
front as the authority, the scheme stays (an MCP App's page stays a ``ui://`` URI, which hosts
require of it), the rest is kept character for character; taking the first path segment off gives
the upstream URI back. It is the rule FastMCP's ``mount`` uses for resource prefixes (its "path"
format), so clients that met one meet the other. Server names (``[A-Za-z0-9][A-Za-z0-9_.-]*``)
are valid URI authorities as they are. A template (``demo://x/{id}``) is namespaced the same way,
so a URI a client expands from it reverses like any other. A URI with no ``//`` after its scheme
(``urn:isbn:...``) has no place for the name: it is not served.

The same rewriting applies wherever an upstream URI reaches a client: the tool's MCP App
(``_meta.ui.resourceUri``), the ``uri`` of each content of a ``resources/read``, and the resource
links and embedded resources of tool results and prompts, so a client can read what it was handed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "PINCER_META_PREFIX",
    "namespaced_uri",
    "split_uri",
    "namespaced_tool_meta",
    "namespaced_block",
    "namespaced_blocks",
]

# pincer's own keys in ``_meta``: an upstream server's keys under this prefix are dropped, so a
# server cannot pass its own "pincer/effects" off as pincer's decision.
PINCER_META_PREFIX = "pincer/"
_HIERARCHICAL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_NAMESPACED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([A-Za-z0-9][A-Za-z0-9_.-]*)/(.*)$", re.DOTALL)


def namespaced_uri(server: str, uri: str) -> str | None:
    """``demo://resource/1`` of server ``everything`` -> ``demo://everything/resource/1``; None
    for a URI that cannot carry the name."""
    match = _HIERARCHICAL.match(uri)
    if match is None:
        return None
    return f"{match[1]}://{server}/{match[2]}"


def split_uri(uri: str) -> tuple[str, str] | None:
    """``(server, upstream URI)`` of a namespaced URI (the server is not checked to exist)."""
    match = _NAMESPACED.match(uri)
    if match is None:
        return None
    return match[2], f"{match[1]}://{match[3]}"


def namespaced_tool_meta(server: str, meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """An upstream tool's ``_meta`` as a client sees it: every key but pincer's own, an MCP App's
    ``ui.resourceUri`` (and the older flat ``ui/resourceUri``) pointing at the served URI. An App
    whose page URI cannot be served loses its ``ui`` keys (a host would fail to read it)."""
    if not meta:
        return {}
    shown = {key: value for key, value in meta.items() if not str(key).startswith(PINCER_META_PREFIX)}
    ui = shown.get("ui")
    page = ui.get("resourceUri") if isinstance(ui, Mapping) else shown.get("ui/resourceUri")
    if isinstance(page, str):
        served = namespaced_uri(server, page)
        if served is None:
            shown.pop("ui", None)
            shown.pop("ui/resourceUri", None)
            return shown
        if isinstance(ui, Mapping):
            shown["ui"] = {**ui, "resourceUri": served}
        if "ui/resourceUri" in shown:
            shown["ui/resourceUri"] = served
    return shown


def namespaced_block(server: str, block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A content block with the upstream URI of a resource link or embedded resource served."""
    kind = block.get("type")
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        served = namespaced_uri(server, block["uri"])
        return {**block, "uri": served} if served is not None else block
    if kind == "resource" and isinstance(block.get("resource"), Mapping):
        resource = block["resource"]
        if isinstance(resource.get("uri"), str):
            served = namespaced_uri(server, resource["uri"])
            if served is not None:
                return {**block, "resource": {**resource, "uri": served}}
    return block


def namespaced_blocks(server: str, blocks: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [namespaced_block(server, block) for block in blocks]
