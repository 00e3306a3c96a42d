"""The hub server's HTTP API (FastAPI), separate from the gateway: its own app, port and state.

=======================================================  ===================================
request                                                  what it does
=======================================================  ===================================
``GET /api/v1/search?q=&kind=&limit=``                   ranked items (FTS5 + field weights)
``GET /api/v1/items/{kind}/{name}``                      an item: publisher, tags, versions
``GET /api/v1/items/{kind}/{name}/versions``             its versions (yanked ones marked)
``GET .../versions/{version}``                           manifest, signature, key, sha256
``GET .../versions/{version}/download``                  the deterministic archive
``POST /api/v1/publish``                                 publisher token: manifest + signature +
                                                         public key + archive (base64)
``PUT .../tags/{tag}``                                   owner: point a tag (``latest``) at a
                                                         version; rollback = moving it back
``DELETE .../versions/{version}``                        owner: yank (kept for exact pins)
``POST .../star``                                        star once per publisher or address
``GET /api/v1/openapi.json``                             this API's OpenAPI document
=======================================================  ===================================

``{kind}`` is a key's first part (``tools``, ``skills``, ``mcp-servers``, ...). Errors are
``{"error": {"code", "message", "hint"}}`` with the status of the error's class. Every answer
carries ``RateLimit-Limit``, ``RateLimit-Remaining`` and ``RateLimit-Reset``; past the limit (per
publisher token, else per client address) the answer is 429 with ``Retry-After``. A request body
over the upload limit is refused with 413 before it is read whole.
"""

from __future__ import annotations

import base64
import binascii
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from pincer.core.errors import ArtifactNotFound, PayloadTooLarge, PincerError, UsageError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, check_name, is_version, kind_of
from pincer.hub.server.store import HubStore

