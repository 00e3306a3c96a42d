"""Request bodies as the document says, against a real FastAPI app (Starlette parses what pincer
sends): multipart uploads of workspace files byte for byte, raw octet-stream bodies, forms;
readOnly properties left out of what a caller sends and writeOnly ones out of what comes back.

Failed before the fix: multipart/form-data and application/octet-stream bodies were dropped from
the tool's schema ("upload operations cannot send their file"), a readOnly ``id`` stayed
required, a writeOnly ``password`` came back in the output.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from pincer.cli.main import app as cli
from pincer.core.effects import EffectKind
from tests.runtimes.openapi import uploads_app
from tests.runtimes.openapi.chain import KEY, add_document, call, open_pincer, serve_app

pytestmark = pytest.mark.anyio

# Every byte value, twice, and an odd tail: nothing text-like survives a lossy path intact.
PAYLOAD = bytes(range(256)) * 2 + b"\r\n--\x00\xff tail"


@pytest.fixture
def api() -> Iterator[str]:
    uploads_app.RECEIVED.clear()
    with serve_app(uploads_app.app) as url:
        yield url


async def add_uploads(home: Path, api: str) -> dict:
    """`pincer openapi add` of the app's own document, as a user runs it."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[network]\nallow_private = true\n")
    spec = home / "uploads.json"
    spec.write_text(json.dumps(uploads_app.app.openapi()))
    env = {"PINCER_HOME": str(home), "PINCER_SECRET_KEY": KEY.hex()}
    args = ["openapi", "add", "up", "--spec", str(spec), "--base-url", api, "--json"]
    # In a worker thread: the CLI runs its own event loop.
    result = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, args, env=env))
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


async def test_a_multipart_upload_of_a_workspace_file_arrives_byte_for_byte(tmp_path: Path, api: str) -> None:
    home = tmp_path / "home"
    await add_uploads(home, api)
    async with open_pincer(home) as p:
        spec = p.registry.get("up_uploadFile")
        assert EffectKind.READ_FILESYSTEM in spec.effects  # a grant decides whether it may read files
        body = spec.input_schema["properties"]["body"]
        assert body["properties"]["file"]["oneOf"] == [{"required": ["path"]}, {"required": ["base64"]}]
        workspace = p.config.workspace
        (workspace / "in").mkdir()
        (workspace / "in" / "blob.bin").write_bytes(PAYLOAD)
        result = await call(p, "up_uploadFile", {"body": {"file": {"path": "in/blob.bin"}, "note": "héllo, wörld",
                                                           "tags": ["a b", "c,d"]}})
        assert result.ok, result.error
        assert uploads_app.RECEIVED["blob.bin"] == PAYLOAD
        assert result.output == {"name": "blob.bin", "size": len(PAYLOAD), "sha256": hashlib.sha256(PAYLOAD).hexdigest(),
                                 "content_type": "application/octet-stream", "note": "héllo, wörld", "tags": ["a b", "c,d"]}
        # Bytes given inline, with a name and type of the caller's.
        inline = {"base64": base64.b64encode(PAYLOAD[::-1]).decode(), "filename": "r.png", "content_type": "image/png"}
        result = await call(p, "up_uploadFile", {"body": {"file": inline, "note": "n"}})
        assert result.ok and uploads_app.RECEIVED["r.png"] == PAYLOAD[::-1] and result.output["content_type"] == "image/png"
        # An array of files: one part each.
        (workspace / "second.txt").write_bytes(b"second\n")
        result = await call(p, "up_uploadFiles", {"body": {"files": [{"path": "in/blob.bin"}, {"path": "second.txt"}]}})
        assert result.ok and [f["name"] for f in result.output] == ["blob.bin", "second.txt"]
        assert uploads_app.RECEIVED["second.txt"] == b"second\n"


