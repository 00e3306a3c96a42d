"""How a built-in reaches its API: through pincer's egress client, with the credential injected
host-side, to the base URL the capabilities manifest names or the person configured.

The tool's own code builds a request without any secret; :meth:`ApiClient.request` checks it
against the manifest's allowlist (rewritten to the configured base URL) and the call's grant
hosts, injects the credential mappings from ``HostContext.secrets`` (each value recorded, so the
leak scanner redacts it from the output), and sends it through :func:`pincer.safety.egress.send`.
Redirects are never followed: a 3xx is an error naming the refusal.

A base URL from config.toml (``[builtins.NAME] base_url``) is the person's permission for exactly
that scheme, host and port: it becomes the policy's one trusted origin (loopback, private and
plain http allowed there, :attr:`EgressPolicy.trusted_origins`), never a wider switch.
"""

from __future__ import annotations

import dataclasses
import functools
import json as jsonlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from pincer.core.capabilities import Capabilities, CredentialMapping, EndpointPattern
from pincer.core.errors import EgressDenied, PincerError, SecretError, ToolError, UsageError
from pincer.core.values import HostContext

if TYPE_CHECKING:  # the HTTP stack loads when a request is made, not when tools are listed
    from pincer.safety.egress import EgressClient, EgressPolicy, HttpResponse
    from pincer.safety.scanner import LeakScanner

__all__ = ["ApiClient", "BaseUrl", "ConnectionPool", "rebase_capabilities", "segment"]

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"https": 443, "http": 80}
REDACTED = "[REDACTED:secret]"  # the leak scanner's own marker


@dataclass(frozen=True, kw_only=True, slots=True)
class BaseUrl:
    """A parsed base URL: ``configured`` when it came from config.toml (then trusted exactly)."""

    scheme: str
    host: str
    port: int
    path: str  # without a trailing slash; "" for the root
    configured: bool = False

    @classmethod
    def parse(cls, url: str, *, configured: bool, key: str) -> BaseUrl:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UsageError(
                f"{key} {url!r} is not a URL: {exc}", hint=f"set {key} to e.g. https://ghe.example/api/v3"
            ) from None
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.query or parts.fragment or parts.username:
            raise UsageError(
                f"{key} {url!r} must be http(s)://host[:port][/path] without query, fragment or user",
                hint=f"set {key} in config.toml to e.g. https://ghe.example/api/v3",
            )
        return cls(
            scheme=scheme,
            host=parts.hostname.lower(),
            port=port or _DEFAULT_PORTS[scheme],
            path=parts.path.rstrip("/"),
            configured=configured,
        )

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.authority}{self.path}{path}"


def segment(value: object, field: str) -> str:
    """One URL path segment, percent-encoded; refuses ``/``, ``..``, ``?``, ``#``, whitespace and
    control characters (IronClaw's ``validate_path_segment``)."""
    text = str(value)
    if (
        not text
        or "/" in text
        or ".." in text
        or "?" in text
        or "#" in text
        or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text)
    ):
        raise UsageError(
            f"{field} {text[:80]!r} is not a valid name (no '/', '..', '?', '#', spaces or control characters)",
            hint=f'pass the bare {field}, e.g. owner "octocat" and repo "hello-world"',
        )
    return quote(text, safe="-_.")


def rebase_capabilities(
    caps: Capabilities, base: BaseUrl, *, default_host: str, other_hosts: Iterable[str] = ()
) -> Capabilities:
    """The manifest with its allowlist and credential host patterns moved from ``default_host``
    (``api.github.com``) and ``other_hosts`` (slack's ``files.slack.com``) to the base URL's exact
    host and port, under its path; entries for any other host are dropped."""
    if caps.http is None:
        return caps
    pattern = base.authority
    moved = {default_host, *other_hosts}
    allowlist = tuple(
        EndpointPattern(host=pattern, path_prefix=(base.path + e.path_prefix) or "/", methods=e.methods)
        for e in caps.http.allowlist
        if e.host in moved
    )
    credentials = tuple(
        dataclasses.replace(c, host_patterns=tuple(dict.fromkeys(pattern if h in moved else h for h in c.host_patterns)))
        for c in caps.http.credentials
    )
    return dataclasses.replace(caps, http=dataclasses.replace(caps.http, allowlist=allowlist, credentials=credentials))


