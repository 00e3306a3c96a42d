"""The effects table of MCP tools (runtimes/mcp/tools.py, docs/mcp-servers.md), row by row.

Issue 10 item 6: a local stdio server's read tools were labelled network + external_write, so
every call asked; now the effects follow the server entry, per-tool overrides and annotations.
"""

from __future__ import annotations

import pytest

from pincer.core.effects import EffectKind as E
from pincer.runtimes.mcp import ServerConfig, ToolDefinition
from pincer.runtimes.mcp.tools import build_spec, effects_for

NONE: frozenset[E] = frozenset()
FS = frozenset({E.READ_FILESYSTEM, E.WRITE_FILESYSTEM})


def stdio(**changes: object) -> ServerConfig:
    return ServerConfig(name="s", transport="stdio", command="x", **changes)  # type: ignore[arg-type]


def remote(**changes: object) -> ServerConfig:
    return ServerConfig(name="r", transport="http", url="https://r.example/mcp", **changes)  # type: ignore[arg-type]


def tool(name: str = "t", **annotations: object) -> ToolDefinition:
    return ToolDefinition(name=name, description="d", input_schema={"type": "object"}, annotations=annotations)


@pytest.mark.parametrize(
    ("server", "definition", "expected"),
    [
        # defaults by transport
        (remote(), tool(), {E.NETWORK, E.EXTERNAL_WRITE}),
        (stdio(), tool(), {E.EXTERNAL_WRITE}),
        # readOnlyHint drops the write effects
        (remote(), tool(readOnlyHint=True), {E.NETWORK}),
        (stdio(), tool(readOnlyHint=True), NONE),
        (stdio(effects=FS), tool(readOnlyHint=True), {E.READ_FILESYSTEM}),
        (stdio(effects=frozenset({E.FINANCIAL, E.NETWORK})), tool(readOnlyHint=True), {E.NETWORK}),
        # ... unless destructiveHint says otherwise, and readOnly + destructive reads as read-only
        (stdio(), tool(readOnlyHint=False, destructiveHint=True), {E.EXTERNAL_WRITE}),
        (stdio(), tool(readOnlyHint=True, destructiveHint=True), NONE),
        # destructiveHint keeps the write effects, and adds external_write when there are none
        (stdio(effects=FS), tool(destructiveHint=True), FS),
        (stdio(effects=frozenset({E.READ_FILESYSTEM})), tool(destructiveHint=True), {E.READ_FILESYSTEM, E.EXTERNAL_WRITE}),
        (remote(effects=NONE), tool(destructiveHint=True), {E.EXTERNAL_WRITE}),
        # config read-only wins over destructiveHint
        (stdio(read_only=True), tool(destructiveHint=True), NONE),
        (stdio(read_only_tools=("t",)), tool(), NONE),
        (stdio(read_only_tools=("other",)), tool(), {E.EXTERNAL_WRITE}),
        # openWorldHint: true adds network, false removes it for stdio only
        (stdio(), tool(openWorldHint=True), {E.NETWORK, E.EXTERNAL_WRITE}),
        (stdio(effects=frozenset({E.NETWORK})), tool(openWorldHint=False), NONE),
        (remote(), tool(openWorldHint=False), {E.NETWORK, E.EXTERNAL_WRITE}),
        (stdio(), tool(readOnlyHint=True, openWorldHint=False), NONE),  # mcp-server-time's tools
        # absent or non-boolean hints change nothing
        (stdio(), tool(readOnlyHint="yes", destructiveHint=1, openWorldHint=None), {E.EXTERNAL_WRITE}),
        # a per-tool override is exact: annotations do not touch it
        (stdio(tool_effects={"t": frozenset({E.SPAWN_PROCESS})}), tool(readOnlyHint=True, openWorldHint=True),
         {E.SPAWN_PROCESS}),
        (remote(tool_effects={"t": NONE}), tool(destructiveHint=True), NONE),
        (stdio(effects=FS, tool_effects={"other": NONE}), tool(readOnlyHint=True), {E.READ_FILESYSTEM}),
    ],
)
def test_the_effects_table(server: ServerConfig, definition: ToolDefinition, expected: set[E]) -> None:
    assert effects_for(server, definition) == expected


@pytest.mark.parametrize(
    ("server", "definition", "side_effecting"),
    [
        (stdio(), tool(), True),
        (stdio(), tool(readOnlyHint=True), False),
        (stdio(effects=FS), tool(), True),  # write_filesystem is a write
        (stdio(effects=frozenset({E.READ_FILESYSTEM})), tool(), False),
        (remote(effects=frozenset({E.FINANCIAL})), tool(), True),
    ],
)
def test_side_effecting_means_a_write_effect_is_left(server: ServerConfig, definition: ToolDefinition,
                                                     side_effecting: bool) -> None:
    spec = build_spec(server, definition, registry_name="x")
    assert spec.side_effecting is side_effecting


def test_capability_labels_and_the_upstream_name_reach_the_spec() -> None:
    spec = build_spec(stdio(capabilities=("discord", "telegram")), tool("a.b", destructiveHint=True),
                      registry_name="s_a_b", blocked="changed")
    assert spec.name == "s_a_b" and spec.annotations["upstream_name"] == "a.b"
    assert spec.annotations["capabilities"] == ["discord", "telegram"]
    assert spec.annotations["destructive"] is True and spec.annotations["blocked"] == "changed"
