"""Catalog search: SQLite FTS5 (BM25) to find candidates, IronClaw's field weights to rank them.

One FTS5 table with the trigram tokenizer over (name, display name, keywords, tags,
description), so a query word matches inside a longer one (``hub`` finds ``github``), as
IronClaw's substring rules expect. A query's words are OR-ed; FTS5 orders the matches by BM25
with per-column weights and the best ``CANDIDATES`` are ranked again in Python by IronClaw's
field weights, per query word:

===============  =======  =========
field            exact    substring
===============  =======  =========
name             10       5
display name     8        4
keyword          6        3
tag              4        -
description      -        2
===============  =======  =========

The score is that sum plus the BM25 relevance squashed into [0, 1) (a tie-breaker). Words of one
or two characters (below the trigram size) are matched with LIKE. Hidden entries (IronClaw's
``"hidden": true``) only appear when the query is their exact name.

The client keeps its index of folder sources in ``$PINCER_HOME/hub/index.db`` (its own file,
rebuilt per source when the source's files change); the hub server keeps the same tables in its
own database.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pincer.hub.artifact import ArtifactKind
from pincer.hub.sources import CatalogEntry

__all__ = ["SearchIndex", "field_score", "CANDIDATES", "open_index", "query_words"]

CANDIDATES = 200
MAX_QUERY_WORDS = 16
_WEIGHTS = (10.0, 8.0, 6.0, 4.0, 2.0)  # bm25 column weights, in the table's column order
_WORD = re.compile(r"[\w][\w.+-]*", re.UNICODE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hub_entries (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    hidden INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL,
    UNIQUE (source, kind, name)
);
CREATE VIRTUAL TABLE IF NOT EXISTS hub_fts USING fts5(
    name, display_name, keywords, tags, description, tokenize = 'trigram'
);
CREATE TABLE IF NOT EXISTS hub_source_stamps (
    source TEXT PRIMARY KEY,
    stamp TEXT NOT NULL
);
"""


def query_words(query: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(query)][:MAX_QUERY_WORDS]


def field_score(entry: CatalogEntry, words: Sequence[str]) -> float:
    """IronClaw's weights summed over the query words."""
    name = entry.name.lower()
    display = entry.display_name.lower()
    keywords = [k.lower() for k in entry.keywords] + [a.lower() for a in entry.aliases]
    tags = [t.lower() for t in entry.tags]
    description = entry.description.lower()
    score = 0.0
    for word in words:
        if name == word:
            score += 10
        elif word in name:
            score += 5
        if display:
            if display == word:
                score += 8
            elif word in display:
                score += 4
        if any(k == word for k in keywords):
            score += 6
        elif any(word in k for k in keywords):
            score += 3
        if word in tags:
            score += 4
        if word in description:
            score += 2
    return score


def open_index(path: Path) -> SearchIndex:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=5000")
    return SearchIndex(conn)


