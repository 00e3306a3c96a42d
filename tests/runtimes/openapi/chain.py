"""Helpers for the OpenAPI tests: a document saved as a service the way `pincer openapi add`
saves it (importing.read_service), a Pincer opened on that home, and calls through the whole chain."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.runtimes.openapi import Resolver, ServiceStore, load_document, read_service
from pincer.secrets.store import SecretStore
from pincer.service import Pincer

KEY = bytes(range(32))
CALL_TIMEOUT_S = 30.0
START_TIMEOUT_S = 10.0
ALLOW_ALL = '[[grants]]\ntool = "*"\ndefault = "allow"\n'


def add_document(home: Path, name: str, document: Mapping[str, Any], base_url: str, **options: Any) -> Any:
    """Save ``document`` as service ``name`` calling ``base_url``; returns the Imported."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / f"{name}.openapi.json"
    path.write_text(json.dumps(document))
    loaded, location = load_document(path)
    imported = read_service(name, loaded, location, base_url=base_url, resolver=Resolver(loaded, location), **options)
    ServiceStore(home).add(imported.service, replace_existing=True)
    return imported


def set_secrets(home: Path, values: Mapping[str, str]) -> None:
    with SecretStore.open(home, key=KEY) as store:
        for name, value in values.items():
            store.set(name, value)


def open_pincer(home: Path, grants: str = ALLOW_ALL, extra: str = "") -> Any:
    # The stand-ins are on loopback over plain http: only an operator's allow_private lets that through.
    config = parse_config(grants + "[network]\nallow_private = true\n" + extra, home=home)
    return Pincer.open(home, config=config, secret_key=KEY, builtins=False)


async def call(p: Pincer, tool: str, args: Mapping[str, Any]) -> Any:
    with anyio.fail_after(CALL_TIMEOUT_S):
        return await p.call(CallRequest(tool=tool, args=dict(args), caller="test"))


@contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """An ASGI app served by uvicorn on 127.0.0.1 and a free port, in a thread; yields its URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"uvicorn did not start within {START_TIMEOUT_S} s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
