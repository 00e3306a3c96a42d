"""A2UI messages against their version's published schema: the version is told per message, a
valid batch of either version passes, and every invalid message is refused with an error naming
the message, the field and the rule; arbitrary JSON only ever raises that error."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.canvas.a2ui import V08, V09, component_names, parse_messages
from pincer.core.errors import A2uiInvalid

CATALOG_V09 = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"


def _v08_button() -> list[dict[str, Any]]:
    return [
        {"beginRendering": {"surfaceId": "s", "root": "b"}},
        {"surfaceUpdate": {"surfaceId": "s", "components": [
            {"id": "b", "component": {"Button": {"child": "t", "action": {"name": "go"}}}},
            {"id": "t", "component": {"Text": {"text": {"literalString": "Go"}}}},
        ]}},
        {"dataModelUpdate": {"surfaceId": "s", "contents": [{"key": "name", "valueString": "x"}]}},
        {"deleteSurface": {"surfaceId": "s"}},
    ]  # fmt: skip


def _v09_button() -> list[dict[str, Any]]:
    return [
        {"version": "v0.9", "createSurface": {"surfaceId": "s", "catalogId": CATALOG_V09}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [
            {"id": "root", "component": "Button", "child": "t", "action": {"event": {"name": "go"}}},
            {"id": "t", "component": "Text", "text": "Go"},
        ]}},
        {"version": "v0.9", "updateDataModel": {"surfaceId": "s", "path": "/name", "value": "x"}},
        {"version": "v0.9", "deleteSurface": {"surfaceId": "s"}},
    ]  # fmt: skip


def test_each_message_is_recognised_by_its_own_version() -> None:
    mixed = [*_v08_button()[:2], *_v09_button()[:2]]
    parsed = parse_messages(mixed)
    assert [(m.index, m.version, m.action) for m in parsed] == [
        (0, V08, "beginRendering"), (1, V08, "surfaceUpdate"), (2, V09, "createSurface"), (3, V09, "updateComponents"),
    ]  # fmt: skip
    assert [m.action for m in parse_messages(_v08_button())][-1] == "deleteSurface"
    assert [m.version for m in parse_messages(_v09_button())] == [V09] * 4


def test_the_official_v09_examples_pass() -> None:
    """The basic catalog's own gallery messages (from the published package) are valid."""
    # The vendored schemas are what the package shipped: the examples of the same release pass.
    messages = [
        {"version": "v0.9", "createSurface": {"surfaceId": "gallery", "catalogId": CATALOG_V09}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "gallery", "components": [
            {"id": "root", "component": "Column", "children": ["title", "field", "check", "go"], "justify": "center", "align": "center"},
            {"id": "title", "component": "Text", "text": "Click the button below", "variant": "body"},
            {"id": "field", "component": "TextField", "label": "Name", "value": {"path": "/name"}, "variant": "shortText"},
            {"id": "check", "component": "CheckBox", "label": "Agree", "value": {"path": "/ok"}},
            {"id": "go", "component": "Button", "child": "label", "variant": "primary",
             "action": {"event": {"name": "button_clicked", "context": {"name": {"path": "/name"}}}}},
            {"id": "label", "component": "Text", "text": "Click Me"},
        ]}},
    ]  # fmt: skip
    assert len(parse_messages(messages)) == 2


def _error(messages: Any) -> str:
    with pytest.raises(A2uiInvalid) as caught:
        parse_messages(messages)
    assert caught.value.code == "a2ui_invalid" and caught.value.http_status == 422
    assert caught.value.hint
    return caught.value.message