class ConnectionPool:
    """Kept-alive connections for one built-in, made on first use (the HTTP stack loads then) and
    closed by the runtime that registered the tool. One pool serves one set of network settings
    (:class:`~pincer.safety.egress.EgressClient`); a call under other settings opens its own."""

    def __init__(self) -> None:
        self._client: EgressClient | None = None
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def close_with(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Close something else of the built-in with this pool (the browser's Chromium)."""
        self._closers.append(closer)

    def client_for(self, policy: EgressPolicy) -> EgressClient | None:
        from pincer.safety import egress

        if self._client is None:
            self._client = egress.EgressClient()
        settings = (policy.allow_private_network, policy.allow_plain_http_loopback, policy.trusted_origins)
        bound = self._client.network_settings
        return self._client if bound is None or bound == settings else None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        closers, self._closers = self._closers, []
        for closer in closers:
            await closer()


class ApiClient:
    """One call's way to the API. Made per call from its HostContext; holds no secret itself."""

    def __init__(
        self,
        *,
        tool: str,
        base: BaseUrl,
        host: HostContext,
        headers: Mapping[str, str] | None = None,
        auth_command: str | None = None,
        pool: ConnectionPool | None = None,
    ) -> None:
        self.tool = tool
        self._pool = pool
        self.base = base
        self.host = host
        self._headers = dict(headers or {})
        self._auth_command = auth_command or f"pincer auth setup {tool}"
        self._policy: EgressPolicy | None = None

    def policy(self) -> EgressPolicy:
        if self._policy is None:
            self._policy = _policy_for(self.host, self.base)
        return self._policy

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        form: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """Send one request to ``base + path`` (path already encoded); the raw response, 3xx refused.
        The body is ``json`` (JSON), ``form`` (``application/x-www-form-urlencoded``, None values
        left out) or ``content`` (raw bytes, the caller names its Content-Type)."""
        from pincer.safety import egress

        url = self.base.url(path)
        # A list value repeats the parameter (Google's repeated parameters: ?labelIds=A&labelIds=B).
        pairs = [
            (k, _query_value(item))
            for k, v in (query or {}).items()
            if v is not None
            for item in (v if isinstance(v, list | tuple) else (v,))
        ]
        if pairs:
            url += "?" + urlencode(pairs, quote_via=quote, safe="")
        out = {**self._headers, **(headers or {})}
        body: bytes | None = content
        if json is not None:
            body = jsonlib.dumps(json, ensure_ascii=False, allow_nan=False).encode("utf-8")
            out.setdefault("Content-Type", "application/json")
        elif form is not None:
            fields = [(k, _query_value(v)) for k, v in form.items() if v is not None]
            body = urlencode(fields, quote_via=quote, safe="").encode("ascii")
            out.setdefault("Content-Type", "application/x-www-form-urlencoded")
        policy = self.policy()
        target = policy.check(method, url)
        self._check_grant_hosts(target.host, target.port, target.display)
        send_url, out, injected = self._inject(method, url, out)
        request = egress.HttpRequest(method=method, url=send_url, headers=tuple(out.items()), body=body)
        client = self._pool.client_for(policy) if self._pool is not None else None
        try:
            response = await egress.send(request, policy=policy, client=client)
        except PincerError as exc:
            # A credential in the URL path (Telegram's bot token) would otherwise ride along in
            # the error text egress builds from the URL: the one place the injected URL is named.
            raise _without(exc, injected, target.display) from None
        except Exception as exc:  # noqa: BLE001 - another library's failure, translated at the seam
            raise ToolError(
                f"{self.tool}: {method} {target.display} failed: {type(exc).__name__}",
                hint="retry later; if it persists, check the base URL under [builtins] in config.toml",
            ) from None
        response = _scrubbed(response, injected)
        if 300 <= response.status < 400:
            raise EgressDenied(
                f"{self.tool}: {method} {target.display} answered {response.status} "
                "(redirect not followed: rule: no redirects for built-in API calls)",
                hint=f"point the base URL under [builtins.{self.tool}] in config.toml at the final address",
            )
        return response

    def _check_grant_hosts(self, host: str, port: int, display: str) -> None:
        hosts = self.host.network_hosts
        if hosts is None:
            return  # no grant narrowed the hosts: the manifest's allowlist (checked above) applies
        from pincer.safety.hosts import HostPattern

        if not any(HostPattern.parse(h).matches(host, port) for h in hosts):
            raise EgressDenied(
                f"{self.tool}: {display} refused: the grant allows only {', '.join(hosts)}",
                hint=f"add {host!r} to the grant's hosts in config.toml or drop its hosts list",
            )

    def _inject(self, method: str, url: str, headers: dict[str, str]) -> tuple[str, dict[str, str], tuple[str, ...]]:
        caps = self.host.capabilities
        http = getattr(caps, "http", None) if caps is not None else None
        credentials: tuple[CredentialMapping, ...] = tuple(getattr(http, "credentials", ()) or ())
        if not credentials:
            return url, headers, ()
        access = self.host.secrets
        if access is None:
            raise SecretError(
                f"{self.tool}: the call has no access to secrets",
                hint="this is a host bug: the dispatcher must pass SecretAccess in HostContext.secrets",
            )
        from pincer.secrets.injection import inject_credentials

        try:
            injected = inject_credentials(method, url, headers, credentials=credentials, resolve=access.find)
        except SecretError as exc:
            names = ", ".join(sorted({c.secret_name for c in credentials}))
            raise SecretError(
                f"{self.tool}: its credential ({names}) is not set up: {exc.message}",
                hint=f"run `{self._auth_command}` (or `pincer secrets set {credentials[0].secret_name}`)",
            ) from None
        for value in injected.injected:
            access.record(value)
        return injected.url, dict(injected.headers), tuple(injected.injected)


def _without(exc: PincerError, values: tuple[str, ...], display: str) -> PincerError:
    """``exc`` with every injected value (and its percent-encoded form) replaced by
    ``[REDACTED:secret]`` in its message and hint; the same class, so its code is kept."""
    message, hint = exc.message, exc.hint
    for value in values:
        if not value:
            continue
        for form in {value, quote(value, safe=""), quote(value, safe="-_.:~")}:
            message = message.replace(form, REDACTED)
            hint = hint.replace(form, REDACTED) if hint else hint
    if message == exc.message and hint == exc.hint:
        return exc
    clean = type(exc).__new__(type(exc))
    PincerError.__init__(clean, message, hint=hint)
    clean.__dict__.update({k: v for k, v in exc.__dict__.items() if k not in ("message", "hint")})
    return clean


def _scrubbed(response: HttpResponse, values: tuple[str, ...]) -> HttpResponse:
    """The response with every injected value in its body redacted by the leak scanner (its
    values only, no credential shapes: the tool still parses the body): an API that echoes the
    request (its path, with Telegram's token in it), in any form the scanner knows, must not hand
    the token to the tool's own error texts, which a direct caller (``pincer auth setup``) prints
    unscanned."""
    if not any(values):
        return response
    text = response.body.decode("utf-8", errors="surrogateescape")
    clean, count = _values_only().with_values(values).scan_text(text)
    return dataclasses.replace(response, body=clean.encode("utf-8", errors="surrogateescape")) if count else response


@functools.cache
def _values_only() -> LeakScanner:
    from pincer.safety.scanner import LeakScanner

    return LeakScanner((), shapes=False)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _policy_for(host: HostContext, base: BaseUrl) -> EgressPolicy:
    from pincer.safety import egress

    caps = host.capabilities
    http = getattr(caps, "http", None) if caps is not None else None
    if http is None or not http.allowlist:
        raise EgressDenied(
            f"{host.tool}: no allowlist in its capabilities (rule: default deny)",
            hint="this is a packaging bug: the built-in's capabilities file must list its API host",
        )
    trusted = frozenset({(base.scheme, base.host, base.port)}) if base.configured else frozenset()
    max_response = min(http.max_response_bytes, max(host.max_output_bytes * 20, 1_048_576))
    return egress.EgressPolicy.from_http_capability(
        http,
        allow_private_network=host.allow_private_network,
        allow_plain_http_loopback=host.allow_private_network,
        trusted_origins=trusted,
        max_response_bytes=max_response,
        timeout_s=min(host.timeout_s, float(http.timeout_secs)),
    )


def error_message(response: HttpResponse) -> str:
    """The API's own ``message`` when its error body is JSON, else the status line."""
    try:
        data = jsonlib.loads(response.body.decode("utf-8", "replace"))
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        message = data.get("message") or data.get("error") or data.get("detail")
        if isinstance(message, str) and message:
            return message[:500]
        if isinstance(message, Mapping) and isinstance(message.get("detail"), str):
            return str(message["detail"])[:500]
    return f"HTTP {response.status}"


def json_body(response: HttpResponse, tool: str) -> Any:
    if not response.body:
        return None
    try:
        return jsonlib.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ToolError(
            f"{tool}: the API answered {response.status} with a body that is not JSON",
            hint="check [builtins] base_url in config.toml: it must point at the API, not a web page",
        ) from None