__all__ = ["create_hub_app", "HubLimits", "RateLimiter"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

RATE_WINDOW_S = 60.0
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
# A key's first part (tools/github) or the kind's own name; the same words everywhere.
KindWord = Literal["tools", "skills", "mcp-servers", "openapi", "scripts", "bundles",
                   "tool", "skill", "mcp_server", "script", "bundle"]  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class HubLimits:
    max_upload_bytes: int = 96 * 1024 * 1024  # the JSON body: base64 makes an archive 4/3 larger
    address_requests_per_minute: int = 600
    token_requests_per_minute: int = 1200


class RateLimiter:
    """A fixed one-minute window per key; returns (allowed, limit, remaining, reset seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._windows: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def hit(self, key: str, limit: int) -> tuple[bool, int, int, int]:
        now = self._clock()
        with self._lock:
            start, count = self._windows.get(key, (now, 0))
            if now - start >= RATE_WINDOW_S:
                start, count = now, 0
            count += 1
            self._windows[key] = (start, count)
            if len(self._windows) > 100_000:  # forget old windows, not the current ones
                self._windows = {k: v for k, v in self._windows.items() if now - v[0] < RATE_WINDOW_S}
        reset = max(1, math.ceil(RATE_WINDOW_S - (now - start)))
        return count <= limit, limit, max(0, limit - count), reset


# ------------------------------------------------------------------------------------ models


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ErrorDetail(_Model):
    code: str
    message: str
    hint: str | None = None


class ErrorBody(_Model):
    error: ErrorDetail


class SearchItem(_Model):
    key: str
    kind: str
    name: str
    version: str
    display_name: str = ""
    description: str = ""
    keywords: list[str] = []
    tags: list[str] = []
    public_key: str = ""
    publisher: str = ""
    verdict: str = "unscanned"
    stars: int | None = None
    downloads: int | None = None
    score: float = 0.0


class SearchResult(_Model):
    query: str
    items: list[SearchItem]


class VersionSummary(_Model):
    version: str
    fingerprint: str
    yanked: bool
    published_at: float
    verdict: str
    forced: bool = False  # published past high-severity scanner findings (--force)


class Item(_Model):
    key: str
    kind: str
    name: str
    publisher: str
    created_at: float
    stars: int
    downloads: int
    latest: str | None
    dist_tags: dict[str, str]
    versions: list[VersionSummary]
    display_name: str = ""
    description: str = ""
    keywords: list[str] = []
    tags: list[str] = []


class VersionList(_Model):
    key: str
    versions: list[VersionSummary]


class VersionDetail(_Model):
    key: str
    version: str
    fingerprint: str
    manifest: dict[str, Any]
    signature: str
    public_key: str
    sha256: str
    size: int
    yanked: bool
    published_at: float
    verdict: str
    findings: list[dict[str, Any]]
    forced: bool = False


class PublishRequest(_Model):
    manifest: dict[str, Any]
    signature: str = Field(min_length=1, max_length=512)
    public_key: str = Field(min_length=1, max_length=512)
    archive: str = Field(min_length=4, description="the .tar.gz, base64")
    force: bool = Field(False, description="publish past high-severity scanner findings (refused with 451 otherwise)")


class PublishResult(_Model):
    key: str
    version: str
    fingerprint: str
    sha256: str
    size: int
    verdict: str
    findings: list[dict[str, Any]]
    latest: str | None
    forced: bool = False


class TagRequest(_Model):
    version: str = Field(min_length=5, max_length=128)


class TagsResult(_Model):
    key: str
    dist_tags: dict[str, str]


class YankResult(_Model):
    key: str
    version: str
    yanked: bool
    dist_tags: dict[str, str]


class StarResult(_Model):
    key: str
    stars: int


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 409, 413, 422, 429)
}


def _error_response(status: int, code: str, message: str, hint: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    detail: dict[str, Any] = {"code": code, "message": message}
    if hint:
        detail["hint"] = hint
    return JSONResponse({"error": detail}, status_code=status, headers=headers)


def _key(kind: str, name: str) -> ArtifactKey:
    try:
        parsed = kind_of(kind)
    except UsageError:
        raise ArtifactNotFound(f"there is no kind {kind!r}", hint="kinds: tools, skills, mcp-servers, openapi, scripts, bundles") from None
    return ArtifactKey(kind=parsed, name=check_name(name))


def _version(text: str) -> str:
    if not is_version(text):
        raise ArtifactNotFound(f"{text!r} is not a version", hint="versions are semver: 1.2.3")
    return text


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def create_hub_app(store: HubStore, *, limits: HubLimits | None = None, clock: Callable[[], float] = time.monotonic) -> Any:
    """The ASGI app over ``store``: FastAPI wrapped in the body-size and rate-limit guards."""
    limits = limits or HubLimits()
    app = FastAPI(
        title="pincer hub",
        version="1",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
        description="Catalog, publishing and downloads of signed pincer artifacts.",
    )

    @app.exception_handler(PincerError)
    async def pincer_error(request: Request, exc: PincerError) -> JSONResponse:
        return _error_response(exc.http_status, exc.code, exc.message, exc.hint)

    @app.exception_handler(StarletteHTTPException)
    async def no_route(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # A path no route matches (an encoded ``/`` in a name, a method it lacks) answers in the
        # hub's error shape too, not Starlette's {"detail"}.
        code = "artifact_not_found" if exc.status_code == 404 else "usage_error"
        return _error_response(exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}",
                               "see /api/v1/openapi.json for the routes")  # fmt: skip

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error_response(422, "invalid_arguments", f"{where}: {first.get('msg', 'invalid request')}",
                               "see /api/v1/openapi.json for the request's shape")  # fmt: skip

    @app.get("/api/v1/search", response_model=SearchResult, responses=_ERRORS)
    def search(
        q: str = Query("", max_length=256, description="words to look for"),
        kind: KindWord | None = Query(None, description="only this kind"),
        limit: int = Query(20, ge=1, le=100),
    ) -> dict[str, Any]:
        wanted: ArtifactKind | None = None
        if kind:
            try:
                wanted = kind_of(kind)
            except UsageError as exc:
                raise UsageError(exc.message, hint=exc.hint) from None
        return {"query": q, "items": store.search(q, kind=wanted, limit=limit)}

    @app.get("/api/v1/items/{kind}/{name}", response_model=Item, responses=_ERRORS)
    def item(kind: KindWord = Path(), name: str = Path(pattern=_NAME)) -> dict[str, Any]:
        return store.item(_key(kind, name))

    @app.get("/api/v1/items/{kind}/{name}/versions", response_model=VersionList, responses=_ERRORS)
    def versions(kind: KindWord = Path(), name: str = Path(pattern=_NAME)) -> dict[str, Any]:
        key = _key(kind, name)
        store.item(key)
        return {"key": str(key), "versions": store.versions(key)}

    @app.get("/api/v1/items/{kind}/{name}/versions/{version}", response_model=VersionDetail, responses=_ERRORS)
    def version(kind: KindWord = Path(), name: str = Path(pattern=_NAME), version: str = Path(max_length=128)) -> dict[str, Any]:
        return store.version(_key(kind, name), _version(version))

    @app.get(
        "/api/v1/items/{kind}/{name}/versions/{version}/download",
        response_class=Response,
        responses={200: {"content": {"application/gzip": {}}, "description": "the archive"}, **_ERRORS},
    )
    def download(kind: KindWord = Path(), name: str = Path(pattern=_NAME), version: str = Path(max_length=128)) -> Response:
        key = _key(kind, name)
        data = store.download(key, _version(version))
        filename = f"{key.kind.prefix}-{key.name}-{version}.tar.gz"
        return Response(data, media_type="application/gzip", headers={"Content-Disposition": f'attachment; filename="{filename}"'})

    @app.post("/api/v1/publish", response_model=PublishResult, status_code=201, responses=_ERRORS)
    def publish(body: PublishRequest, request: Request) -> dict[str, Any]:
        publisher = store.require_publisher(_token(request))
        try:
            archive = base64.b64decode(body.archive, validate=True)
        except (ValueError, binascii.Error):
            raise UsageError("archive is not base64", hint="send the .tar.gz bytes base64-encoded") from None
        if len(archive) > store.limits.max_archive_bytes:
            raise PayloadTooLarge(f"the archive is larger than {store.limits.max_archive_bytes:,} bytes")
        published = store.publish(publisher, body.manifest, body.signature, body.public_key, archive, force=body.force)
        return {
            "key": str(published.key), "version": published.version, "fingerprint": published.fingerprint,
            "sha256": published.sha256, "size": published.size, "verdict": published.verdict,
            "findings": list(published.findings), "latest": published.latest, "forced": published.forced,
        }  # fmt: skip

    @app.put("/api/v1/items/{kind}/{name}/tags/{tag}", response_model=TagsResult, responses=_ERRORS)
    def set_tag(body: TagRequest, request: Request, kind: KindWord = Path(), name: str = Path(pattern=_NAME),
                tag: str = Path(pattern=_NAME)) -> dict[str, Any]:  # fmt: skip
        key = _key(kind, name)
        publisher = store.require_publisher(_token(request))
        return {"key": str(key), "dist_tags": store.set_tag(key, tag, _version(body.version), publisher)}

    @app.delete("/api/v1/items/{kind}/{name}/versions/{version}", response_model=YankResult, responses=_ERRORS)
    def yank(request: Request, kind: KindWord = Path(), name: str = Path(pattern=_NAME),
             version: str = Path(max_length=128)) -> dict[str, Any]:  # fmt: skip
        key = _key(kind, name)
        publisher = store.require_publisher(_token(request))
        return store.yank(key, _version(version), publisher)

    @app.post("/api/v1/items/{kind}/{name}/star", response_model=StarResult, responses=_ERRORS)
    def star(request: Request, kind: KindWord = Path(), name: str = Path(pattern=_NAME)) -> dict[str, Any]:
        key = _key(kind, name)
        publisher = store.publisher_of(_token(request))
        who = f"publisher:{publisher}" if publisher else f"address:{request.client.host if request.client else '?'}"
        return {"key": str(key), "stars": store.star(key, who)}

    return _Guard(app, store=store, limits=limits, limiter=RateLimiter(clock))


class _Guard:
    """Body size and rate limits in front of the app (plain ASGI: a refusal reads no body)."""

    def __init__(self, app: Any, *, store: HubStore, limits: HubLimits, limiter: RateLimiter) -> None:
        self.app = app
        self.store = store
        self.limits = limits
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        scheme, _, value = headers.get("authorization", "").partition(" ")
        publisher = self.store.publisher_of(value.strip()) if scheme.lower() == "bearer" and value.strip() else None
        if publisher is not None:
            key, limit = f"publisher:{publisher}", self.limits.token_requests_per_minute
        else:
            client = scope.get("client") or ("?", 0)
            key, limit = f"address:{client[0]}", self.limits.address_requests_per_minute
        allowed, limit, remaining, reset = self.limiter.hit(key, limit)
        rate_headers = {"RateLimit-Limit": str(limit), "RateLimit-Remaining": str(remaining), "RateLimit-Reset": str(reset),
                        "RateLimit-Policy": f"{limit};w={int(RATE_WINDOW_S)}"}  # fmt: skip
        if not allowed:
            response = _error_response(
                429, "budget_exceeded", f"more than {limit} requests a minute from this {key.split(':')[0]}",
                f"retry in {reset} s", headers={**rate_headers, "Retry-After": str(reset)},
            )  # fmt: skip
            await response(scope, receive, send)
            return
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limits.max_upload_bytes:
            response = _error_response(413, "body_too_large", f"the request body is larger than {self.limits.max_upload_bytes:,} bytes",
                                       "publish a smaller artifact", headers=rate_headers)  # fmt: skip
            await response(scope, receive, send)
            return
        # The body is read here, bounded, before the app sees it: a chunked upload without a
        # content-length is cut off at the limit too, and answered 413 rather than half read.
        chunks: list[bytes] = []
        received = 0
        has_body = scope.get("method") in ("POST", "PUT", "PATCH", "DELETE")
        if has_body:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body = message.get("body", b"")
                received += len(body)
                if received > self.limits.max_upload_bytes:
                    response = _error_response(413, "body_too_large", f"the request body is larger than {self.limits.max_upload_bytes:,} bytes",
                                               "publish a smaller artifact", headers=rate_headers)  # fmt: skip
                    await response(scope, receive, send)
                    return
                chunks.append(body)
                if not message.get("more_body", False):
                    break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if has_body and not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()  # a GET's body, or after the body: the disconnect, when it comes

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = list(message.get("headers", []))
                raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in rate_headers.items()]
                message = {**message, "headers": raw}
            await send(message)

        await self.app(scope, replay, send_with_headers)