@pytest.mark.parametrize(
    ("messages", "names"),
    [
        # a missing surfaceId, both versions
        ([{"beginRendering": {"root": "b"}}], ["message 0 (beginRendering)", "/beginRendering/surfaceId", "required"]),
        ([{"version": "v0.9", "createSurface": {"catalogId": CATALOG_V09}}], ["message 0 (createSurface)", "/createSurface/surfaceId", "required"]),
        (
            [_v09_button()[0], {"version": "v0.9", "updateComponents": {"components": [{"id": "root", "component": "Text", "text": "x"}]}}],
            ["message 1 (updateComponents)", "/updateComponents/surfaceId", "required"],
        ),
        # an unknown component, both versions
        (
            [{"surfaceUpdate": {"surfaceId": "s", "components": [{"id": "b", "component": {"Blink": {}}}]}}],
            ["message 0 (surfaceUpdate)", "/surfaceUpdate/components/0/component/Blink", "unknown component 'Blink'", "standard catalog"],
        ),
        (
            [{"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [{"id": "root", "component": "Marquee"}]}}],
            ["message 0 (updateComponents)", "/updateComponents/components/0/component", "unknown component 'Marquee'", "basic catalog"],
        ),
        # a wrong type, both versions
        (
            [{"surfaceUpdate": {"surfaceId": "s", "components": [{"id": "b", "component": {"Button": {"child": 7, "action": {"name": "go"}}}}]}}],
            ["/surfaceUpdate/components/0/component/Button/child", "7 is not of type \"string\"", "rule: type"],
        ),
        (
            [{"version": "v0.9", "updateComponents": {"surfaceId": 5, "components": [{"id": "root", "component": "Text", "text": "x"}]}}],
            ["/updateComponents/surfaceId", "5 is not of type \"string\"", "rule: type"],
        ),
        (
            [{"version": "v0.9", "updateComponents": {"surfaceId": "s", "components": [{"id": "root", "component": "Button", "child": "t", "action": {"event": {"name": 3}}}]}}],
            ["/updateComponents/components/0/action", "rule:"],
        ),
        # versions and actions
        ([{"createSurface": {"surfaceId": "s", "catalogId": CATALOG_V09}}], ["/version", "v0.9"]),
        ([{"version": "v1.0", "deleteSurface": {"surfaceId": "s"}}], ["/version", "\"v1.0\""]),
        ([{"beginRendering": {"surfaceId": "s", "root": "r"}, "deleteSurface": {"surfaceId": "s"}}], ["message 0", "exactly one of"]),
        ([{}], ["message 0", "exactly one of"]),
        (["surfaceUpdate"], ["message 0", "JSON object"]),
        ([], ["no A2UI messages"]),
        ([_v08_button()[0], {"beginRendering": {"surfaceId": "s", "root": "r", "extra": 1}}], ["message 1 (beginRendering)", "rule: additionalProperties"]),
    ],
)
def test_an_invalid_message_is_refused_naming_the_message_the_field_and_the_rule(messages: Any, names: list[str]) -> None:
    text = _error(messages)
    for name in names:
        assert name in text, text


def test_component_names_are_the_published_catalogs() -> None:
    v08 = component_names(V08)
    v09 = component_names(V09)
    assert {"Button", "TextField", "Text", "Column", "MultipleChoice"} <= set(v08)
    assert {"Button", "TextField", "Text", "Column", "ChoicePicker"} <= set(v09)
    shipped = json.loads(resources.files("pincer.canvas").joinpath("schemas", "v0_9", "basic_catalog.json").read_text())
    assert shipped["catalogId"] == CATALOG_V09


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
_keys = st.sampled_from(["version", "beginRendering", "surfaceUpdate", "dataModelUpdate", "deleteSurface", "createSurface",
                         "updateComponents", "updateDataModel", "surfaceId", "components", "component", "id", "root"])  # fmt: skip
_shaped = st.recursive(
    st.none() | st.text(max_size=8) | st.sampled_from(["v0.9", "v0.8", "Button", "Text", "root"]) | st.integers(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_json, _shaped, st.lists(_shaped, max_size=3)))
def test_arbitrary_json_only_raises_our_error(value: Any) -> None:
    try:
        parsed = parse_messages(value)
    except A2uiInvalid as exc:
        assert exc.message.startswith(("A2UI message", "no A2UI messages"))
        return
    assert all(m.version in (V08, V09) and isinstance(m.surface_id, str) for m in parsed)
