"""The pure built-ins: echo, time, json (and its path language)."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.effects import EffectKind
from pincer.core.errors import ArgumentsInvalid, ToolError, UsageError
from pincer.core.values import HostContext
from pincer.runtimes.native.builtins import BUILTIN_TOOLS, builtin_runtime
from pincer.runtimes.native.jsonpath import format_path, parse_path

pytestmark = pytest.mark.anyio

HOST = HostContext(session="main", tool="builtin")


async def call(name: str, args: dict[str, Any], host: HostContext = HOST) -> Any:
    runtime = builtin_runtime()
    spec = next(s for s in runtime.tools() if s.name == name)
    return (await runtime.invoke(spec, args, host)).value


def test_the_builtin_set() -> None:
    specs = {s.name: s for s in builtin_runtime().tools()}
    assert set(specs) == {"echo", "time", "json", "http", "read_file", "write_file", "list_dir"}
    assert len(BUILTIN_TOOLS) == 7 and {s.source for s in specs.values()} == {"builtin"}
    assert specs["echo"].effects == specs["time"].effects == specs["json"].effects == frozenset()
    assert specs["http"].effects == {EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE} and specs["http"].side_effecting
    assert specs["http"].effects_for({"method": "GET"}) == {EffectKind.NETWORK}  # a GET only reads
    assert specs["read_file"].effects == specs["list_dir"].effects == {EffectKind.READ_FILESYSTEM}
    assert specs["write_file"].effects == {EffectKind.WRITE_FILESYSTEM} and specs["write_file"].side_effecting
    assert not specs["read_file"].side_effecting
    for spec in specs.values():
        assert spec.input_schema["additionalProperties"] is False
        assert spec.description and all(p.get("description") for p in spec.input_schema["properties"].values())


async def test_echo_returns_its_input() -> None:
    assert await call("echo", {"text": "héllo\n"}) == {"text": "héllo\n"}
    with pytest.raises(ArgumentsInvalid):
        await call("echo", {"text": "a", "more": 1})


async def test_time_in_utc_and_a_zone() -> None:
    before = dt.datetime.now(dt.UTC).timestamp()
    utc = await call("time", {})
    after = dt.datetime.now(dt.UTC).timestamp()
    assert utc["timezone"] == "UTC" and utc["utc_offset"] == "+0000" and before <= utc["unix"] <= after + 1
    tokyo = await call("time", {"timezone": "Asia/Tokyo"})
    parsed = dt.datetime.fromisoformat(tokyo["iso"])
    assert parsed.utcoffset() == dt.timedelta(hours=9) and tokyo["utc_offset"] == "+0900"
    berlin = await call("time", {"timezone": "Europe/Berlin"})
    expected = dt.datetime.fromtimestamp(berlin["unix"], zoneinfo.ZoneInfo("Europe/Berlin")).utcoffset()
    assert dt.datetime.fromisoformat(berlin["iso"]).utcoffset() == expected


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "/etc/localtime", ""])
async def test_time_unknown_zone(zone: str) -> None:
    if zone == "":
        assert (await call("time", {"timezone": zone}))["timezone"] == "UTC"
        return
    with pytest.raises(UsageError, match="unknown time zone") as info:
        await call("time", {"timezone": zone})
    assert "IANA" in (info.value.hint or "")


async def test_json_queries() -> None:
    document = json.dumps({"a": {"b": [{"c": 1}, {"c": [True, None]}]}, "x.y": 2, "list": [1, 2, 3]})
    assert (await call("json", {"document": document, "path": "a.b[0].c"}))["value"] == 1
    assert (await call("json", {"document": document, "path": "$.a.b[-1].c[0]"}))["value"] is True
    assert (await call("json", {"document": document, "path": '["x.y"]'}))["value"] == 2
    assert (await call("json", {"document": document, "path": "list.2"}))["value"] == 3
    whole = await call("json", {"document": document})
    assert whole == {"path": "$", "value": json.loads(document)}


@pytest.mark.parametrize(
    ("document", "path", "error", "message"),
    [
        ('{"a": 1,}', "", UsageError, "not valid JSON: .* at line 1 column 9"),
        ('{"a": NaN}', "", UsageError, "NaN is not JSON"),
        ("[" * 100_000, "", UsageError, "not valid JSON"),
        ('{"a": {"b": 1}}', "a.c", ToolError, r"\$\.a has no key 'c'"),
        ('{"a": [1, 2]}', "a[2]", ToolError, "out of range: the list has 2 items"),
        ('{"a": [1, 2]}', "a.k", ToolError, "is a list"),
        ('{"a": "s"}', "a.b", ToolError, "is a str, which has no 'b'"),
        ('{"a": null}', "a[0]", ToolError, "is a null"),
        ('{"a": 1}', "a..b", UsageError, "a key is missing"),
        ('{"a": 1}', "a[x]", UsageError, "not an integer index"),
        ('{"a": 1}', "a[0", UsageError, "not closed"),
    ],
)
async def test_json_errors_are_clear(document: str, path: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as info:
        await call("json", {"document": document, "path": path})
    assert info.value.hint  # type: ignore[attr-defined]


@given(st.text(max_size=60))
@settings(max_examples=500, deadline=None)
def test_path_parser_only_raises_usage_errors(text: str) -> None:
    try:
        steps = parse_path(text)
    except UsageError:
        return
    assert parse_path(format_path(steps)) == steps  # printing a path reads back the same


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


@given(_json, st.lists(st.one_of(st.text(max_size=4), st.integers(-4, 4)), max_size=4))
@settings(max_examples=300, deadline=None)
async def test_json_tool_finds_or_explains(document: Any, steps: list[Any]) -> None:
    path = format_path(tuple(steps))
    try:
        result = await call("json", {"document": json.dumps(document), "path": path})
    except ToolError:
        return
    value = document
    for step in steps:
        value = value[step] if not isinstance(value, list) or isinstance(step, int) else value[int(step)]
    assert result["value"] == value
