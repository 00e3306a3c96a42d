"""Leak scanner cost on the hot path, against a plain ``str.find`` measured in the same run.

    .venv/bin/python bench/scanner.py

Each row is the median over 7 repeats of the mean time per call. ``str.find`` looks for one
absent 32-character string in the same text: the cheapest check any scanner could make. The
``re alternation`` row is the obvious alternative (one compiled regex over every literal form),
shown to justify the Aho-Corasick automaton.

The first section compares the normalising scanner with the one before it (issue 34: the
normalised pass may cost at most 2x the old scan of a megabyte), kept callable in
``bench/_scanner_baseline.py``: the same texts without a secret, the same store, one run.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import statistics
import timeit
from collections.abc import Callable
from pathlib import Path

from _scanner_baseline import BaselineScanner
from pincer.safety.encodings import encoded_forms
from pincer.safety.limits import limit_output
from pincer.safety.scanner import LeakScanner

REPEATS = 7
TARGET_SECONDS_PER_REPEAT = 0.15

TEXT_100 = "2024-05-01T12:00:00Z INFO request handled in 12 ms path=/api/v1/items user=alice status=200 ok"
# The same kind of line with percent-escapes in it: the scanner also searches it decoded.
TEXT_ESCAPED_100 = "2024-05-01T12:00:00Z INFO GET /search?q=caf%C3%A9%20au%20lait&page=2 in 12 ms status=200 ok"
JSON_100 = {"status": "ok", "count": 3, "items": ["alpha", "beta", "gamma"], "next": None, "took_ms": 12.5}
TEXT_10K = (TEXT_100 + "\n") * 105
MB = 1_000_000
LOG_1M = ((TEXT_100 + "\n") * (MB // len(TEXT_100) + 1))[:MB]


def source_text(size: int = MB) -> str:
    """pincer's own sources: code with backslashes, escapes, some non-ASCII, identifiers galore."""
    root = Path(__file__).resolve().parents[1] / "src" / "pincer"
    text = ""
    for path in sorted(root.rglob("*.py")):
        text += path.read_text(encoding="utf-8")
        if len(text) >= size:
            break
    return text[:size]


def per_call_us(fn: Callable[[], object]) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, int(number * TARGET_SECONDS_PER_REPEAT / 0.2))
    return statistics.median(t / number * 1e6 for t in timer.repeat(REPEATS, number))


def regex_alternation(values: list[str]) -> re.Pattern[str]:
    forms = {form for value in values for form in encoded_forms(value, min_length=8)}
    return re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))


def row(name: str, us: float, baseline_us: float) -> None:
    print(f"  {name:46} {us:10.3f} {us / baseline_us:10.1f}x")


def bench_store(count: int, find_100: float, find_10k: float) -> None:
    values = [secrets.token_urlsafe(24) for _ in range(count)]
    build_s = min(timeit.repeat(lambda: LeakScanner(values), number=1, repeat=3))
    scanner = LeakScanner(values)
    print(f"\nstore of {count} secrets (scanner built in {build_s * 1e3:.1f} ms)")
    row(
        f"scan_text, {len(TEXT_100)}-byte text, nothing found",
        per_call_us(lambda: scanner.scan_text(TEXT_100)),
        find_100,
    )
    size = len(json.dumps(JSON_100))
    row(f"scan, {size}-byte JSON object, nothing found", per_call_us(lambda: scanner.scan(JSON_100)), find_100)
    row(
        f"scan_text, {len(TEXT_10K)}-byte text, nothing found",
        per_call_us(lambda: scanner.scan_text(TEXT_10K)),
        find_10k,
    )
    row(
        f"scan_text, {len(TEXT_ESCAPED_100)}-byte text with %-escapes, nothing",
        per_call_us(lambda: scanner.scan_text(TEXT_ESCAPED_100)),
        find_100,
    )
    if count:
        leaked = TEXT_100[:40] + base64.b64encode(b"xx" + values[0].encode()).decode() + TEXT_100[40:]
        found_us = per_call_us(lambda: scanner.scan_text(leaked))
        row(f"scan_text, {len(leaked)}-byte text, base64 secret found", found_us, find_100)
        escaped = TEXT_100[:40] + "".join(f"%{b:02X}" for b in values[0].encode()) + TEXT_100[40:]
        found_us = per_call_us(lambda: scanner.scan_text(escaped))
        row(f"scan_text, {len(escaped)}-byte text, %-encoded secret found", found_us, find_100)
        alternation = regex_alternation(values)
        regex_us = per_call_us(lambda: alternation.search(TEXT_100))
        row(f"(re alternation over all forms, {len(TEXT_100)}-byte text)", regex_us, find_100)
    injected = secrets.token_urlsafe(24)
    row("with_values(one new value) per call", per_call_us(lambda: scanner.with_values([injected])), find_100)
    per_call = scanner.with_values([injected])
    row(f"  then scan_text, {len(TEXT_100)}-byte text", per_call_us(lambda: per_call.scan_text(TEXT_100)), find_100)


def bench_before_after(count: int) -> None:
    values = [secrets.token_urlsafe(24) for _ in range(count)]
    before, after = BaselineScanner(values), LeakScanner(values)
    build_before = min(timeit.repeat(lambda: BaselineScanner(values), number=1, repeat=3))
    build_after = min(timeit.repeat(lambda: LeakScanner(values), number=1, repeat=3))
    print(f"\nbefore and after issue 34, store of {count} secrets, no stored secret in the text")
    print(f"  {'':46} {'before us':>10} {'after us':>10} {'after/before':>12}")
    source = source_text()
    texts = [
        (f"scan_text, {len(TEXT_100)}-byte log line", lambda s: s.scan_text(TEXT_100)),
        (f"scan, {len(json.dumps(JSON_100))}-byte JSON object", lambda s: s.scan(JSON_100)),
        ("scan_text, 1 MB of log lines (ASCII)", lambda s: s.scan_text(LOG_1M)),
        ("scan_text, 1 MB of pincer's source", lambda s: s.scan_text(source)),
    ]
    for name, run in texts:
        # pincer's source holds one phrase the bearer-token shape matches; both scanners find it.
        assert run(after)[1] == run(before)[1] <= 1, name
        old, new = per_call_us(lambda r=run: r(before)), per_call_us(lambda r=run: r(after))
        print(f"  {name:46} {old:10.1f} {new:10.1f} {new / old:11.2f}x")
    print(f"  {'building the scanner':46} {build_before * 1e6:10.0f} {build_after * 1e6:10.0f} {build_after / build_before:11.2f}x")


def main() -> None:
    for count in (10, 100):
        bench_before_after(count)
    absent = secrets.token_urlsafe(24)
    print(f"{'':48} {'us/call':>10} {'vs find':>10}")
    find_100 = per_call_us(lambda: TEXT_100.find(absent))
    find_10k = per_call_us(lambda: TEXT_10K.find(absent))
    print("\nbaseline: str.find of one absent string")
    row(f"{len(TEXT_100)}-byte text", find_100, find_100)
    row(f"{len(TEXT_10K)}-byte text", find_10k, find_10k)
    for count in (0, 10, 100, 1000):
        bench_store(count, find_100, find_10k)
    print("\noutput limit")
    size = len(json.dumps(JSON_100))
    row(f"limit_output, {size}-byte JSON object", per_call_us(lambda: limit_output(JSON_100)), find_100)


if __name__ == "__main__":
    main()
