"""The effects table of MCP tools (runtimes/mcp/tools.py, docs/mcp-servers.md), row by row.

Issue 10 item 6: a local stdio server's read tools were labelled network + external_write, so
every call asked; now the effects follow the server entry, per-tool overrides and annotations.
Issue 36: unannotated tools asked for external_write whatever their name said (an MCP Apps
server's ``get-time``), and ``browser_evaluate`` got no ``execute_code``; the names now count
(the rows marked issue 36 failed before), and the entry's ``tools`` map takes patterns.
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
        # issue 36: an unannotated tool whose name reads drops the write effects ...
        (stdio(), tool("get-time"), NONE),  # @modelcontextprotocol/server-basic-vanillajs
        (stdio(), tool("list_files"), NONE),
        (stdio(), tool("readNotes"), NONE),
        (stdio(effects=FS), tool("search_notes"), {E.READ_FILESYSTEM}),
        (remote(), tool("get_issue"), {E.NETWORK}),
        # ... a hint on either side decides instead, and a read verb elsewhere in the name is no evidence
        (stdio(), tool("get_or_create", readOnlyHint=False), {E.EXTERNAL_WRITE}),
        (stdio(), tool("get_and_delete", destructiveHint=True), {E.EXTERNAL_WRITE}),
        (stdio(), tool("forget_list"), {E.EXTERNAL_WRITE}),
        (stdio(), tool("convert_time"), {E.EXTERNAL_WRITE}),
        # a name that runs code adds execute_code, whatever the hints say (it only makes calls stricter)
        (stdio(), tool("browser_evaluate", readOnlyHint=False, destructiveHint=True, openWorldHint=True),
         {E.EXTERNAL_WRITE, E.NETWORK, E.EXECUTE_CODE}),  # @playwright/mcp
        (stdio(), tool("browser_run_code_unsafe", destructiveHint=True), {E.EXTERNAL_WRITE, E.EXECUTE_CODE}),
        (stdio(), tool("exec", readOnlyHint=True), {E.EXECUTE_CODE}),
        (stdio(), tool("runPython"), {E.EXTERNAL_WRITE, E.EXECUTE_CODE}),
        (stdio(), tool("get_eval_result"), {E.EXECUTE_CODE}),
        (stdio(), tool("evaluation_report"), {E.EXTERNAL_WRITE}),  # a word, not a prefix
        (stdio(), tool("run_tests"), {E.EXTERNAL_WRITE}),
        # a pattern in the entry's tools map is exact like a name; the exact name wins, then the longest pattern
        (stdio(tool_effects={"get_*": frozenset({E.NETWORK})}), tool("get_x", readOnlyHint=True), {E.NETWORK}),
        (stdio(tool_effects={"*": NONE}), tool("browser_evaluate", destructiveHint=True), NONE),
        (stdio(tool_effects={"*": NONE, "browser_*": frozenset({E.EXECUTE_CODE})}), tool("browser_click"),
         {E.EXECUTE_CODE}),
        (stdio(tool_effects={"browser_*": NONE, "browser_click": frozenset({E.EXTERNAL_WRITE})}), tool("browser_click"),
         {E.EXTERNAL_WRITE}),
        (stdio(tool_effects={"*_x": NONE}), tool("get_y"), NONE),
        (stdio(tool_effects={"*_x": frozenset({E.FINANCIAL})}), tool("get_y"), NONE),  # no match: the name reads
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


def test_upstream_annotations_and_meta_reach_the_spec_whole() -> None:
    """The upstream's annotations are kept whole (``idempotentHint`` and the annotations' title
    too); its ``_meta`` is kept but for pincer's own keys; an MCP App's page gets its served URI."""
    hints = {"title": "Evaluate JavaScript", "readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
             "openWorldHint": True}  # fmt: skip
    meta = {"ui": {"resourceUri": "ui://pw/app.html", "visibility": ["model", "app"]}, "ui/resourceUri": "ui://pw/app.html",
            "pincer/effects": [], "vendor/x": 1}  # fmt: skip
    definition = ToolDefinition(name="browser_evaluate", description="d", input_schema={"type": "object"},
                                annotations=hints, meta=meta)  # fmt: skip
    spec = build_spec(stdio().with_changes(name="pw"), definition, registry_name="pw_browser_evaluate")
    assert spec.annotations["mcp"] == hints
    assert spec.annotations["mcp_meta"] == {
        "ui": {"resourceUri": "ui://pw/pw/app.html", "visibility": ["model", "app"]},
        "ui/resourceUri": "ui://pw/pw/app.html",
        "vendor/x": 1,
    }
    # An App page whose URI cannot carry the server's name is dropped, not pointed elsewhere.
    opaque = ToolDefinition(name="t", description="d", input_schema={}, meta={"ui": {"resourceUri": "urn:x"}, "k": 2})
    assert build_spec(stdio(), opaque, registry_name="s_t").annotations["mcp_meta"] == {"k": 2}
