"""A reverse proxy that adds ``Authorization: Bearer <token>`` and changes nothing else.

The conformance suite cannot send a bearer token, and pincer refuses every request without one.
This proxy sits between them so the suite tests pincer exactly as configured (token required):
Host, Origin and every other header pass through unchanged, bodies stream both ways, and a
client that hangs up closes the upstream request too.

    python auth_proxy.py --upstream http://127.0.0.1:PORT --token-file HOME/gateway.token

prints ``{"url": "http://127.0.0.1:PROXYPORT"}`` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn

UPSTREAM_CONNECT_TIMEOUT_S = 10.0
_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade", b"content-length"}


def make_app(upstream: str, token: str) -> Any:
    client = httpx.AsyncClient(
        base_url=upstream, timeout=httpx.Timeout(None, connect=UPSTREAM_CONNECT_TIMEOUT_S), trust_env=False
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.extend(message.get("body", b""))
            if not message.get("more_body", False):
                break
        # Surrounding whitespace is not part of a field value (RFC 9110 5.5), and httpx refuses it.
        headers = [
            (k, v.strip(b" \t")) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP | {b"authorization"}
        ]
        headers.append((b"authorization", f"Bearer {token}".encode()))
        target = scope["raw_path"].decode() + (("?" + scope["query_string"].decode()) if scope["query_string"] else "")
        request = client.build_request(scope["method"], target, headers=headers, content=bytes(body))
        response = await client.send(request, stream=True)
        try:
            async with anyio.create_task_group() as tg:

                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(watch_disconnect)
                out = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP]
                await send({"type": "http.response.start", "status": response.status_code, "headers": out})
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--token-file", required=True)
    options = parser.parse_args()
    token = Path(options.token_file).read_text(encoding="utf-8").strip()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(options.upstream, token), log_level="warning", lifespan="on"))

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            while not server.started:
                await anyio.sleep(0.01)
            sys.stdout.write(json.dumps({"url": f"http://127.0.0.1:{port}"}) + "\n")
            sys.stdout.flush()

    anyio.run(run)


if __name__ == "__main__":
    main()
