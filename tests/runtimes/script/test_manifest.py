"""Script tool manifests: parsing with clear errors, and argv rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ArgumentsInvalid, ManifestError
from pincer.runtimes.script import NetworkMode, load_manifest, parse_manifest, render_command

BASE = {
    "name": "wc",
    "description": "count words",
    "command": ["/usr/bin/wc", "-w", "--", "{path}"],
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}

TOML = """
name = "word_count"
description = "Count words"
command = ["/usr/bin/wc", "-w", "--", "{path}"]
effects = ["read_filesystem"]
future_key = "ignored"

[input_schema]
type = "object"
required = ["path"]
[input_schema.properties.path]
type = "string"

[sandbox]
network = "allowlist"
allow_hosts = ["api.example.com", "*.example.org:8443"]
env = { LANG = "C.UTF-8" }
mounts = [{ source = "/srv/data", target = "/data", mode = "ro" }, { source = "/srv/out", target = "/out", mode = "rw" }]

[limits]
timeout_s = 5
memory_mb = 128
pids = 16
"""


def test_toml_manifest(tmp_path: Path) -> None:
    path = tmp_path / "wc.toml"
    path.write_text(TOML)
    m = load_manifest(path)
    assert m.name == "word_count"
    assert m.command == ("/usr/bin/wc", "-w", "--", "{path}")
    assert m.sandbox.network is NetworkMode.ALLOWLIST
    assert m.sandbox.allow_hosts == ("api.example.com", "*.example.org:8443")
    assert [(str(x.source), x.target, x.writable) for x in m.sandbox.mounts] == [
        ("/srv/data", "/data", False),
        ("/srv/out", "/out", True),
    ]
    assert m.limits.memory_bytes == 128 * 1024 * 1024 and m.limits.pids == 16 and m.limits.timeout_s == 5
    assert {e.value for e in m.effects} == {"read_filesystem", "network", "write_filesystem"}
    spec = m.to_spec()
    assert spec.runtime.value == "script" and spec.source == str(path)


def test_json_manifest_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "wc.json"
    path.write_text(json.dumps(BASE))
    m = load_manifest(path)
    assert m.sandbox.network is NetworkMode.NONE
    assert m.limits.output_bytes == 1024 * 1024


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"name": "no spaces"}, "name", "invalid tool name"),
        ({"command": []}, "command", "at least 1"),
        ({"command": ["{path}", "x"]}, "command.0", "cannot be a placeholder"),
        ({"command": ["/bin/echo", "{other}"]}, "command", "does not declare"),
        ({"command": ["/bin/echo", "{oops"]}, "command.1", "stray"),
        ({"input_schema": {"type": "array"}}, "input_schema.type", "object"),
        ({"input_schema": {"type": 5}}, "input_schema", "not a valid JSON Schema"),
        ({"effects": ["teleport"]}, "effects", "unknown effect"),
        ({"sandbox": {"network": "internet"}}, "sandbox.network", "none"),
        ({"sandbox": {"network": "allowlist"}}, "sandbox.allow_hosts", "at least one host"),
        ({"sandbox": {"allow_hosts": ["a.com"]}}, "sandbox.network", "only applies"),
        ({"sandbox": {"network": "allowlist", "allow_hosts": ["http://a.com/"]}}, "sandbox.allow_hosts.0", "invalid host"),
        ({"sandbox": {"mounts": [{"source": "rel", "target": "/d"}]}}, "sandbox.mounts.0.source", "absolute"),
        ({"sandbox": {"mounts": [{"source": "/a", "target": "/proc/x"}]}}, "sandbox.mounts.0.target", "reserved"),
        ({"sandbox": {"mounts": [{"source": "/a", "target": "/d", "mode": "rwx"}]}}, "sandbox.mounts.0.mode", "ro"),
        ({"sandbox": {"env": {"PATH": "/x"}}}, "sandbox.env.PATH", "cannot be declared"),
        ({"limits": {"memory_mb": 0}}, "limits.memory_mb", "greater than"),
        ({"limits": {"timeout_s": "soon"}}, "limits.timeout_s", "number"),
    ],
)
def test_bad_manifests_name_the_key(change: dict, key: str, words: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest({**BASE, **change}, source="t.json")
    assert caught.value.key == key
    assert words in caught.value.message
    assert caught.value.message.startswith(f"t.json: {key}: ")


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.toml"
    bad.write_text("name = ")
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_manifest(bad)
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.json")
    with pytest.raises(ManifestError, match="table/object"):
        parse_manifest([1, 2])


def test_render_command() -> None:
    template = ["/bin/tool", "--", "{files}", "--name={name}", "{opt}", "{{literal}}", "{n}"]
    argv = render_command(template, {"files": ["a b", "; rm -rf /"], "name": "x y", "n": 3})
    assert argv == ["/bin/tool", "--", "a b", "; rm -rf /", "--name=x y", "{literal}", "3"]
    assert render_command(["/bin/x", "{b}", "{o}"], {"b": True, "o": {"k": 1}}) == ["/bin/x", "true", '{"k":1}']
    with pytest.raises(ArgumentsInvalid, match="NUL"):
        render_command(["/bin/x", "{a}"], {"a": "x\0y"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_json_never_crashes_the_parser(data: object) -> None:
    try:
        parse_manifest(data, source="fuzz")
    except ManifestError as exc:
        assert exc.message.startswith("fuzz")


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(list(BASE) + ["sandbox", "limits", "effects", "schema"]), json_values, max_size=6))
def test_mutated_manifests_never_crash_the_parser(changes: dict) -> None:
    try:
        m = parse_manifest({**BASE, **changes}, source="fuzz")
    except ManifestError:
        return
    assert m.command and not any("{" in p for p in m.command[:1])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=5), st.dictionaries(st.sampled_from("abc"), json_values))
def test_rendering_is_total_over_valid_templates(template: list[str], args: dict) -> None:
    try:
        m = parse_manifest(
            {**BASE, "command": ["/bin/x", *template],
             "input_schema": {"type": "object", "properties": {k: {} for k in "abc"}}}, source="fuzz")  # fmt: skip
    except ManifestError:
        return
    try:
        argv = render_command(m.command, args)
    except ArgumentsInvalid:
        return
    assert argv[0] == "/bin/x"
    assert all(isinstance(a, str) for a in argv)
