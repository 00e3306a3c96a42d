"""A conformance suite over published example documents: ReadMe's ``@readme/oas-examples`` (npm,
installed by ``make builtins-deps``), which ships the OpenAPI Initiative's own examples
(petstore-expanded, uspto, callbacks, link-example, webhooks; no npm or PyPI package ships the
OAI's examples on their own) beside examples of every corner of 3.0 and 3.1: parameter styles,
cookies, file uploads, encodings, readOnly/writeOnly, every kind of security scheme, servers
at path and operation level.

Every document imports (one tool per operation, names within 64 characters, every input schema
a valid JSON Schema 2020-12) or is refused with a clear error; what each example is about is
checked in the stored tools; and requests to the OAI's examples, sent through the whole chain,
pass openapi-core's validation of the request against the same document on a real server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pincer.core.errors import ManifestError
from pincer.core.schema import schema_problem
from pincer.runtimes.openapi import OpenApiRuntime, Resolver, load_document, read_service
from pincer.runtimes.openapi.operations import METHODS
from pincer.runtimes.openapi.serialize import DEFAULT_STYLE
from tests.runtimes.openapi import validating
from tests.runtimes.openapi.chain import add_document, call, open_pincer

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[3] / ".cache" / "npm-openapi-docs" / "node_modules" / "@readme" / "oas-examples"
DOCUMENTS = sorted((EXAMPLES / "3.0" / "json").glob("*.json")) + sorted((EXAMPLES / "3.1" / "json").glob("*.json"))
TOOL_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def test_the_examples_are_installed() -> None:
    assert len(DOCUMENTS) >= 50, f"run `make builtins-deps` (expected @readme/oas-examples under {EXAMPLES})"


def _raw(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _operation_count(document: dict[str, Any]) -> int:
    """Operations counted in the raw document (a path item may be a local $ref)."""
    count = 0
    for item in (document.get("paths") or {}).values():
        if "$ref" in item:
            pointer = item["$ref"].removeprefix("#/").split("/")
            item = document
            for part in pointer:
                item = item[part.replace("~1", "/").replace("~0", "~")]
        count += sum(1 for method in METHODS if method in item)
    return count


def _imported(path: Path) -> Any:
    document, location = load_document(path)
    return read_service("ex", document, location, base_url="https://api.example.com", resolver=Resolver(document, location))


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_example_imports_with_one_tool_per_operation(path: Path) -> None:
    raw = _raw(path)
    if not raw.get("paths"):  # webhooks.json: webhooks only, which are calls the API makes
        with pytest.raises(ManifestError, match="no operations") as refused:
            _imported(path)
        assert "webhooks are requests the API makes" in (refused.value.hint or "")
        return
    service = _imported(path).service
    assert len(service.operations) == _operation_count(raw)
    names = [spec.name for spec in OpenApiRuntime([service]).tools()]
    assert len(names) == len(set(names)) == len(service.operations)
    assert all(TOOL_NAME.match(name) for name in names), [n for n in names if not TOOL_NAME.match(n)]
    for operation in service.operations:
        Draft202012Validator.check_schema(operation.input_schema)
        assert schema_problem(operation.input_schema) is None  # the chain's own validator can use it


def test_a_pattern_the_chains_validator_cannot_read_is_left_out_and_said() -> None:
    """ReadMe's schema-validation.json has an ECMA-262 pattern with a bare "{" that jsonschema-rs
    (the chain's validator) refuses: before, the tool was made and every call to it failed;
    now the pattern is left out (the API still checks it) and the note says so."""
    imported = _imported(EXAMPLES / "3.0" / "json" / "schema-validation.json")
    assert len(imported.service.operations) == 5
    (note,) = imported.notes
    assert note.startswith("paths./anything/strings.get: pattern '^(?:{[0-9a-fA-F]{4}") and "the API still checks it" in note


def _by_path(service: Any) -> dict[tuple[str, str], Any]:
    return {(op.method, op.path): op for op in service.operations}


def test_parameter_styles_are_kept_as_written() -> None:
    for version in ("3.0", "3.1"):
        path = EXAMPLES / version / "json" / "parameters-style.json"
        raw, service = _raw(path), _imported(path).service
        ops = _by_path(service)
        checked = 0
        for doc_path, item in raw["paths"].items():
            for method, operation in item.items():
                if method not in METHODS:
                    continue
                stored = {p.name: p for p in ops[(method.upper(), doc_path)].parameters}
                for param in [*item.get("parameters", []), *operation.get("parameters", [])]:
                    style = param.get("style", DEFAULT_STYLE[param["in"]])
                    got = stored[param["name"]]
                    assert (got.location, got.wire_style, got.explode) == (
                        param["in"], style, param.get("explode", style == "form")), (doc_path, param["name"])
                    checked += 1
        assert checked >= 20


def test_cookies_files_encodings_and_visibility() -> None:
    cookies = _by_path(_imported(EXAMPLES / "3.0" / "json" / "parameters-cookies.json").service)
    assert all(any(p.location == "cookie" for p in op.parameters) for op in cookies.values())
    uploads = _by_path(_imported(EXAMPLES / "3.0" / "json" / "file-uploads.json").service)
    png = uploads[("POST", "/anything/image-png")]
    assert png.body.kind == "binary" and png.body.media_type == "image/png"
    single = uploads[("POST", "/anything/multipart-formdata")]
    assert single.body.files == {"documentFile": False}
    assert uploads[("PUT", "/anything/multipart-formdata")].body.files == {"filename": True}
    for version in ("3.0", "3.1"):
        (encoded,) = _imported(EXAMPLES / version / "json" / "schema-encoding-style.json").service.operations
        assert encoded.body is not None and encoded.body.encoding, version
    raw = _raw(EXAMPLES / "3.0" / "json" / "schema-visibility.json")
    read_only = re.findall(r'"(\w+)": \{[^{}]*"readOnly": true', json.dumps(raw))
    assert read_only
    (visible,) = _imported(EXAMPLES / "3.0" / "json" / "schema-visibility.json").service.operations
    text = json.dumps(visible.input_schema)
    assert not any(f'"{name}"' in text for name in read_only if name not in ("readOnly",)), read_only


def test_every_security_scheme_kind_is_read() -> None:
    for version in ("3.0", "3.1"):
        service = _imported(EXAMPLES / version / "json" / "security.json").service
        kinds = {s.key: (s.type, s.unsupported) for s in service.schemes}
        assert kinds["apiKey_cookie"] == ("apiKey", None) and kinds["basic"] == ("http", None)
        assert kinds["oauth2_clientCredentials"] == ("oauth2", None) and kinds["openIdConnect"] == ("openIdConnect", None)
        if version == "3.1":
            assert kinds["mutualTLS"][1] == "mutual TLS client certificates"
        # Every operation's security names the schemes the document gives it.
        raw = _raw(EXAMPLES / version / "json" / "security.json")
        for op in service.operations:
            declared = raw["paths"][op.path][op.method.lower()].get("security", raw.get("security"))
            assert [sorted(alt) for alt in op.security or ()] == [sorted(alt) for alt in declared or ()]


# -- requests checked by openapi-core against the same document ---------------------------------

CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "petstore-expanded.json": [
        ("findPets", {"tags": ["dog", "cat"], "limit": 3}),
        ("addPet", {"body": {"name": "Rex", "tag": "dog"}}),
        ("find_pet_by_id", {"id": 5}),
        ("deletePet", {"id": 5}),
    ],
    "uspto.json": [
        ("list_data_sets", {}),
        ("list_searchable_fields", {"dataset": "oa_citations", "version": "v1"}),
        ("perform_search", {"dataset": "oa_citations", "version": "v1",
                            "body": {"criteria": "patentNumber:[1 TO 9] & more", "start": 0, "rows": 10}}),
    ],
    "link-example.json": [
        ("getUserByName", {"username": "ana b"}),
        ("getRepositoriesByOwner", {"username": "ana"}),
        ("mergePullRequest", {"username": "ana", "slug": "r-1", "pid": "7"}),
    ],
    "callbacks.json": [("post_streams", {"callbackUrl": "https://client.example.com/cb?x=1&y=2"})],
    # ReadMe's, not the OAI's: uploads. (Its integer parts are left out: openapi-core compares a
    # multipart text part with "type: integer" without casting it, and refuses "1".)
    "file-uploads.json": [
        ("post_anything_image_png", {"body": {"base64": "iVBORw0KGgoAAAANSUhEUg=="}}),
        ("post_anything_multipart_formdata", {"body": {"documentFile": {"base64": "AAEC/w==", "filename": "a.bin"}}}),
        ("put_anything_multipart_formdata", {"body": {"filename": [{"base64": "AAEC"}, {"base64": "AwQ="}]}}),
    ],
}


@pytest.mark.parametrize("name", sorted(CALLS))
async def test_requests_to_the_oai_examples_pass_openapi_core(tmp_path: Path, name: str) -> None:
    raw = _raw(EXAMPLES / "3.0" / "json" / name)
    with validating.serve(raw) as server:
        home = tmp_path / "home"
        add_document(home, "oai", raw, server.base_url)
        async with open_pincer(home) as p:
            for tool, args in CALLS[name]:
                result = await call(p, f"oai_{tool}", args)
                assert result.ok, (tool, result.error, server.seen[-1:] if server.seen else None)
    assert len(server.seen) == len(CALLS[name]) and all(not c.errors for c in server.seen), server.seen
