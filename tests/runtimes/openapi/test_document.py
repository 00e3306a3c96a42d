"""OpenAPI documents to tool definitions: parameters, bodies, refs, 3.0 -> JSON Schema 2020-12."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pincer.core.errors import ManifestError
from pincer.runtimes.openapi import Resolver, extract_operations, load_document, server_urls
from pincer.runtimes.openapi.document import parse_text

SPECS = Path(__file__).parent / "specs"


def operations_of(path: Path) -> dict:
    document, location = load_document(str(path))
    return {op.name: op for op in extract_operations(Resolver(document, location))}


def test_parameters_body_and_file_relative_refs() -> None:
    ops = operations_of(SPECS / "petstore.yaml")
    assert set(ops) == {"getPet", "delete_pets_petId", "addPet"}
    get = ops["getPet"]
    schema = get.input_schema
    # Same name in query and header: prefixed by place; a cookie is an argument like the others.
    assert set(schema["properties"]) == {"petId", "query_id", "header_id", "session"}
    assert schema["required"] == ["petId"] and schema["additionalProperties"] is False
    # 3.0's boolean exclusiveMinimum becomes the 2020-12 number form.
    assert schema["properties"]["petId"] == {"type": "integer", "exclusiveMinimum": 1}
    assert [(p.prop, p.name, p.location) for p in get.parameters] == [
        ("petId", "petId", "path"), ("query_id", "id", "query"), ("header_id", "id", "header"),
        ("session", "session", "cookie"),
    ]
    add = ops["addPet"]
    assert add.body is not None and add.body.media_type == "application/json" and add.body.required
    assert add.method == "POST"
    body = add.input_schema["properties"]["body"]
    defs = add.input_schema["$defs"]
    assert body == {"$ref": "#/$defs/Pet"} and set(defs) == {"Pet", "Person"}
    pet = defs["Pet"]
    assert pet["properties"]["tag"] == {"type": ["string", "null"]}  # nullable
    assert pet["properties"]["parent"] == {"$ref": "#/$defs/Pet"}  # recursion stays finite
    assert "example" not in pet["properties"]["name"] and "x-internal" not in defs["Person"]
    for op in ops.values():
        Draft202012Validator.check_schema(op.input_schema)
    validator = Draft202012Validator(add.input_schema)
    assert validator.is_valid({"body": {"name": "Rex", "tag": None, "parent": {"name": "Max"}}})
    assert not validator.is_valid({"body": {"tag": "x"}})


def test_server_variables_take_their_defaults() -> None:
    document, location = load_document(str(SPECS / "petstore.yaml"))
    assert server_urls(document, location) == ["https://eu.pets.example.com/v1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"swagger": "2.0"}', "Swagger 2.0 documents need converting"),
        ('{"openapi": "3.0.0", "paths": {"x": {}}}', "must start with '/'"),
        ('{"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"$ref": "#/nope"}]}}}}', "points at nothing"),
        ('{"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"$ref": "https://evil.example/x.json#/p"}]}}}}',
         "remote refs are not followed"),
        ('{"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"$ref": "../../etc/passwd#/x"}]}}}}',
         "not .json, .yaml or .yml"),
        ("openapi: [", "not valid JSON or YAML"),
    ],
)
def test_bad_documents_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "api.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError) as error:
        document, location = load_document(str(path))
        extract_operations(Resolver(document, location))
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_a_ref_loop_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.json"
    path.write_text(json.dumps({
        "openapi": "3.1.0",
        "paths": {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/A"}]}}},
        "components": {"parameters": {"A": {"$ref": "#/components/parameters/B"}, "B": {"$ref": "#/components/parameters/A"}}},
    }))
    with pytest.raises(ManifestError, match="loop"):
        document, location = load_document(str(path))
        extract_operations(Resolver(document, location))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["openapi", "paths", "/a", "get", "post", "parameters", "name", "in", "schema", "$ref",
                         "requestBody", "content", "application/json", "type", "nullable", "properties", "items",
                         "required", "operationId", "x", "#/a"]) | st.text(max_size=5),
        inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(paths=json_values, version=st.sampled_from(["3.0.3", "3.1.0"]))
def test_arbitrary_documents_only_raise_manifest_errors(tmp_path_factory: pytest.TempPathFactory, paths, version) -> None:
    directory = tmp_path_factory.mktemp("doc")
    path = directory / "api.json"
    path.write_text(json.dumps({"openapi": version, "paths": paths}))
    try:
        document, location = load_document(str(path))
        for op in extract_operations(Resolver(document, location)):
            Draft202012Validator.check_schema(op.input_schema)
    except ManifestError:
        pass


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes_parse_or_raise_manifest_error(raw: bytes) -> None:
    try:
        parse_text(raw, source="x")
    except ManifestError:
        pass