class SearchIndex:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.executescript(_SCHEMA)

    def close(self) -> None:
        self.conn.close()

    # -- writing ---------------------------------------------------------------------------

    def stamp_of(self, source: str) -> str | None:
        row = self.conn.execute("SELECT stamp FROM hub_source_stamps WHERE source = ?", (source,)).fetchone()
        return row[0] if row else None

    def replace_source(self, source: str, entries: Iterable[CatalogEntry], *, stamp: str) -> None:
        """Every entry of ``source`` replaced by ``entries``, in one transaction."""
        with _transaction(self.conn):
            ids = [row[0] for row in self.conn.execute("SELECT id FROM hub_entries WHERE source = ?", (source,))]
            self.conn.executemany("DELETE FROM hub_fts WHERE rowid = ?", [(i,) for i in ids])
            self.conn.execute("DELETE FROM hub_entries WHERE source = ?", (source,))
            for entry in entries:
                self._insert(entry)
            self.conn.execute(
                "INSERT INTO hub_source_stamps (source, stamp) VALUES (?, ?) "
                "ON CONFLICT (source) DO UPDATE SET stamp = excluded.stamp",
                (source, stamp),
            )

    def upsert(self, entry: CatalogEntry) -> None:
        with _transaction(self.conn):
            row = self.conn.execute(
                "SELECT id FROM hub_entries WHERE source = ? AND kind = ? AND name = ?",
                (entry.source, entry.kind.value, entry.name),
            ).fetchone()
            if row is not None:
                self.conn.execute("DELETE FROM hub_fts WHERE rowid = ?", (row[0],))
                self.conn.execute("DELETE FROM hub_entries WHERE id = ?", (row[0],))
            self._insert(entry)

    def remove(self, source: str, kind: ArtifactKind, name: str) -> None:
        with _transaction(self.conn):
            row = self.conn.execute(
                "SELECT id FROM hub_entries WHERE source = ? AND kind = ? AND name = ?", (source, kind.value, name)
            ).fetchone()
            if row is not None:
                self.conn.execute("DELETE FROM hub_fts WHERE rowid = ?", (row[0],))
                self.conn.execute("DELETE FROM hub_entries WHERE id = ?", (row[0],))

    def _insert(self, entry: CatalogEntry) -> None:
        body = json.dumps({**entry.to_json(), "aliases": list(entry.aliases), "hidden": entry.hidden})
        cursor = self.conn.execute(
            "INSERT INTO hub_entries (source, kind, name, hidden, body) VALUES (?, ?, ?, ?, ?)",
            (entry.source, entry.kind.value, entry.name, int(entry.hidden), body),
        )
        self.conn.execute(
            "INSERT INTO hub_fts (rowid, name, display_name, keywords, tags, description) VALUES (?, ?, ?, ?, ?, ?)",
            (
                cursor.lastrowid,
                entry.name,
                entry.display_name,
                " ".join([*entry.keywords, *entry.aliases]),
                " ".join(entry.tags),
                entry.description,
            ),
        )

    # -- reading ---------------------------------------------------------------------------

    def kinds_by_name(self, sources: Sequence[str] | None = None) -> dict[str, set[ArtifactKind]]:
        found: dict[str, set[ArtifactKind]] = {}
        for source, kind, name in self.conn.execute("SELECT source, kind, name FROM hub_entries"):
            if sources is None or source in sources:
                found.setdefault(name, set()).add(ArtifactKind(kind))
        return found

    def get(self, source: str, kind: ArtifactKind, name: str) -> CatalogEntry | None:
        row = self.conn.execute(
            "SELECT body FROM hub_entries WHERE source = ? AND kind = ? AND name = ?", (source, kind.value, name)
        ).fetchone()
        return _entry(row[0]) if row else None

    def all(self, source: str | None = None) -> list[CatalogEntry]:
        sql, params = "SELECT body FROM hub_entries", ()
        if source is not None:
            sql, params = sql + " WHERE source = ?", (source,)  # type: ignore[assignment]
        return [_entry(row[0]) for row in self.conn.execute(sql + " ORDER BY kind, name", params)]

    def search(
        self, query: str, *, kind: ArtifactKind | None = None, limit: int = 20, sources: Sequence[str] | None = None
    ) -> list[CatalogEntry]:
        """The best ``limit`` entries for ``query`` (every entry, by name, for an empty query)."""
        words = query_words(query)
        limit = max(1, min(int(limit), 500))
        if not words:
            rows = self.conn.execute("SELECT body FROM hub_entries WHERE hidden = 0 ORDER BY name LIMIT ?", (limit * 4,))
            found = [_entry(r[0]) for r in rows]
            return [e for e in found if _wanted(e, kind, sources)][:limit]
        candidates: dict[int, tuple[str, float]] = {}
        long_words = [w for w in words if len(w) >= 3]
        if long_words:
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in long_words)
            rows = self.conn.execute(
                "SELECT e.id, e.body, bm25(hub_fts, ?, ?, ?, ?, ?) AS rank FROM hub_fts "
                "JOIN hub_entries e ON e.id = hub_fts.rowid WHERE hub_fts MATCH ? ORDER BY rank LIMIT ?",
                (*_WEIGHTS, match, CANDIDATES),
            )
            for row_id, body, rank in rows:
                candidates[row_id] = (body, -float(rank))
        for word in (w for w in words if len(w) < 3):
            pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self.conn.execute(
                "SELECT id, body FROM hub_entries WHERE name LIKE ? ESCAPE '\\' LIMIT ?", (pattern, CANDIDATES)
            )
            for row_id, body in rows:
                candidates.setdefault(row_id, (body, 0.0))
        ranked: list[tuple[float, float, CatalogEntry]] = []
        for body, relevance in candidates.values():
            entry = _entry(body)
            if not _wanted(entry, kind, sources):
                continue
            if entry.hidden and entry.name.lower() not in words:
                continue
            fields = field_score(entry, words)
            if fields <= 0 and relevance <= 0:
                continue
            ranked.append((fields, relevance, replace(entry, score=fields + relevance / (1.0 + relevance))))
        ranked.sort(key=lambda item: (-item[0], -item[1], item[2].name))
        return [item[2] for item in ranked[:limit]]


def _wanted(entry: CatalogEntry, kind: ArtifactKind | None, sources: Sequence[str] | None) -> bool:
    return (kind is None or entry.kind is kind) and (sources is None or entry.source in sources)


def _entry(body: str) -> CatalogEntry:
    data: dict[str, Any] = json.loads(body)
    return CatalogEntry(
        kind=ArtifactKind(data["kind"]),
        name=data["name"],
        version=data["version"],
        source=data["source"],
        display_name=data.get("display_name", ""),
        description=data.get("description", ""),
        keywords=tuple(data.get("keywords", ())),
        tags=tuple(data.get("tags", ())),
        aliases=tuple(data.get("aliases", ())),
        signer=data.get("signer", ""),
        publisher=data.get("publisher", ""),
        verdict=data.get("verdict", "unscanned"),
        stars=data.get("stars"),
        downloads=data.get("downloads"),
        hidden=bool(data.get("hidden", False)),
    )


class _transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