async def test_files_are_read_under_the_file_tools_rules(tmp_path: Path, api: str) -> None:
    """Attack: an upload argument naming a file outside the workspace (absolute, '..', a symlink
    out, a hard link to it: the one opener of the file tools, issue 34) is refused before
    anything is read or sent."""
    home = tmp_path / "home"
    await add_uploads(home, api)
    outside = tmp_path / "secret.txt"
    outside.write_text("not for upload")
    async with open_pincer(home) as p:
        os.symlink(outside, p.config.workspace / "link.txt")
        os.link(outside, p.config.workspace / "hard.txt")
        for path, code in ((str(outside), "denied"), ("../secret.txt", "denied"), ("link.txt", None),
                           ("hard.txt", None), ("missing.bin", None)):
            result = await call(p, "up_uploadFile", {"body": {"file": {"path": path}, "note": "x"}})
            assert not result.ok, path
            if code:
                assert result.error["code"] == code, result.error
        result = await call(p, "up_uploadFile", {"body": {"file": {"base64": "not base64!"}, "note": "x"}})
        assert not result.ok and "base64" in result.error["message"]
    assert uploads_app.RECEIVED == {}


async def test_a_file_over_the_request_limit_is_refused_before_it_is_read(tmp_path: Path, api: str) -> None:
    home = tmp_path / "home"
    await add_uploads(home, api)
    async with open_pincer(home, extra="[openapi]\nmax_request_bytes = 4096\n") as p:
        (p.config.workspace / "big.bin").write_bytes(b"x" * 5000)
        result = await call(p, "up_uploadFile", {"body": {"file": {"path": "big.bin"}, "note": "x"}})
        assert not result.ok and "5000 bytes" in result.error["message"]
        assert "[openapi] max_request_bytes" in result.error["hint"]
    assert uploads_app.RECEIVED == {}


async def test_octet_stream_and_form_bodies(tmp_path: Path, api: str) -> None:
    home = tmp_path / "home"
    await add_uploads(home, api)
    async with open_pincer(home) as p:
        (p.config.workspace / "raw.bin").write_bytes(PAYLOAD)
        result = await call(p, "up_putBlob", {"name": "raw", "body": {"path": "raw.bin"}})
        assert result.ok, result.error
        assert uploads_app.RECEIVED["raw"] == PAYLOAD and result.output["content_type"] == "application/octet-stream"
        result = await call(p, "up_login", {"body": {"username": "ana & bo", "password": "p=1+2 %"}})
        assert result.ok and result.output == {"username": "ana & bo", "password_length": 7}


READ_WRITE_ONLY = {
    "openapi": "3.0.3",
    "info": {"title": "users", "version": "1"},
    "paths": {"/users": {"post": {
        "operationId": "createUser",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}},
        "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}}},
    }}},
    "components": {"schemas": {
        "Id": {"type": "integer", "readOnly": True},
        "User": {"type": "object", "required": ["id", "name", "password"], "properties": {
            "id": {"$ref": "#/components/schemas/Id"},
            "created": {"type": "boolean", "readOnly": True},
            "name": {"type": "string"},
            "password": {"type": "string", "writeOnly": True},
            "profile": {"type": "object", "properties": {"secret_answer": {"type": "string", "writeOnly": True},
                                                         "bio": {"type": "string"}}},
        }},
    }},
}


async def test_read_only_is_not_asked_for_and_write_only_does_not_come_back(tmp_path: Path, api: str) -> None:
    home = tmp_path / "home"
    add_document(home, "users", READ_WRITE_ONLY, api)
    async with open_pincer(home) as p:
        user = p.registry.get("users_createUser").input_schema["$defs"]["User"]
        assert set(user["properties"]) == {"name", "password", "profile"} and user["required"] == ["name", "password"]
        result = await call(p, "users_createUser", {"body": {"name": "ana", "password": "hunter2"}})
        assert result.ok, result.error
        # The API echoed the password (writeOnly) and a nested writeOnly answer: both taken out.
        assert result.output == {"id": 7, "created": True, "name": "ana", "profile": {"bio": "hi"}}
