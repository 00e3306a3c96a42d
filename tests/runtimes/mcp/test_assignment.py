"""Which upstream tool holds which registry name (runtimes/mcp/assignment.py): tables, the order
the server lists its tools in never matters (a property), old pin files still read."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.runtimes.mcp import PinStore, ToolDefinition
from pincer.runtimes.mcp.assignment import assign_tools
from pincer.safety.scanner import LeakScanner

SCANNER = LeakScanner(["tok-5e1f0a9d3c2b7e8f"])


def tool(name: str, description: str = "d", **annotations: object) -> ToolDefinition:
    return ToolDefinition(name=name, description=description, input_schema={"type": "object"}, annotations=annotations)


def pinned(tmp_path: Path, *definitions: ToolDefinition, server: str = "s") -> PinStore:
    store = PinStore(tmp_path)
    store.trust(server, definitions)
    return store


def test_a_first_listing_assigns_names_and_refuses_the_collisions(tmp_path: Path) -> None:
    result = assign_tools("s", {}, [tool("a_b"), tool("a.b"), tool("c")], scanner=SCANNER)
    assert {(t.registry_name, t.upstream, t.state) for t in result.tools} == {("s_a_b", "a.b", "new"), ("s_c", "c", "new")}
    (refused,) = result.refused
    assert refused.kind == "collision" and refused.tool == "a_b" and "its tool 'a.b'" in refused.reason


def test_pinned_tools_keep_their_names_and_changes_block(tmp_path: Path) -> None:
    pins = pinned(tmp_path, tool("a_b", "weather"), tool("x", "old"), tool("ro", readOnlyHint=False)).pins("s")
    offered = [tool("a.b", "EVIL"), tool("a_b", "weather"), tool("x", "new"), tool("ro", readOnlyHint=True)]
    result = assign_tools("s", pins, offered, scanner=SCANNER)
    by_name = {t.registry_name: t for t in result.tools}
    assert by_name["s_a_b"].upstream == "a_b" and by_name["s_a_b"].state == "trusted"
    assert by_name["s_x"].state == "changed" and by_name["s_x"].definition.description == "old"
    assert by_name["s_ro"].state == "changed" and by_name["s_ro"].definition.annotations == {"readOnlyHint": False}
    assert [r.tool for r in result.refused] == ["a.b"]
    assert {c.definition.name: c.change for c in result.candidates} == {"x": "changed", "ro": "changed"}


def test_an_owner_change_is_blocked_and_trust_moves_the_name(tmp_path: Path) -> None:
    store = pinned(tmp_path, tool("a.b", "weather"))
    result = assign_tools("s", store.pins("s"), [tool("a_b", "EVIL")], scanner=SCANNER)
    (entry,) = result.tools
    assert (entry.registry_name, entry.upstream, entry.state) == ("s_a_b", "a_b", "owner_changed")
    assert entry.definition.description == "weather" and "trusted as 'a.b'" in (entry.blocked or "")
    (candidate,) = result.candidates
    store.trust("s", [candidate.definition])
    assert set(store.pins("s")) == {"a_b"}  # the displaced pin is gone with the trust
    after = assign_tools("s", store.pins("s"), [tool("a_b", "EVIL")], scanner=SCANNER)
    assert [(t.upstream, t.state) for t in after.tools] == [("a_b", "trusted")]


def test_secrets_are_refused_in_offers_and_in_old_pins(tmp_path: Path) -> None:
    leaky = tool("leaky", "use tok-5e1f0a9d3c2b7e8f")
    store = pinned(tmp_path, leaky, tool("fine"))
    offered = [tool("leaky", "fixed"), tool("fine"), tool("new", "sk-ant-api03-" + "a" * 90)]
    result = assign_tools("s", store.pins("s"), offered, scanner=SCANNER)
    assert [t.upstream for t in result.tools] == ["fine"]
    assert {(r.tool, r.kind) for r in result.refused} == {("leaky", "secret"), ("new", "secret")}
    (candidate,) = result.candidates  # the clean offer may replace the leaky pin; the diff is redacted
    assert candidate.definition.description == "fixed" and "tok-" not in candidate.pinned.description
    lazy = assign_tools("s", store.pins("s"), None, scanner=SCANNER)
    assert [t.upstream for t in lazy.tools] == ["fine"]


def test_names_another_server_holds_are_refused(tmp_path: Path) -> None:
    result = assign_tools("a", {}, [tool("b_c"), tool("d")], scanner=SCANNER, taken={"a_b_c"})
    assert [t.registry_name for t in result.tools] == ["a_d"]
    assert result.refused[0].tool == "b_c" and "another server" in result.refused[0].reason


def test_pins_written_before_names_and_policy_hashes_still_match(tmp_path: Path) -> None:
    definition = tool("get", "reads", readOnlyHint=True)
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "pins.json").write_text(json.dumps({"schema_version": 1, "servers": {"s": {"get": {
        "hash": definition.hash, "description": "reads", "input_schema": {"type": "object"},
        "annotations": {"readOnlyHint": True, "title": "ignored"}, "trusted_at": 1,
    }}}}))
    pin = PinStore(tmp_path).pins("s")["get"]
    assert pin.registry_name == "s_get" and pin.matches(definition)
    assert not pin.matches(tool("get", "reads", readOnlyHint=False))
    written = PinStore(tmp_path)
    written.trust("s", [definition])
    data = json.loads((tmp_path / "mcp" / "pins.json").read_text())["servers"]["s"]["get"]
    assert data["registry_name"] == "s_get" and data["policy_hash"] == definition.policy_hash


def test_a_hand_edited_registry_name_is_not_taken_from_the_file(tmp_path: Path) -> None:
    pinned(tmp_path, tool("get"))
    path = tmp_path / "mcp" / "pins.json"
    data = json.loads(path.read_text())
    data["servers"]["s"]["get"]["registry_name"] = "echo"
    path.write_text(json.dumps(data))
    assert PinStore(tmp_path).pins("s")["get"].registry_name == "s_get"


names = st.sampled_from(["a.b", "a_b", "a-b", "a b", "c", "c.", "c_"])


@settings(max_examples=200, deadline=None)
@given(pinned_names=st.lists(names, unique=True, max_size=3), offered_names=st.lists(names, unique=True, max_size=6),
       order=st.randoms(use_true_random=False))
def test_the_listing_order_never_decides(tmp_path_factory, pinned_names, offered_names, order) -> None:
    home = tmp_path_factory.mktemp("pins")
    store = PinStore(home)
    store.record_new("s", [tool(n) for n in pinned_names])
    pins = store.pins("s")
    offered = [tool(n) for n in offered_names]
    shuffled = list(offered)
    order.shuffle(shuffled)
    first = assign_tools("s", pins, offered, scanner=SCANNER)
    second = assign_tools("s", pins, shuffled, scanner=SCANNER)
    assert sorted((t.registry_name, t.upstream, t.state) for t in first.tools) == sorted(
        (t.registry_name, t.upstream, t.state) for t in second.tools
    )
    assert len({t.registry_name for t in first.tools}) == len(first.tools)  # one holder per name
    for entry in first.tools:  # a pinned tool keeps its name against any newcomer
        holder = next((p for p in pins.values() if p.registry_name == entry.registry_name), None)
        if holder is not None and holder.upstream in offered_names:
            assert entry.upstream == holder.upstream
