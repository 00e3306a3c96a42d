"""Real hub servers and homes for the hub tests.

``hub_server`` runs the hub app (uvicorn) on 127.0.0.1:0 in an event loop of its own (an anyio
blocking portal), over a hub home under tmp_path; ``publisher`` holds a signing key and a
publisher token for it. ``make_home(sources)`` writes a PINCER_HOME whose config.toml lists hub
sources. ``tree_hash`` hashes every file and link under a folder (path, mode, content) to prove
that a refused install left the disk as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from pincer.hub.archive import ArchiveLimits
from pincer.hub.catalog import Catalog, SourceSettings, make_source
from pincer.hub.installer import Hub
from pincer.hub.publish import Built, build_artifact
from pincer.hub.remote import RemoteSource
from pincer.hub.server.app import HubLimits
from pincer.hub.server.serve import serve_hub
from pincer.hub.server.store import HubStore
from pincer.hub.signing import KeyPair, generate_key, sign_manifest
from pincer.hub.trust import TrustStore
from tests.runtimes.wasm.conftest import wasm_compile_cache, wasm_components  # noqa: F401 - fixtures

SERVER_START_TIMEOUT_S = 120.0  # a loaded 2-core machine starts a gateway in ~1-2 s idle, 30+ s at load 15
CLI_TIMEOUT_S = 180.0
PINCER_BIN = Path(sys.executable).with_name("pincer")
SECRET_KEY_HEX = "6b" * 32


@dataclass
class RunningHub:
    url: str
    home: Path

    def token(self, publisher: str) -> str:
        store = HubStore(self.home)
        try:
            return store.new_token(publisher)
        finally:
            store.close()


@contextmanager
def running_hub(home: Path, *, limits: HubLimits | None = None, archive_limits: ArchiveLimits | None = None) -> Iterator[RunningHub]:
    """A hub server over ``home`` on 127.0.0.1:0 until the block ends."""
    ready: list[Any] = []
    with start_blocking_portal() as portal:
        future = portal.start_task_soon(
            partial(serve_hub, home, port=0, limits=limits, archive_limits=archive_limits, on_ready=ready.append)
        )
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not ready:
            if future.done():
                future.result()  # raises what stopped it
            if time.monotonic() > deadline:
                raise AssertionError(f"the hub server did not start within {SERVER_START_TIMEOUT_S} s")
            time.sleep(0.02)
        try:
            yield RunningHub(url=ready[0].url, home=home)
        finally:
            future.cancel()


@pytest.fixture
def hub_server(tmp_path: Path) -> Iterator[RunningHub]:
    with running_hub(tmp_path / "hub-home") as hub:
        yield hub


@dataclass
class Publisher:
    name: str
    key: KeyPair
    token: str
    remote: RemoteSource

    def publish(self, built: Built, *, force: bool = False) -> dict[str, Any]:
        return self.remote.publish(built.manifest, built.archive, signature=sign_manifest(built.manifest, self.key.private),
                                   public_key=self.key.public, force=force)  # fmt: skip

    def publish_path(self, path: Path, *, force: bool = False, **kwargs: Any) -> dict[str, Any]:
        return self.publish(build_artifact(path, **kwargs), force=force)


@pytest.fixture
def publisher(hub_server: RunningHub) -> Publisher:
    token = hub_server.token("alice")
    return Publisher(name="alice", key=generate_key(), token=token, remote=RemoteSource("team", hub_server.url, token=token))


def write_skill(folder: Path, name: str, *, version: str = "1.0.0", description: str = "Reviews code for bugs",
                body: str = "Review the code carefully.\n", extra: Mapping[str, str] | None = None) -> Path:  # fmt: skip
    skill = folder / name
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\nversion: {version}\n---\n{body}")
    for rel, text in (extra or {}).items():
        (skill / rel).parent.mkdir(parents=True, exist_ok=True)
        (skill / rel).write_text(text)
    return skill


def write_config(home: Path, sources: list[dict[str, str]], extra: str = "") -> None:
    lines = []
    for source in sources:
        lines.append("[[hub.sources]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in source.items()]
        lines.append("")
    (home / "config.toml").write_text("\n".join(lines) + "\n" + extra)


def make_hub(home: Path, sources: list[Any], *, trust: Mapping[str, str] | None = None, **kwargs: Any) -> Hub:
    """A Hub over ``home`` (made if missing); ``sources``: Source objects or [[hub.sources]] dicts."""
    home.mkdir(parents=True, exist_ok=True)
    made = [make_source(SourceSettings(**{**s, "path": Path(s["path"])} if "path" in s else s)) if isinstance(s, dict) else s
            for s in sources]  # fmt: skip
    for name, key in (trust or {}).items():
        TrustStore(home).add(name, key)
    return Hub(home, catalog=Catalog(made), **kwargs)


def tree_hash(folder: Path) -> dict[str, str]:
    """path -> kind, mode and sha256 of everything under ``folder`` (links by their target)."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(folder).as_posix()
            info = full.lstat()
            if full.is_symlink():
                found[rel] = f"link {os.readlink(full)}"
            elif full.is_dir():
                found[rel] = f"dir {oct(info.st_mode & 0o777)}"
            else:
                found[rel] = f"file {oct(info.st_mode & 0o777)} {hashlib.sha256(full.read_bytes()).hexdigest()}"
    return found


