"""A2UI surfaces are judged by the catalog their ``catalogId`` names (issue 36): the spec's
minimal catalog (its ``capitalize`` function), v0.8's catalog named late, custom catalogs from a
file or a URL (``[gateway] a2ui_catalogs``, fetched through the egress rule), and an unknown
catalog refused with the key that registers one. Before the change every surface was judged by
the basic catalog: the minimal surface was refused, the unknown catalog accepted, and a ``uri``
that is not one passed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.canvas.a2ui import check_client_message, parse_messages
from pincer.canvas.catalogs import BASIC_V09, MINIMAL_V09, CatalogSet, load_catalog, load_catalogs
from pincer.core.errors import A2uiInvalid, ConfigError
from tests.canvas.conftest import Plan, canvas_server

CUSTOM_ID = "https://cards.example/a2ui/catalog.json"
COMMON = "https://a2ui.org/specification/v0_9/common_types.json"


def _capitalized(catalog_id: str) -> list[dict[str, Any]]:
    return [
        {"version": "v0.9", "createSurface": {"surfaceId": "cap", "catalogId": catalog_id}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "cap", "components": [
            {"id": "root", "component": "Text", "text": {"call": "capitalize", "args": {"value": {"path": "/name"}}, "returnType": "string"}},
        ]}},
    ]  # fmt: skip


def _error(messages: Any, **kwargs: Any) -> str:
    with pytest.raises(A2uiInvalid) as caught:
        parse_messages(messages, **kwargs)
    return caught.value.message + " | " + (caught.value.hint or "")


def test_a_minimal_catalog_surface_may_use_capitalize_and_a_basic_one_may_not() -> None:
    (_, update) = parse_messages(_capitalized(MINIMAL_V09))
    assert update.catalog_id == MINIMAL_V09
    # The basic catalog has no capitalize: the same surface on it is refused, naming the field.
    assert "/updateComponents/components/0/text" in _error(_capitalized(BASIC_V09))


def test_the_minimal_catalog_refuses_what_only_the_basic_one_has() -> None:
    messages = [
        {"version": "v0.9", "createSurface": {"surfaceId": "m", "catalogId": MINIMAL_V09}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "m", "components": [{"id": "root", "component": "Card", "child": "t"}]}},
    ]
    text = _error(messages)
    assert "unknown component 'Card'" in text and "the minimal catalog has Text, Row, Column, Button, TextField" in text
    # An update in a later batch is judged by the catalog the surface was created with.
    prior = {"m": [messages[0]]}
    assert "unknown component 'Card'" in _error(messages[1:], prior=prior)


def test_an_unknown_catalog_is_refused_naming_the_key_that_registers_one() -> None:
    for messages, field in (
        ([{"version": "v0.9", "createSurface": {"surfaceId": "u", "catalogId": "https://nobody.example/catalog.json"}}], "/createSurface/catalogId"),
        ([{"beginRendering": {"surfaceId": "u", "root": "r", "catalogId": "https://nobody.example/v08.json"}}], "/beginRendering/catalogId"),
    ):
        text = _error(messages)
        assert field in text and "unknown catalog 'https://nobody.example/" in text, text
        assert "[gateway] a2ui_catalogs" in text, text
    # A v0.9 catalog id is no v0.8 catalog.
    assert "unknown catalog" in _error([{"beginRendering": {"surfaceId": "u", "root": "r", "catalogId": BASIC_V09}}])


def test_format_keywords_are_asserted() -> None:
    """The spec's own v0.9 case: openUrl's url must be a URI."""

    def open_url(url: str) -> list[dict[str, Any]]:
        return [
            {"version": "v0.9", "createSurface": {"surfaceId": "f", "catalogId": BASIC_V09}},
            {"version": "v0.9", "updateComponents": {"surfaceId": "f", "components": [
                {"id": "root", "component": "Button", "child": "t",
                 "action": {"functionCall": {"call": "openUrl", "args": {"url": url}, "returnType": "void"}}},
                {"id": "t", "component": "Text", "text": "Go"},
            ]}},
        ]  # fmt: skip

    assert len(parse_messages(open_url("https://example.com/docs"))) == 2
    assert "/updateComponents/components/0/action" in _error(open_url("not a uri"))


def test_a_v08_catalog_named_late_judges_the_components_drawn_before() -> None:
    """v0.8 may send components before beginRendering; the catalog it names then applies to
    them, in the same batch or across batches."""
    minimal_v08 = {
        "catalogId": "https://a2ui.example/v08/tiny.json",
        "components": {"Text": {"type": "object", "properties": {"text": {"type": "object"}}, "required": ["text"], "additionalProperties": False}},
    }
    catalogs = CatalogSet([load_catalog(json.dumps(minimal_v08), "tiny.json")])
    card = {"surfaceUpdate": {"surfaceId": "s", "components": [{"id": "r", "component": {"Card": {"child": "t"}}}]}}
    begin = {"beginRendering": {"surfaceId": "s", "root": "r", "catalogId": minimal_v08["catalogId"]}}
    assert "unknown component 'Card'" in _error([card, begin], catalogs=catalogs)
    parse_messages([card], catalogs=catalogs)  # no catalog named yet: the standard one has Card
    text = _error([begin], catalogs=catalogs, prior={"s": [card]})
    assert "drawn before" in text and "unknown component 'Card'" in text, text


def _custom_catalog(extra_ref: str | None = None) -> dict[str, Any]:
    badge: dict[str, Any] = {
        "type": "object",
        "allOf": [
            {"$ref": f"{COMMON}#/$defs/ComponentCommon"},
            {"type": "object", "properties": {"component": {"const": "Badge"}, "label": {"$ref": f"{COMMON}#/$defs/DynamicString"}}, "required": ["component", "label"]},
        ],
        "unevaluatedProperties": False,
    }
    if extra_ref:
        badge["allOf"].append({"$ref": extra_ref})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": CUSTOM_ID,
        "catalogId": CUSTOM_ID,
        "components": {"Badge": badge},
        "functions": {},
        "$defs": {
            "theme": {"type": "object"},
            "anyComponent": {"oneOf": [{"$ref": "#/components/Badge"}]},
            "anyFunction": {"oneOf": [{"const": "none"}]},
        },
    }


def _badge(label: Any) -> list[dict[str, Any]]:
    return [
        {"version": "v0.9", "createSurface": {"surfaceId": "b", "catalogId": CUSTOM_ID}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "b", "components": [{"id": "root", "component": "Badge", "label": label}]}},
    ]


class _Site(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, bytes]] = {}
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = self.routes.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body or b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _site(routes: dict[str, bytes]) -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Site", (_Site,), {"routes": routes, "hits": hits}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_custom_catalog_from_a_file_judges_its_surfaces(tmp_path: Path) -> None:
    (tmp_path / "cards.json").write_text(json.dumps(_custom_catalog()))
    catalogs = anyio.run(lambda: load_catalogs(["cards.json"], home=tmp_path, allow_private=False))
    assert CUSTOM_ID in catalogs
    assert len(parse_messages(_badge("new"), catalogs=catalogs)) == 2
    assert "/updateComponents/components/0/label" in _error(_badge(7), catalogs=catalogs)
    assert "unknown component 'Text'" in _error(
        [_badge("x")[0], {"version": "v0.9", "updateComponents": {"surfaceId": "b", "components": [{"id": "root", "component": "Text", "text": "t"}]}}],
        catalogs=catalogs,
    )
    with pytest.raises(ConfigError) as missing:
        anyio.run(lambda: load_catalogs(["nowhere.json"], home=tmp_path, allow_private=False))
    assert "nowhere.json" in missing.value.message and "[gateway] a2ui_catalogs" in (missing.value.hint or "")


def test_a_catalog_that_refers_outside_itself_is_refused_and_nothing_is_fetched() -> None:
    """jsonschema_rs fetches an unknown ``$ref`` over HTTP by default: before the change a
    catalog could make the gateway send requests wherever it pointed while validating."""
    with _site({}) as (url, hits):
        with pytest.raises(ConfigError) as refused:
            load_catalog(json.dumps(_custom_catalog(extra_ref=f"{url}/evil.json")), "hostile.json")
        assert "pincer fetches no schema while validating" in refused.value.message
        assert hits == []


def test_a_custom_catalog_from_a_url_goes_through_the_egress_rule() -> None:
    with _site({"/cards.json": json.dumps(_custom_catalog()).encode()}) as (url, hits):
        # A loopback address is private: refused by the egress rule unless [network] allow_private.
        with pytest.raises(ConfigError) as refused:
            anyio.run(lambda: load_catalogs([f"{url}/cards.json"], home=Path("."), allow_private=False))
        assert "egress" in refused.value.message and hits == []
        catalogs = anyio.run(lambda: load_catalogs([f"{url}/cards.json"], home=Path("."), allow_private=True))
        assert CUSTOM_ID in catalogs and hits == ["/cards.json"]
        with pytest.raises(ConfigError) as gone:
            anyio.run(lambda: load_catalogs([f"{url}/gone.json"], home=Path("."), allow_private=True))
        assert "HTTP 404" in gone.value.message


@pytest.mark.slow
def test_the_gateway_judges_surfaces_by_the_catalogs_config_registers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "cards.json").write_text(json.dumps(_custom_catalog()))
    with canvas_server(home, Plan(steps=[]), gateway_config='a2ui_catalogs = ["cards.json"]\n') as server:
        assert _push(server, _badge("new")).status_code == 200
        assert _push(server, _capitalized(MINIMAL_V09)).status_code == 200
        refused = _push(server, [{"version": "v0.9", "createSurface": {"surfaceId": "u", "catalogId": "https://nobody.example/c.json"}}])
        assert refused.status_code == 422, refused.text
        assert "[gateway] a2ui_catalogs" in refused.json()["error"]["hint"]
        # A later update of the badge surface is judged by its own catalog, not the basic one.
        later = _push(server, [{"version": "v0.9", "updateComponents": {"surfaceId": "b", "components": [{"id": "root", "component": "Badge", "label": 5}]}}])
        assert later.status_code == 422 and "/updateComponents/components/0/label" in later.json()["error"]["message"], later.text
        assert sorted(server.state()["surfaces"]) == ["b", "cap"]


def _push(server: Any, messages: list[dict[str, Any]]) -> Any:
    return server.client.post("/api/v1/tools/a2ui_push/call", json={"args": {"messages": messages}})


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3),
    max_leaves=15,
)
_catalog_keys = st.sampled_from(["catalogId", "components", "styles", "$schema", "$id", "$defs", "functions", "anyComponent", "type", "$ref"])
_catalog_shaped = st.recursive(
    st.none() | st.text(max_size=8) | st.sampled_from([CUSTOM_ID, "object", "#/components/X", f"{COMMON}#/$defs/DynamicString"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_catalog_keys, children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_json, _catalog_shaped))
def test_any_catalog_document_loads_or_is_refused_with_our_error(value: Any) -> None:
    try:
        catalog = load_catalog(json.dumps(value), "fuzzed.json")
    except ConfigError as exc:
        assert exc.message.startswith("A2UI catalog fuzzed.json: ") and "[gateway] a2ui_catalogs" in (exc.hint or "")
        return
    assert catalog.catalog_id and catalog.components


@settings(max_examples=200, deadline=None)
@given(st.one_of(_json, st.fixed_dictionaries({"userAction": _json}), st.fixed_dictionaries({"version": st.just("v0.9"), "action": _json})))
def test_any_client_message_is_checked_or_refused_with_our_error(value: Any) -> None:
    try:
        assert check_client_message(value) in ("v0.8", "v0.9")
    except A2uiInvalid as exc:
        assert exc.code == "a2ui_invalid"
