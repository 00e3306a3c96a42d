"""The hub: catalog search over 10,000 generated entries next to a plain SQL LIKE scan of the
same rows in the same run, and an end-to-end install of a WASM tool whose compile is cached.

    .venv/bin/python bench/hub.py

- baseline: ``SELECT ... WHERE name LIKE ? OR display_name LIKE ? OR keywords LIKE ? OR tags LIKE ?
  OR description LIKE ?`` (per query word, OR-ed) over a plain table of the same 10,000 rows,
  ordered by name (what a naive catalog does: a full scan, no ranking);
- search: :meth:`pincer.hub.index.SearchIndex.search` (FTS5 trigram MATCH, BM25 with column
  weights, the best 200 ranked again by IronClaw's field weights), p50 and p95 over 400 queries
  of one or two words;
- install: ``Hub.install`` of an IronClaw-layout ``tools/NAME`` from a local registry folder, end
  to end (read the entry, sha256, unpack, scan, load the cached compile, describe, commit, lock),
  the echo component (18 MB); median of 7 installs, each into a fresh home.

Target from issue 15: search p50 <= 5 ms.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _stats import percentile
from pincer.hub.artifact import ArtifactKind
from pincer.hub.catalog import Catalog, SourceSettings, make_source
from pincer.hub.index import SearchIndex
from pincer.hub.installer import Hub, InstallOptions
from pincer.hub.sources import CatalogEntry

COUNT = 10_000
QUERIES = 400
INSTALLS = 7
REPO = Path(__file__).resolve().parents[1]
WORDS = ["deploy", "review", "release", "weather", "github", "issue", "summarize", "translate", "invoice", "calendar",
         "email", "slack", "docker", "kubernetes", "postgres", "backup", "audit", "lint", "test", "benchmark", "report",
         "chart", "travel", "recipe", "budget", "music", "video", "image", "pdf", "notion", "linear", "stripe", "sentry",
         "browser", "search", "notes", "tasks", "crm", "sales", "support"]  # fmt: skip
KINDS = [ArtifactKind.TOOL, ArtifactKind.SKILL, ArtifactKind.MCP_SERVER, ArtifactKind.SCRIPT]


def _entries(rng: random.Random) -> list[CatalogEntry]:
    out = []
    for index in range(COUNT):
        words = rng.sample(WORDS, 5)
        out.append(
            CatalogEntry(
                kind=KINDS[index % len(KINDS)], name=f"{words[0]}-{words[1]}-{index}", version="1.0.0", source="bench",
                display_name=f"{words[0].title()} {words[1].title()}", description=f"Helps with {words[2]} and {words[3]} for {words[4]} teams.",
                keywords=tuple(words[1:4]), tags=(words[4],),
            )
        )
    return out


def bench_search() -> dict[str, float]:
    rng = random.Random(15)
    conn = sqlite3.connect(":memory:")
    index = SearchIndex(conn)
    entries = _entries(rng)
    started = time.perf_counter()
    index.replace_source("bench", entries, stamp="x")
    build_s = time.perf_counter() - started
    # The baseline's own plain table: the same columns, no index to help it.
    conn.execute("CREATE TABLE plain (name TEXT, display_name TEXT, keywords TEXT, tags TEXT, description TEXT, body TEXT)")
    conn.executemany(
        "INSERT INTO plain VALUES (?, ?, ?, ?, ?, ?)",
        [(e.name, e.display_name, " ".join(e.keywords), " ".join(e.tags), e.description, json.dumps(e.to_json())) for e in entries],
    )
    queries = [" ".join(rng.sample(WORDS, rng.choice((1, 2)))) for _ in range(QUERIES)]
    like, ranked = [], []
    for query in queries:
        words = [f"%{w}%" for w in query.split()]
        clause = " OR ".join(["(name LIKE ? OR display_name LIKE ? OR keywords LIKE ? OR tags LIKE ? OR description LIKE ?)"] * len(words))
        t0 = time.perf_counter()
        conn.execute(f"SELECT body FROM plain WHERE {clause} ORDER BY name LIMIT 20", tuple(w for w in words for _ in range(5))).fetchall()
        like.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        index.search(query, limit=20)
        ranked.append((time.perf_counter() - t0) * 1000)
    return {
        "build_s": build_s,
        "like_p50": statistics.median(like), "like_p95": percentile(like, 95),
        "search_p50": statistics.median(ranked), "search_p95": percentile(ranked, 95),
    }  # fmt: skip


def _echo_component() -> Path:
    sys.path.insert(0, str(REPO))
    from tests.runtimes.wasm.conftest import EXAMPLES, cache_root

    from pincer.runtimes.wasm.build import build_key

    path = cache_root() / "components" / f"echo-{build_key(EXAMPLES / 'echo.py')}.wasm"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(Path(sys.executable).with_name("pincer")), "wasm", "build", str(EXAMPLES / "echo.py"), "-o", str(path)],
                       check=True, capture_output=True, timeout=600)  # fmt: skip
    return path


def bench_install() -> dict[str, float]:
    component = _echo_component()
    root = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    try:
        registry = root / "registry"
        (registry / "tools").mkdir(parents=True)
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w:gz") as tar:
            data = component.read_bytes()
            info = tarfile.TarInfo("echo-tool.wasm")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        archive = raw.getvalue()
        (registry / "echo-0.1.0.tar.gz").write_bytes(archive)
        (registry / "tools" / "echo.json").write_text(json.dumps({
            "name": "echo", "kind": "tool", "version": "0.1.0", "description": "echo",
            "artifacts": {"wasm32-wasip2": {"url": "echo-0.1.0.tar.gz", "sha256": hashlib.sha256(archive).hexdigest()}},
        }))  # fmt: skip
        cache = root / "shared-cache"
        seconds = []
        for run in range(INSTALLS + 1):  # the first run fills the compile cache; it is not counted
            home = root / f"home-{run}"
            home.mkdir()
            if cache.exists():
                shutil.copytree(cache, home / "cache" / "wasm")
            hub = Hub(home, catalog=Catalog([make_source(SourceSettings(name="local", path=registry))]))
            t0 = time.perf_counter()
            hub.install("tools/echo", InstallOptions(allow_unsigned=True))
            elapsed = time.perf_counter() - t0
            if run == 0:
                shutil.copytree(home / "cache" / "wasm", cache)
                first = elapsed
            else:
                seconds.append(elapsed)
        return {"cold_s": first, "cached_p50_s": statistics.median(seconds), "cached_max_s": max(seconds), "bytes": len(archive)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    search = bench_search()
    print(f"\nhub search over {COUNT:,} entries ({QUERIES} queries of 1-2 words; index built in {search['build_s']:.2f} s)")
    print(f"  {'':34} {'p50 ms':>10} {'p95 ms':>10}")
    print(f"  {'plain SQL LIKE scan (baseline)':34} {search['like_p50']:10.2f} {search['like_p95']:10.2f}")
    print(f"  {'FTS5 + IronClaw weights':34} {search['search_p50']:10.2f} {search['search_p95']:10.2f}"
          f"   {search['like_p50'] / search['search_p50']:.1f}x the scan's p50 (target p50 <= 5 ms)")  # fmt: skip
    install = bench_install()
    print(f"\nhub install of a WASM tool from a registry folder ({install['bytes'] / 1e6:.1f} MB archive), end to end")
    print(f"  first (compiles)                   {install['cold_s']:8.2f} s")
    print(f"  compile cached, p50 of {INSTALLS}           {install['cached_p50_s']:8.2f} s (max {install['cached_max_s']:.2f} s)")


if __name__ == "__main__":
    main()
