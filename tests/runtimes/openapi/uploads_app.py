"""A real FastAPI app that takes uploads, forms and raw bodies; its own OpenAPI document (FastAPI
writes multipart files as binary strings) is what pincer reads. Starlette parses the multipart
bodies with python-multipart: nothing of pincer's decodes what pincer sent."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import FastAPI, File, Form, Request, UploadFile

app = FastAPI(title="Uploads", version="1.0")
RECEIVED: dict[str, bytes] = {}  # file name -> the bytes as the server parsed them


def _described(name: str, data: bytes, content_type: str | None) -> dict[str, Any]:
    RECEIVED[name] = data
    return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_type": content_type}


@app.post("/files", operation_id="uploadFile", summary="Upload one file with a note")
async def upload_file(
    file: Annotated[UploadFile, File()], note: Annotated[str, Form()], tags: Annotated[list[str], Form()] = []  # noqa: B006
) -> dict[str, Any]:
    data = await file.read()
    return {**_described(file.filename or "", data, file.content_type), "note": note, "tags": tags}


@app.post("/files/many", operation_id="uploadFiles")
async def upload_files(files: Annotated[list[UploadFile], File()]) -> list[dict[str, Any]]:
    return [_described(f.filename or "", await f.read(), f.content_type) for f in files]


@app.put(
    "/blobs/{name}",
    operation_id="putBlob",
    openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {"schema": {}}}}},
)
async def put_blob(name: str, request: Request) -> dict[str, Any]:
    return _described(name, await request.body(), request.headers.get("content-type"))


@app.post("/login", operation_id="login")
async def login(username: Annotated[str, Form()], password: Annotated[str, Form()]) -> dict[str, Any]:
    return {"username": username, "password_length": len(password)}


@app.post("/users", operation_id="createUser", status_code=201)
async def create_user(request: Request) -> dict[str, Any]:
    sent = await request.json()
    # What a careless API does: echoes the password back. The document marks it writeOnly.
    return {"id": 7, "created": True, **sent, "profile": {"secret_answer": "blue", "bio": "hi"}}
