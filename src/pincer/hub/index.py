"""Catalog search: SQLite FTS5 (BM25) to find candidates, IronClaw's field weights to rank them.

Two FTS5 tables over (name, display name, keywords, tags, description): words (unicode61) and
trigrams. A query's words are OR-ed as prefixes (``"rev"*`` finds ``review``) in the words
table; FTS5 orders the matches by BM25 with per-column weights (10, 8, 6, 4, 2) and the best
``CANDIDATES`` are ranked again in Python by IronClaw's field weights, per query word:

===============  =======  =========
field            exact    substring
===============  =======  =========
name             10       5
display name     8        4
keyword          6        3
tag              4        -
description      -        2
===============  =======  =========

When the prefixes find fewer entries than were asked for, the trigram table adds the entries
that hold a word *inside* a longer one (``hub`` in ``github``), as IronClaw's substring rules
expect; a word of one or two characters (below the trigram size) is then matched with LIKE. The
score is the field weights' sum plus the BM25 relevance squashed into [0, 1) (a tie-breaker).
Only the winners' stored rows are parsed. Hidden entries (IronClaw's ``"hidden": true``) appear
only when the query is their exact name.

The client keeps its index of folder sources in ``$PINCER_HOME/hub/index.db`` (its own file,
rebuilt per source when the source's files change); the hub server keeps the same tables in its
own database. ``bench/hub.py`` measures it over 10,000 entries next to a plain LIKE scan.
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
from pincer.store.open_lock import open_lock

__all__ = ["SearchIndex", "field_score", "CANDIDATES", "open_index", "query_words"]

CANDIDATES = 100
MAX_QUERY_WORDS = 16
_WEIGHTS = (10.0, 8.0, 6.0, 4.0, 2.0)  # bm25 column weights, in the table's column order
_WORD = re.compile(r"[\w][\w.+-]*", re.UNICODE)
_LIST = "\n"  # keywords and tags in one FTS column; a query word never spans the separator

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
    name, display_name, keywords, tags, description, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS hub_trigrams USING fts5(
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
    return _score(entry.name, entry.display_name, [*entry.keywords, *entry.aliases], list(entry.tags), entry.description, words)


def _score(name: str, display: str, keywords: Sequence[str], tags: Sequence[str], description: str, words: Sequence[str]) -> float:
    name = name.lower()
    display = display.lower()
    keywords = [k.lower() for k in keywords]
    tags = [t.lower() for t in tags]
    description = description.lower()
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
    with open_lock(path):  # a new file's switch to WAL, one process at a time (store/open_lock.py)
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
            self.conn.executemany("DELETE FROM hub_trigrams WHERE rowid = ?", [(i,) for i in ids])
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
                self._delete(row[0])
            self._insert(entry)

    def remove(self, source: str, kind: ArtifactKind, name: str) -> None:
        with _transaction(self.conn):
            row = self.conn.execute(
                "SELECT id FROM hub_entries WHERE source = ? AND kind = ? AND name = ?", (source, kind.value, name)
            ).fetchone()
            if row is not None:
                self._delete(row[0])

    def _delete(self, row_id: int) -> None:
        self.conn.execute("DELETE FROM hub_fts WHERE rowid = ?", (row_id,))
        self.conn.execute("DELETE FROM hub_trigrams WHERE rowid = ?", (row_id,))
        self.conn.execute("DELETE FROM hub_entries WHERE id = ?", (row_id,))

    def _insert(self, entry: CatalogEntry) -> None:
        body = json.dumps({**entry.to_json(), "aliases": list(entry.aliases), "hidden": entry.hidden})
        cursor = self.conn.execute(
            "INSERT INTO hub_entries (source, kind, name, hidden, body) VALUES (?, ?, ?, ?, ?)",
            (entry.source, entry.kind.value, entry.name, int(entry.hidden), body),
        )
        row = (
            cursor.lastrowid,
            entry.name,
            entry.display_name,
            _LIST.join([*entry.keywords, *entry.aliases]),
            _LIST.join(entry.tags),
            entry.description,
        )
        for table in ("hub_fts", "hub_trigrams"):
            self.conn.execute(f"INSERT INTO {table} (rowid, name, display_name, keywords, tags, description) VALUES (?, ?, ?, ?, ?, ?)", row)

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
        where, params = _filters(kind, sources)
        if not words:
            rows = self.conn.execute(f"SELECT body FROM hub_entries e WHERE hidden = 0{where} ORDER BY name LIMIT ?", (*params, limit))
            return [_entry(r[0]) for r in rows]
        # Candidates come from the FTS table's own columns (no JSON parsed for the ones that lose);
        # the kind and source filters apply before the BM25 order and its limit.
        candidates: dict[int, tuple[tuple[str, str, str, str, str], float, bool]] = {}
        # Words as prefixes first (the unicode61 index: cheap); words inside longer ones ("hub" in
        # "github", the trigram index) only when that finds fewer than the results asked for.
        quoted = " OR ".join('"' + w.replace('"', '""') + '"*' for w in words)
        self._candidates("hub_fts", quoted, where, params, candidates)
        long_words = [w for w in words if len(w) >= 3]
        if long_words and len(candidates) < limit:
            self._candidates("hub_trigrams", " OR ".join('"' + w.replace('"', '""') + '"' for w in long_words), where, params, candidates)
        for word in (w for w in words if len(w) < 3 and len(candidates) < limit):
            pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self.conn.execute(
                "SELECT hub_fts.rowid, hub_fts.name, display_name, keywords, tags, description, e.hidden FROM hub_entries e "
                f"JOIN hub_fts ON hub_fts.rowid = e.id WHERE e.name LIKE ? ESCAPE '\\'{where} LIMIT ?",
                (pattern, *params, CANDIDATES),
            )
            for row_id, name, display, keywords, tags, description, hidden in rows:
                candidates.setdefault(row_id, ((name, display, keywords, tags, description), 0.0, bool(hidden)))
        ranked: list[tuple[float, float, str, int]] = []
        for row_id, ((name, display, keywords, tags, description), relevance, hidden) in candidates.items():
            if hidden and name.lower() not in words:
                continue
            fields = _score(name, display, keywords.split(_LIST), tags.split(_LIST), description, words)
            if fields <= 0 and relevance <= 0:
                continue
            ranked.append((fields, relevance, name, row_id))
        ranked.sort(key=lambda item: (-item[0], -item[1], item[2]))
        best = ranked[:limit]
        if not best:
            return []
        bodies = dict(self.conn.execute(
            f"SELECT id, body FROM hub_entries WHERE id IN ({', '.join('?' * len(best))})", tuple(r[3] for r in best)
        ).fetchall())  # fmt: skip
        return [replace(_entry(bodies[row_id]), score=fields + relevance / (1.0 + relevance)) for fields, relevance, _name, row_id in best]


    def _candidates(self, table: str, match: str, where: str, params: tuple[str, ...], into: dict[int, Any]) -> None:
        rows = self.conn.execute(
            f"SELECT {table}.rowid, {table}.name, display_name, keywords, tags, description, e.hidden, "
            f"bm25({table}, ?, ?, ?, ?, ?) AS rank FROM {table} JOIN hub_entries e ON e.id = {table}.rowid "
            f"WHERE {table} MATCH ?{where} ORDER BY rank LIMIT ?",
            (*_WEIGHTS, match, *params, CANDIDATES),
        )
        for row_id, name, display, keywords, tags, description, hidden, rank in rows:
            if row_id not in into:
                into[row_id] = ((name, display, keywords, tags, description), -float(rank), bool(hidden))


def _filters(kind: ArtifactKind | None, sources: Sequence[str] | None) -> tuple[str, tuple[str, ...]]:
    clauses, params = [], []
    if kind is not None:
        clauses.append("e.kind = ?")
        params.append(kind.value)
    if sources is not None:
        clauses.append(f"e.source IN ({', '.join('?' * len(sources))})" if sources else "0")
        params.extend(sources)
    return ("".join(f" AND {c}" for c in clauses), tuple(params))


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
