"""Parameters on the wire as the OpenAPI Specification writes them.

The spec's own table ("Style Examples", 3.1.1 section 4.8.12.6 and 3.0.4, quoted row by row
below) is sent through the whole call chain to a real HTTP server on 127.0.0.1, and the request
line and headers it receives are compared with the table. RFC 6570's expansions (simple, label,
matrix, form) are also checked against an independent implementation, ``uritemplate``, over
generated values. Failed before the fix: objects went out as JSON (``color={"R":100,...}``),
arrays comma-joined whatever the style, label and matrix sent bare, cookies dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from uritemplate import URITemplate

from pincer.runtimes.openapi.serialize import header_value, path_value, query_pairs
from tests import localservers
from tests.runtimes.openapi.chain import add_document, call, open_pincer

pytestmark = pytest.mark.anyio

VALUES: dict[str, Any] = {
    "undefined": None,  # 3.1.1: null is one of RFC 6570's "undefined" values
    "string": "blue",
    "array": ["blue", "black", "brown"],
    "object": {"R": 100, "G": 200, "B": 150},
}
COLUMNS = ("undefined", "string", "array", "object")

# The table as 3.1.1 prints it (3.0.4's is the same; "empty" cells are the empty string).
SPEC_TABLE = """
| matrix | false | ;color | ;color=blue | ;color=blue,black,brown | ;color=R,100,G,200,B,150 |
| matrix | true | ;color | ;color=blue | ;color=blue;color=black;color=brown | ;R=100;G=200;B=150 |
| label | false | . | .blue | .blue,black,brown | .R,100,G,200,B,150 |
| label | true | . | .blue | .blue.black.brown | .R=100.G=200.B=150 |
| simple | false | *empty* | blue | blue,black,brown | R,100,G,200,B,150 |
| simple | true | *empty* | blue | blue,black,brown | R=100,G=200,B=150 |
| form | false | color= | color=blue | color=blue,black,brown | color=R,100,G,200,B,150 |
| form | true | color= | color=blue | color=blue&color=black&color=brown | R=100&G=200&B=150 |
| spaceDelimited | false | *n/a* | *n/a* | color=blue%20black%20brown | color=R%20100%20G%20200%20B%20150 |
| spaceDelimited | true | *n/a* | *n/a* | *n/a* | *n/a* |
| pipeDelimited | false | *n/a* | *n/a* | color=blue%7Cblack%7Cbrown | color=R%7C100%7CG%7C200%7CB%7C150 |
| pipeDelimited | true | *n/a* | *n/a* | *n/a* | *n/a* |
| deepObject | false | *n/a* | *n/a* | *n/a* | *n/a* |
| deepObject | true | *n/a* | *n/a* | *n/a* | color%5BR%5D=100&color%5BG%5D=200&color%5BB%5D=150 |
"""


def table() -> list[tuple[str, bool, str, str]]:
    """(style, explode, column, expected) for every defined cell."""
    rows = []
    for line in SPEC_TABLE.strip().splitlines():
        style, explode, *cells = [c.strip() for c in line.strip("|").split("|")]
        for column, cell in zip(COLUMNS, cells, strict=True):
            if cell != "*n/a*":
                rows.append((style, explode == "true", column, "" if cell == "*empty*" else cell))
    return rows


CELLS = table()
PATH_STYLES = ("matrix", "label", "simple")


def operation(style: str, explode: bool, location: str) -> tuple[str, dict[str, Any]]:
    name = "X-Color" if location == "header" else "color"
    # "c{color}": a label value of "." (null) would be a whole dot segment, which pincer
    # percent-encodes on purpose (test_a_dot_segment_value_is_data_not_a_step_up).
    path = f"/{location}-{style}-{str(explode).lower()}" + ("/c{color}" if location == "path" else "")
    param = {"name": name, "in": location, "required": location == "path", "style": style, "explode": explode,
             "schema": {}}
    return path, {"get": {"operationId": f"{location}_{style}_{str(explode).lower()}", "parameters": [param],
                          "responses": {"200": {"description": "echo"}}}}


def document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for style, explode, _column, _cell in CELLS:
        location = "path" if style in PATH_STYLES else "query"
        path, item = operation(style, explode, location)
        paths[path] = item
        if style == "simple":
            path, item = operation(style, explode, "header")
            paths[path] = item
        if style == "form":
            path, item = operation(style, explode, "cookie")
            paths[path] = item
    return {"openapi": "3.1.0", "info": {"title": "styles", "version": "1"}, "paths": paths}


@pytest.fixture
def echo() -> Iterator[localservers.LocalServer]:
    with localservers.serve() as server:
        yield server


async def test_the_spec_style_table_on_the_wire(tmp_path: Path, echo: localservers.LocalServer) -> None:
    home = tmp_path / "home"
    add_document(home, "st", document(), echo.url("/echo"))
    checked = 0
    async with open_pincer(home) as p:
        for style, explode, column, expected in CELLS:
            flag = str(explode).lower()
            location = "path" if style in PATH_STYLES else "query"
            result = await call(p, f"st_{location}_{style}_{flag}", {"color": VALUES[column]})
            assert result.ok, (style, explode, column, result.error)
            sent = echo.requests[-1]
            if location == "path":
                assert sent.line == f"GET /echo/path-{style}-{flag}/c{expected} HTTP/1.1", (style, explode, column)
            else:
                assert sent.line == f"GET /echo/query-{style}-{flag}?{expected} HTTP/1.1", (style, explode, column)
            checked += 1
            if style == "simple":  # the only header style: the table's cell is the header's value
                result = await call(p, f"st_header_simple_{flag}", {"X-Color": VALUES[column]})
                assert result.ok, result.error
                assert echo.requests[-1].headers["X-Color"] == expected, (explode, column)
                checked += 1
            if style == "form":  # a cookie is form with "; " where a query has "&" (3.1.1 Appendix D)
                result = await call(p, f"st_cookie_form_{flag}", {"color": VALUES[column]})
                assert result.ok and echo.requests[-1].headers["Cookie"] == expected.replace("&", "; "), (explode, column)
                checked += 1
    assert checked == len(CELLS) + 8 + 8  # every defined cell, and the header and cookie rows


async def test_a_dot_segment_value_is_data_not_a_step_up(tmp_path: Path, echo: localservers.LocalServer) -> None:
    """Attack: a path argument of ".." was sent as a dot segment, which the egress URL parser
    resolves: ``GET /items/{id}`` with id ".." reached ``GET /echo/`` (another endpoint than the
    operation's). Failed before the fix: the server received ``GET /echo/ HTTP/1.1``. Now the
    dots are percent-encoded as data, which egress refuses to send (no encoded dot segments):
    nothing leaves, and the caller is told why."""
    home = tmp_path / "home"
    doc = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/items/{id}": {"get": {
        "operationId": "getItem", "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok"}}}}}}
    add_document(home, "dots", doc, echo.url("/echo"))
    async with open_pincer(home) as p:
        for value in ("..", "."):
            result = await call(p, "dots_getItem", {"id": value})
            assert not result.ok and result.error["code"] == "egress_denied", result.error
            assert "dot segment" in result.error["message"]
        assert echo.requests == []
        result = await call(p, "dots_getItem", {"id": "a..b"})
        assert result.ok and echo.requests[-1].line == "GET /echo/items/a..b HTTP/1.1"


async def test_header_and_cookie_values_cannot_start_another_header(tmp_path: Path, echo: localservers.LocalServer) -> None:
    """A header or cookie argument with CR LF is percent-encoded in place (never a second header
    line, never a refused call for a value a caller may legitimately hold), and a cookie value
    cannot add a cookie of its own with ';'."""
    home = tmp_path / "home"
    params = [{"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
              {"name": "session", "in": "cookie", "schema": {"type": "string"}}]
    doc = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/h": {"get": {
        "operationId": "h", "parameters": params, "responses": {"200": {"description": "ok"}}}}}}
    add_document(home, "hdr", doc, echo.url("/echo"))
    async with open_pincer(home) as p:
        result = await call(p, "hdr_h", {"X-Trace": "a\r\nX-Injected: 1", "session": "s1; admin=true"})
        assert result.ok, result.error
    sent = echo.requests[-1]
    assert "X-Injected" not in sent.headers and sent.headers["X-Trace"] == "a%0D%0AX-Injected: 1"
    assert sent.headers["Cookie"] == "session=s1%3B%20admin%3Dtrue"


async def test_allow_reserved_and_content_parameters(tmp_path: Path, echo: localservers.LocalServer) -> None:
    home = tmp_path / "home"
    params = [
        {"name": "path", "in": "query", "allowReserved": True, "schema": {"type": "string"}},
        {"name": "plain", "in": "query", "schema": {"type": "string"}},
        {"name": "where", "in": "query", "content": {"application/json": {"schema": {"type": "object"}}}},
    ]
    doc = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/q": {"get": {
        "operationId": "q", "parameters": params, "responses": {"200": {"description": "ok"}}}}}}
    add_document(home, "res", doc, echo.url("/echo"))
    async with open_pincer(home) as p:
        result = await call(p, "res_q", {"path": "/a/b?c=d&e%2F", "plain": "/a/b", "where": {"lat": 1.5, "long": 2}})
        assert result.ok, result.error
    # allowReserved keeps RFC 3986's reserved characters and %-triples, but not '&', '=', '#', '[', ']', '+'
    # (3.1.1: they mean something in a query); the JSON content parameter is JSON text, percent-encoded.
    assert echo.requests[-1].line == (
        "GET /echo/q?path=/a/b?c%3Dd%26e%2F&plain=%2Fa%2Fb&where=%7B%22lat%22%3A1.5%2C%22long%22%3A2%7D HTTP/1.1")


# -- against an independent RFC 6570 implementation ---------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
KEYS = st.text("abcXYZ_-", min_size=1, max_size=5)
# uritemplate sorts an object's members; pincer keeps the caller's order (the spec's R,G,B): give sorted ones.
VALUE = st.one_of(TEXT, st.lists(TEXT, min_size=1, max_size=4),
                  st.dictionaries(KEYS, TEXT, min_size=1, max_size=4).map(lambda d: dict(sorted(d.items()))))
OPERATORS = {"simple": "", "label": ".", "matrix": ";"}


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=VALUE, explode=st.booleans(), style=st.sampled_from(["simple", "label", "matrix", "form"]))
def test_rfc6570_styles_agree_with_uritemplate(value: Any, explode: bool, style: str) -> None:
    members = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
    # RFC 6570 3.2.7: an empty member of an exploded {;x*} is ";x" (ifemp ""); uritemplate writes ";x=".
    assume(not (style == "matrix" and explode and "" in members))
    star = "*" if explode else ""
    if style == "form":
        ours = "?" + "&".join(query_pairs("form", explode, "color", value))
        theirs = URITemplate("{?color" + star + "}").expand(color=value)
    else:
        ours = path_value(style, explode, "color", value)
        theirs = URITemplate("{" + OPERATORS[style] + "color" + star + "}").expand(color=value)
    assert ours == theirs


@settings(max_examples=300, deadline=None)
@given(value=VALUE, explode=st.booleans())
def test_header_values_are_always_one_line(value: Any, explode: bool) -> None:
    text = header_value(explode, value)
    assert all(0x20 <= ord(c) <= 0x7E or c == "\t" for c in text)
