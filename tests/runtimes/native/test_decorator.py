"""@tool: schemas from hints and docstrings, validation, and what it refuses to describe."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import ArgumentsInvalid, UsageError
from pincer.core.values import HostContext
from pincer.runtimes.native import NativeTool, tool
from pincer.runtimes.native.docstrings import parse_docstring


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(pydantic.BaseModel):
    x: int
    y: int


@tool(effects=["network", EffectKind.USE_SECRET])
def search(
    query: str,
    limit: int = 10,
    tags: list[str] | None = None,
    colour: Colour = Colour.RED,
    mode: Literal["fast", "exact"] = "fast",
    origin: Point | None = None,
    labelled: Annotated[str, pydantic.Field(description="from the annotation")] = "x",
) -> dict[str, Any]:
    """Search the catalogue.

    Finds items by text; longer explanation an agent may want.

    Args:
        query: What to look for.
            Continues on a second line.
        limit (int): At most this many results.
        tags: Only items with all these tags.
        labelled: The docstring loses to the annotation.

    Returns:
        The results.
    """
    return {"query": query, "limit": limit, "tags": tags, "colour": colour, "mode": mode, "origin": origin}


def test_schema_from_hints_and_docstring() -> None:
    spec = search.spec
    schema = spec.input_schema
    assert spec.name == "search" and spec.runtime is RuntimeKind.NATIVE
    assert spec.description == "Search the catalogue.\n\nFinds items by text; longer explanation an agent may want."
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for. Continues on a second line."}
    assert props["limit"] == {"type": "integer", "description": "At most this many results.", "default": 10}
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert props["mode"]["enum"] == ["fast", "exact"] and props["mode"]["default"] == "fast"
    assert props["colour"]["default"] == "red"
    assert props["labelled"]["description"] == "from the annotation"
    assert "$defs" in schema and {"Colour", "Point"} <= set(schema["$defs"])
    assert spec.effects == frozenset({EffectKind.NETWORK, EffectKind.USE_SECRET})
    assert spec.side_effecting is False
    assert spec.output_schema == {"type": "object", "additionalProperties": True}
    assert len(spec.definition_hash) == 64


def test_validation_coerces_to_python_types() -> None:
    args = search.validate({"query": "q", "limit": "5", "colour": "blue", "origin": {"x": "1", "y": 2}})
    assert args["limit"] == 5 and args["colour"] is Colour.BLUE and args["origin"] == Point(x=1, y=2)
    assert "mode" not in args  # the function's own default applies


def test_validation_errors_name_each_path_without_echoing_values() -> None:
    with pytest.raises(ArgumentsInvalid) as info:
        search.validate({"query": 3, "limit": "many", "origin": {"x": "sk-secret-value"}, "extra": 1})
    message = str(info.value)
    for path in ("query", "limit", "origin.x", "origin.y", "extra"):
        assert path in message
    assert "sk-secret-value" not in message and "Extra inputs are not permitted" in message
    with pytest.raises(ArgumentsInvalid, match="query: Field required"):
        search.validate({})


def test_bare_decorator_and_options() -> None:
    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    @tool(name="files.remove", description="Remove a file.", effects=["delete_filesystem"], inline=True)
    def remove(path: str) -> None:
        return None

    assert isinstance(ping, NativeTool) and ping.is_async and ping.spec.description == "Ping."
    assert ping.spec.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert ping.spec.output_schema is None
    assert remove.name == "files.remove" and remove.spec.description == "Remove a file."
    assert remove.spec.side_effecting is True and remove.inline and not remove.is_async
    with pytest.raises(ArgumentsInvalid, match="takes no arguments"):
        ping.validate({"x": 1})


def test_description_falls_back_to_the_name() -> None:
    @tool
    def undocumented(x: int) -> int:
        return x

    assert undocumented.spec.description == "undocumented"
    assert undocumented(x=2) == 2  # the tool object still calls the function


def test_host_context_parameter_is_injected_not_described() -> None:
    @tool
    def where(path: str, host: HostContext) -> str:
        return path

    @tool
    def maybe(ctx: HostContext | None = None) -> None:
        return None

    assert where.context_param == "host" and list(where.spec.input_schema["properties"]) == ["path"]
    assert maybe.context_param == "ctx" and maybe.spec.input_schema["properties"] == {}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x): pass", "no type annotation"),
        ("def f(*args: int): pass", "variadic positional"),
        ("def f(**kw: int): pass", "variadic keyword"),
        ("def f(x: int, /): pass", "positional-only"),
        ("def f(x: 'Undefined'): pass", "cannot read the signature"),
        ("class Opaque: pass\ndef f(x: Opaque): pass", "JSON Schema"),
    ],
)
def test_functions_that_cannot_be_described(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(UsageError, match=message):
        tool(namespace["f"])


def test_bad_names_effects_and_double_decoration() -> None:
    with pytest.raises(UsageError, match="invalid tool name"):
        tool(name="has space")(lambda: None)
    with pytest.raises(UsageError, match="unknown effect"):
        tool(name="x", effects=["teleport"])(lambda: None)
    with pytest.raises(UsageError, match="already a tool"):
        tool(search)


def test_docstring_styles() -> None:
    google = parse_docstring(
        """Summary line.

        Args:
            a: first
            b (list[int], optional): second
                continued
        Raises:
            ValueError: never
        """
    )
    assert google.description == "Summary line." and google.params == {"a": "first", "b": "second continued"}
    sphinx = parse_docstring("Do it.\n\n:param a: first\n:param int b: second\n:returns: nothing")
    assert sphinx.description == "Do it." and sphinx.params == {"a": "first", "b": "second"}
    assert parse_docstring(None).description == ""


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_docstring_parser_never_crashes(doc: str) -> None:
    parsed = parse_docstring(doc)
    assert isinstance(parsed.description, str)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.sampled_from(["query", "limit", "tags", "colour", "mode", "origin", "other"]), _json))
@settings(max_examples=300, deadline=None)
def test_argument_validation_only_raises_our_error(args: dict[str, Any]) -> None:
    try:
        validated = search.validate(args)
    except ArgumentsInvalid:
        return
    assert isinstance(validated["query"], str)
