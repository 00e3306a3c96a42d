"""Real HTTP(S) servers on 127.0.0.1:0 for the egress and http-tool tests.

Each server records the requests it received. Routes:

* ``/echo...``: a JSON description of the request (method, path, headers, body)
* ``/redirect?to=URL``: 302 to URL
* ``/bytes?n=N``: N bytes of ``a``
* ``/binary``: bytes 0..255
* ``/mirror?header=NAME&how=HOW``: the request's NAME header transformed (``TRANSFORMS``), as text
* ``/slow``: waits until the server stops (bounded by SLOW_HANDLER_MAX_WAIT_S), then 200
* ``/page``: a small HTML page (``PAGE_HTML``: a title, a heading, a button), for browsers and fetchers
* anything else: 404
"""

from __future__ import annotations

import base64
import codecs
import datetime as dt
import json
import ssl
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SLOW_HANDLER_MAX_WAIT_S = 10.0
PAGE_TITLE = "Pincer test page"
PAGE_HTML = (
    f"<!doctype html><html><head><title>{PAGE_TITLE}</title></head>"
    "<body><h1>Hello from the page</h1><p>One paragraph of text.</p><button>Press me</button></body></html>"
)
SERVER_STOP_TIMEOUT_S = 5.0
SERVER_POLL_INTERVAL_S = 0.02  # how quickly shutdown() is noticed


def _split(value: str) -> str:
    middle = len(value) // 2
    return f"first part: {value[:middle]}\n(some unrelated text here)\nsecond part: {value[middle:]}"


# How a hostile endpoint may echo a credential back to get it past a literal search.
TRANSFORMS: dict[str, Callable[[str], str]] = {
    "reversed": lambda v: v[::-1],
    "spaced": lambda v: " ".join(v),
    "upper": str.upper,
    "rot13": lambda v: codecs.encode(v, "rot13"),
    "split": _split,
    "u-escaped": lambda v: "".join(f"\\u{ord(c):04x}" for c in v),
    "x-escaped": lambda v: "".join(f"\\x{b:02x}" for b in v.encode()),
    "base32": lambda v: base64.b32encode(v.encode()).decode(),
    "base32-lower": lambda v: base64.b32encode(b"pad" + v.encode()).decode().lower(),
    "zero-width": lambda v: "\u200d".join(v),
    "hex-mixed": lambda v: "".join(c.upper() if i % 2 else c for i, c in enumerate(v.encode().hex())),
    "base64-wrapped": lambda v: "\n".join(textwrap.wrap(base64.b64encode(v.encode()).decode(), 8)),
    "reversed-upper-spaced": lambda v: " ".join(v[::-1].upper()),
}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    line: str = ""  # the request line as received, e.g. "GET /echo?a=1 HTTP/1.1"


@dataclass
class LocalServer:
    server: ThreadingHTTPServer
    scheme: str
    requests: list[Recorded] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"


class _Handler(BaseHTTPRequestHandler):
    server_state: LocalServer  # set on the subclass made per server
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        state = self.server_state
        state.requests.append(Recorded(self.command, self.path, dict(self.headers.items()), body, self.requestline))
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path.startswith("/echo"):
            payload = {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers.items()),
                "body": body.decode("utf-8", "replace"),
            }
            self._reply(200, json.dumps(payload).encode(), "application/json")
        elif url.path == "/redirect":
            self._reply(302, b"", "text/plain", extra={"Location": query["to"][0]})
        elif url.path == "/bytes":
            self._reply(200, b"a" * int(query["n"][0]), "text/plain")
        elif url.path == "/mirror":
            value = self.headers.get(query["header"][0], "")
            self._reply(200, TRANSFORMS[query["how"][0]](value).encode(), "text/plain; charset=utf-8")
        elif url.path == "/page":
            self._reply(200, PAGE_HTML.encode(), "text/html; charset=utf-8")
        elif url.path == "/binary":
            self._reply(200, bytes(range(256)), "application/octet-stream")
        elif url.path == "/slow":
            state.stopping.wait(SLOW_HANDLER_MAX_WAIT_S)
            self._reply(200, b"late", "text/plain")
        else:
            self._reply(404, b"not found", "text/plain")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _handle

    def _reply(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # failed TLS handshakes are part of the tests; no tracebacks on stderr


@contextmanager
def running(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """Serve ``server`` in a daemon thread until the block ends (the stand-ins of other tests)."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": SERVER_POLL_INTERVAL_S}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(SERVER_STOP_TIMEOUT_S)


@contextmanager
def serve(*, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> Iterator[LocalServer]:
    handler = type("Handler", (_Handler,), {})
    server = _QuietServer((host, 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    state = LocalServer(server=server, scheme="https" if tls else "http")
    handler.server_state = state
    with running(server):
        try:
            yield state
        finally:
            state.stopping.set()  # /slow handlers end before the server waits for them


@dataclass
class TestCA:
    """A throwaway CA and a server certificate for the given DNS names, made in the test run."""

    __test__ = False
    ca_pem: bytes
    cert_path: Path
    key_path: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem.decode("ascii"))

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx


def make_ca(directory: Path, names: tuple[str, ...]) -> TestCA:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pincer test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path = directory / f"{names[0]}.crt"
    key_path = directory / f"{names[0]}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return TestCA(ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM), cert_path=cert_path, key_path=key_path)
