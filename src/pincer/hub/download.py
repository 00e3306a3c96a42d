"""Fetching artifact bytes: http(s) streamed with a size limit and a deadline, or a local file.

A source's artifact URLs may point anywhere its owner chose, loopback included (a team's hub on
this machine, a test's server): the source is configured by the user, and what comes back is
checked by sha256 and signature before anything is unpacked. ``file://`` URLs and relative paths
(resolved against the registry folder, and held inside it) read local regular files only.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pincer.core.errors import HubUnavailable, PayloadTooLarge, UsageError
from pincer.hub.sources import DOWNLOAD_TIMEOUT_S, Progress

__all__ = ["download", "DOWNLOAD_TIMEOUT_S", "CONNECT_TIMEOUT_S", "http_client"]

CONNECT_TIMEOUT_S = 10.0
_CHUNK_BYTES = 256 * 1024


def http_client(*, timeout_s: float = DOWNLOAD_TIMEOUT_S, headers: dict[str, str] | None = None) -> Any:
    import httpx2

    from pincer.safety.egress_transport import default_ssl_context

    return httpx2.Client(
        timeout=httpx2.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
        verify=default_ssl_context(),
        follow_redirects=True,
        headers={"User-Agent": "pincer-hub", **(headers or {})},
        trust_env=False,
    )


def download(
    url: str,
    *,
    max_bytes: int,
    base: Path | None = None,
    progress: Progress | None = None,
    timeout_s: float = DOWNLOAD_TIMEOUT_S,
    headers: dict[str, str] | None = None,
) -> bytes:
    """The bytes at ``url``; PayloadTooLarge past ``max_bytes`` (read no further), HubUnavailable
    when it cannot be fetched within ``timeout_s``."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        return _http(url, max_bytes=max_bytes, progress=progress, timeout_s=timeout_s, headers=headers)
    if parts.scheme == "file":
        path = Path(unquote(parts.path))
    elif parts.scheme == "" and base is not None:
        path = (base / url).resolve()
        if not path.is_relative_to(base.resolve()):
            raise UsageError(f"cannot fetch {url!r}: a relative url must name a path inside the registry folder",
                             hint="fix the entry's url (or give it a file:// url)")  # fmt: skip
    else:
        raise UsageError(f"cannot fetch {url!r}: only http(s), file:// and paths inside the registry folder", hint="fix the entry's url")
    try:
        # Opened without blocking and checked before reading: a FIFO would block the open, and
        # a device (/dev/zero) has no size to check and never ends.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"cannot fetch {path}: it is not a regular file", hint="point the entry's url at an archive file")
            if info.st_size > max_bytes:
                raise PayloadTooLarge(
                    f"{path} is {info.st_size:,} bytes, over the limit of {max_bytes:,}", hint="raise [hub] max_archive_bytes if it must"
                )
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise PayloadTooLarge(f"{path} grew past the limit of {max_bytes:,} bytes while it was read", hint="try again")
    except OSError as exc:
        raise HubUnavailable(f"cannot read {path}: {exc.strerror or exc}", hint="check the source's path in config.toml") from None
    if progress is not None:
        progress(len(data), len(data))
    return data


def _http(url: str, *, max_bytes: int, progress: Progress | None, timeout_s: float, headers: dict[str, str] | None) -> bytes:
    import httpx2

    deadline = time.monotonic() + timeout_s
    try:
        with http_client(timeout_s=timeout_s, headers=headers) as client, client.stream("GET", url) as response:
            if response.status_code == 429:
                retry = response.headers.get("retry-after", "a while")
                raise HubUnavailable(f"{url} is rate limited (429)", hint=f"try again in {retry} s")
            if response.status_code >= 400:
                raise HubUnavailable(f"{url} answered {response.status_code}", hint="check the source, or try again later")
            declared = response.headers.get("content-length")
            total = int(declared) if declared and declared.isdigit() else None
            if total is not None and total > max_bytes:
                raise PayloadTooLarge(
                    f"{url} is {total:,} bytes, over the limit of {max_bytes:,}",
                    hint="raise [hub] max_archive_bytes only if this artifact is really that large",
                )
            chunks: list[bytes] = []
            received = 0
            for chunk in response.iter_bytes(_CHUNK_BYTES):
                received += len(chunk)
                if received > max_bytes:
                    raise PayloadTooLarge(
                        f"{url} sent more than {max_bytes:,} bytes; the download was stopped",
                        hint="raise [hub] max_archive_bytes only if this artifact is really that large",
                    )
                if time.monotonic() > deadline:
                    raise HubUnavailable(f"{url} did not finish within {timeout_s:g} s", hint="raise [hub] download_timeout_s")
                chunks.append(chunk)
                if progress is not None:
                    progress(received, total)
            return b"".join(chunks)
    except httpx2.HTTPError as exc:
        raise HubUnavailable(f"cannot fetch {url}: {type(exc).__name__}: {exc}", hint="check the source's URL and the network") from None
