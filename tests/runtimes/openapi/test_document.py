"""OpenAPI documents to tool definitions: parameters, bodies, refs, 3.0 -> JSON Schema 2020-12."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from pincer.core.errors import ManifestError, UsageError
from pincer.runtimes.openapi import Resolver, extract_operations, load_document, read_service, server_urls
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


def _service_of(tmp_path: Path, document: dict) -> Any:
    path = tmp_path / "api.json"
    path.write_text(json.dumps(document))
    loaded, location = load_document(str(path))
    return read_service("svc", loaded, location, base_url="https://api.example.com", resolver=Resolver(loaded, location))


def _op(**fields: Any) -> dict:
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
            "paths": {"/a/{id}": {"get": {"responses": {"200": {"description": "ok"}}, **fields}}}}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_op(parameters=[{"name": "id", "in": "path", "style": "form", "schema": {}}]),
         "style 'form' is not defined for path parameters (allowed: simple, label, matrix)"),
        (_op(parameters=[{"name": "q", "in": "query", "style": "matrix", "schema": {}}]),
         "style 'matrix' is not defined for query parameters"),
        (_op(parameters=[{"name": "q", "in": "body", "schema": {}}]), "'in' must be one of path, query, header, cookie"),
        (_op(security={"k": []}), "'security' must be a list of requirement objects"),
        ({**_op(), "components": {"securitySchemes": {"k": {"type": "apiKey", "in": "body", "name": "x"}}}},
         "an apiKey scheme's 'in' must be header, query or cookie, not 'body'"),
        ({**_op(), "components": {"securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "a b"}}}},
         "an apiKey scheme needs a usable 'name' for its header"),
        ({**_op(), "components": {"securitySchemes": {"k": {"type": "oauth2"}}}}, "an oauth2 scheme needs 'flows'"),
        ({**_op(), "components": {"securitySchemes": {"k": {"type": "oauth2", "flows": {"clientCredentials": {}}}}}},
         "flow clientCredentials has no tokenUrl"),
        ({**_op(), "components": {"securitySchemes": {"k": {"type": "saml"}}}},
         "security scheme type 'saml' is not apiKey, http, oauth2, openIdConnect or mutualTLS"),
        ({**_op(), "components": {"securitySchemes": {"k": {"type": "openIdConnect"}}}},
         "an openIdConnect scheme needs 'openIdConnectUrl'"),
    ],
)
def test_bad_parameters_and_security_are_clear_errors(tmp_path: Path, document: dict, message: str) -> None:
    with pytest.raises(ManifestError) as error:
        _service_of(tmp_path, document)
    assert message in str(error.value)


SCHEME_VALUES = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["apiKey", "http", "oauth2", "openIdConnect", "mutualTLS", "x"]) | json_values,
    "in": st.sampled_from(["header", "query", "cookie", "path"]) | json_values,
    "name": st.sampled_from(["X-Key", "key", "a b", ""]) | json_values,
    "scheme": st.sampled_from(["basic", "bearer", "digest", ""]) | json_values,
    "flows": st.fixed_dictionaries({}, optional={
        "clientCredentials": st.fixed_dictionaries({}, optional={"tokenUrl": st.just("https://a/t") | json_values,
                                                                 "scopes": json_values}),
        "authorizationCode": json_values}) | json_values,
    "openIdConnectUrl": st.just("https://a/.well-known/openid-configuration") | json_values,
})
PARAMETER = st.fixed_dictionaries({"name": st.sampled_from(["id", "q", "X-H", "c", "body"]) | json_values}, optional={
    "in": st.sampled_from(["path", "query", "header", "cookie"]) | json_values,
    "style": st.sampled_from(["form", "simple", "label", "matrix", "deepObject", "pipeDelimited"]) | json_values,
    "explode": st.booleans() | json_values,
    "allowReserved": st.booleans() | json_values,
    "schema": json_values,
    "content": st.dictionaries(st.sampled_from(["application/json", "text/plain"]), json_values, max_size=1) | json_values,
})
BODY = st.fixed_dictionaries({"content": st.dictionaries(
    st.sampled_from(["application/json", "multipart/form-data", "application/x-www-form-urlencoded",
                     "application/octet-stream", "text/plain", "image/*"]),
    st.fixed_dictionaries({}, optional={"schema": json_values, "encoding": json_values}) | json_values, max_size=3)},
    optional={"required": st.booleans() | json_values}) | json_values


@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(
    schemes=st.dictionaries(st.sampled_from(["k", "b", "o"]), SCHEME_VALUES | json_values, max_size=3) | json_values,
    security=st.lists(st.dictionaries(st.sampled_from(["k", "b", "o", "nope"]), st.lists(st.text(max_size=3))
                                      | json_values, max_size=2), max_size=3) | json_values,
    parameters=st.lists(PARAMETER, max_size=4) | json_values,
    body=BODY,
)
def test_arbitrary_security_parameters_and_bodies_only_raise_clear_errors(
    tmp_path_factory: pytest.TempPathFactory, schemes: Any, security: Any, parameters: Any, body: Any
) -> None:
    """Documents made of every key pincer reads, each a valid value or junk: either a service
    with valid 2020-12 input schemas and names, or a ManifestError/UsageError naming the problem."""
    operation = {"parameters": parameters, "requestBody": body, "security": security,
                 "responses": {"200": {"description": "ok"}}}
    document = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
                "components": {"securitySchemes": schemes}, "paths": {"/a/{id}": {"post": operation}}}
    try:
        service = _service_of(tmp_path_factory.mktemp("doc"), document).service
    except (ManifestError, UsageError) as exc:
        assert exc.message
        return
    for op in service.operations:
        Draft202012Validator.check_schema(op.input_schema)
    assert all(len(name) <= 64 for name in service.tool_names())


def test_an_operation_whose_schema_is_not_json_schema_is_left_out_and_said(tmp_path: Path) -> None:
    """Found by the property test above: `required: null` was copied into the tool's schema, a
    tool no call could be validated against. Now it is left out, with a note saying why."""
    document = _op()
    document["paths"]["/b"] = {"post": {"operationId": "bad", "responses": {"200": {"description": "ok"}},
                                        "requestBody": {"content": {"application/json": {"schema": {"required": None}}}}}}
    imported = _service_of(tmp_path, document)
    assert [op.path for op in imported.service.operations] == ["/a/{id}"]
    assert imported.notes == ('paths./b.post: left out, its parameters and body are not a valid JSON Schema '
                              '(null is not of type "array")',)
