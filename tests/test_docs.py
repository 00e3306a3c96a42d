"""The format pages in docs/ say what the code does: their examples parse, their names exist,
their numbers are the code's constants, and the README links them."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from pincer.core.capabilities import _SECTIONS, Capabilities
from pincer.core.effects import EffectKind
from pincer.runtimes.wasm.host import WORKSPACE_READ_MAX_BYTES
from pincer.runtimes.wasm.limits import MIB, WasmLimits, parse_tool_limits

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GUEST = ROOT / "src" / "pincer" / "runtimes" / "wasm" / "guest" / "pincer_guest.py"


def _blocks(text: str, language: str) -> list[str]:
    return [part.split("```", 1)[0] for part in text.split(f"```{language}\n")[1:]]


def test_readme_links_every_format_page() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in ("docs/config.md", "docs/capabilities.md", "docs/wasm-guest.md"):
        assert (ROOT / page).is_file(), page
        assert f"({page})" in readme, page


# -- docs/capabilities.md -------------------------------------------------------------------------

CAPABILITIES = (DOCS / "capabilities.md").read_text()


@pytest.mark.parametrize("block", _blocks(CAPABILITIES, "json"), ids=lambda b: b.split("\n", 2)[1][:40])
def test_every_capabilities_example_parses(block: str) -> None:
    Capabilities.from_json(block, source="docs/capabilities.md")


def test_the_flat_and_the_wrapped_form_grant_the_same() -> None:
    flat, wrapped = (Capabilities.from_json(b, source="doc") for b in _blocks(CAPABILITIES, "json")[:2])
    assert flat.http == wrapped.http and flat.secrets_allowed_names == wrapped.secrets_allowed_names
    assert wrapped.wit_version == "0.3.0" and flat.effects() == wrapped.effects()


def test_the_complete_example_has_the_effects_and_limits_it_claims() -> None:
    block = _blocks(CAPABILITIES, "json")[-1]
    caps = Capabilities.from_json(block, source="doc")
    assert caps.effects() == {EffectKind.NETWORK, EffectKind.USE_SECRET, EffectKind.READ_FILESYSTEM, EffectKind.DISPATCH_CAPABILITY}
    assert caps.http is not None and caps.http.rate_limit.requests_per_minute == 30 and caps.http.timeout_secs == 10
    limits = parse_tool_limits(json.loads(block)["limits"])
    assert limits is not None and limits.memory_bytes == 32 * MIB and limits.timeout_s == 5


def test_every_section_the_parser_reads_is_documented() -> None:
    for section in _SECTIONS:
        assert f"| `{section}` |" in CAPABILITIES, section
    assert "| `limits` |" in CAPABILITIES


def test_the_top_level_section_wins_as_documented() -> None:
    both = {"secrets": {"allowed_names": ["outer"]}, "capabilities": {"secrets": {"allowed_names": ["inner"]}, "workspace": {}}}
    caps = Capabilities.from_json(both, source="doc")
    assert caps.secrets_allowed_names == ("outer",) and caps.workspace_allowed_prefixes == ()


def test_the_capabilities_defaults_are_the_parsers() -> None:
    http = Capabilities.from_json({"http": {}}, source="doc").http
    assert http is not None
    assert f"| `max_request_bytes` | integer | {http.max_request_bytes:,} |" in CAPABILITIES
    assert f"| `max_response_bytes` | integer | {http.max_response_bytes:,} |" in CAPABILITIES
    assert f"| `timeout_secs` | integer >= 1 | {http.timeout_secs} |" in CAPABILITIES
    assert f"{http.rate_limit.requests_per_minute} a minute, {http.rate_limit.requests_per_hour:,} an hour" in CAPABILITIES


# -- docs/wasm-guest.md ---------------------------------------------------------------------------

GUEST_DOC = (DOCS / "wasm-guest.md").read_text()


def _guest_exports() -> list[str]:
    tree = ast.parse(GUEST.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("pincer_guest has no __all__")


@pytest.mark.parametrize("name", _guest_exports())
def test_every_guest_export_has_a_section(name: str) -> None:
    assert re.search(rf"^##+ `@?{name}\b", GUEST_DOC, re.M), name


def test_http_response_members_are_documented() -> None:
    tree = ast.parse(GUEST.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "HttpResponse")
    methods = [f.name for f in cls.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")]
    assert methods == ["text", "json"]
    for member in ("status", "headers", "body", "text()", "json()"):
        assert f"| `{member}` |" in GUEST_DOC, member


def test_the_guest_page_quotes_the_runtimes_limits() -> None:
    limits = WasmLimits()
    quoted = [
        f"| memory | {limits.memory_bytes // MIB} MiB | {limits.max_memory_bytes // MIB} MiB |",
        f"| fuel (instructions) | {limits.fuel:,} | {limits.max_fuel:,} |",
        f"{limits.timeout_s:g} s (a call's tool timeout",
        f"| {limits.max_timeout_s:g} s |",
        f"{limits.max_log_entries:,} entries per execution",
        f"past {limits.max_log_bytes:,} bytes",
        f"at most {limits.max_http_requests}\n   requests per execution",
        f"than {limits.max_invoke_depth} nested calls",
        f"{limits.max_output_bytes // MIB} MiB of JSON",
        f"larger\nthan {WORKSPACE_READ_MAX_BYTES // MIB} MiB",
    ]
    for text in quoted:
        assert text in GUEST_DOC, text


def test_the_guest_examples_named_exist() -> None:
    for path in re.findall(r"`(examples/wasm/[a-z_]+\.py)`", GUEST_DOC):
        assert (ROOT / path).is_file(), path


def test_the_annotated_config_is_a_valid_config(tmp_path: Path) -> None:
    from pincer.config_check import check_config_text

    (block,) = _blocks((DOCS / "config-example.md").read_text(), "toml")
    assert check_config_text(block.replace("<sha256 of the token>", "0" * 64), home=tmp_path) == []