def seed_compile_cache(home: Path, shared: Path, *components: Path) -> None:
    """Copy the compiled artifacts of ``components`` from the shared test cache into ``home``'s
    compile cache (compiled there first when missing), so installs do not compile for 8 s each."""
    from pincer.runtimes.wasm.cache import CompileCache
    from pincer.runtimes.wasm.engine import new_engine

    cache = CompileCache(shared, new_engine())
    target = home / "cache" / "wasm"
    target.mkdir(parents=True, exist_ok=True)
    for component in components:
        wasm = component.read_bytes()
        cache.load(wasm, source=component.name)
        key = cache.key(hashlib.sha256(wasm).hexdigest())
        for suffix in (".cwasm", ".json"):
            shutil.copy(shared / f"{key}{suffix}", target / f"{key}{suffix}")


def cli(home: Path, *args: str, stdin: str | None = None, cwd: Path | None = None, env: Mapping[str, str] | None = None,
        timeout_s: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``pincer ARGS`` in a subprocess with PINCER_HOME=home, as a user runs it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    base.update({"PINCER_HOME": str(home), "PINCER_SECRET_KEY": SECRET_KEY_HEX, "COLUMNS": "200"}, **(env or {}))
    return subprocess.run([str(PINCER_BIN), *args], input=stdin, capture_output=True, text=True, env=base, cwd=cwd,
                          timeout=timeout_s, check=False)  # fmt: skip


def cli_json(home: Path, *args: str, expect: int = 0, **kwargs: Any) -> Any:
    done = cli(home, *args, "--json", **kwargs)
    assert done.returncode == expect, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return json.loads(done.stdout)


# -- stand-in servers: static files, and a hub that serves whatever a test tells it ------------


class _Routes:
    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        self.hits: list[str] = []

    def json(self, path: str, value: Any, status: int = 200) -> None:
        self.routes[path] = (status, "application/json", json.dumps(value).encode())

    def binary(self, path: str, data: bytes) -> None:
        self.routes[path] = (200, "application/gzip", data)


@contextmanager
def route_server(folder: Path | None = None) -> Iterator[tuple[str, _Routes]]:
    """An HTTP server on 127.0.0.1:0: the routes a test sets, else files under ``folder``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import unquote, urlsplit

    routes = _Routes()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            routes.hits.append(path)
            found = routes.routes.get(path)
            if found is None and folder is not None and (folder / path.lstrip("/")).is_file() and ".." not in path:
                found = (200, "application/gzip", (folder / path.lstrip("/")).read_bytes())
            status, kind, body = found or (404, "application/json", b'{"error": {"code": "artifact_not_found", "message": "none"}}')
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def serve_version(routes: _Routes, built: Built, *, key: KeyPair | None, archive: bytes | None = None, sha256: str | None = None,
                  signature: str | None = None, findings: list[dict[str, Any]] | None = None, yanked: bool = False,
                  extra_versions: list[str] = ()) -> None:  # fmt: skip
    """Make the stand-in hub serve ``built`` as its newest version (as a hub server would)."""
    manifest = built.manifest
    prefix = f"/api/v1/items/{manifest.kind.prefix}/{manifest.name}"
    data = built.archive if archive is None else archive
    versions = [{"version": v, "fingerprint": "x", "yanked": False, "published_at": 0, "verdict": "clean"} for v in extra_versions]
    versions.append({"version": manifest.version, "fingerprint": manifest.fingerprint, "yanked": yanked, "published_at": 1,
                     "verdict": "clean"})  # fmt: skip
    routes.json(prefix, {"key": str(manifest.key), "kind": manifest.kind.value, "name": manifest.name, "publisher": "mallory",
                         "dist_tags": {} if yanked else {"latest": manifest.version}, "versions": versions})  # fmt: skip
    routes.json(f"{prefix}/versions", {"key": str(manifest.key), "versions": versions})
    routes.json(f"{prefix}/versions/{manifest.version}", {
        "key": str(manifest.key), "version": manifest.version, "fingerprint": manifest.fingerprint, "manifest": manifest.to_json(),
        "signature": signature if signature is not None else (sign_manifest(manifest, key.private) if key else ""),
        "public_key": key.public if key else "", "sha256": sha256 or hashlib.sha256(data).hexdigest(), "size": len(data),
        "yanked": yanked, "published_at": 1, "verdict": "high" if findings else "clean", "findings": findings or [],
    })  # fmt: skip
    routes.binary(f"{prefix}/versions/{manifest.version}/download", data)
