"""No false positives (issue 34): over more than 10 MB of real text that holds no stored secret (pincer's
own sources, docs and tests, and the Python standard library's sources), a scanner holding 100
random secrets redacts nothing that a scanner holding none does not (what both redact are
well-known credential shapes in test fixtures and docs, which are not stored secrets).
"""

from __future__ import annotations

import random
import string
import sysconfig
import time
from pathlib import Path

import pytest

from pincer.safety.scanner import LeakScanner

ROOT = Path(__file__).resolve().parents[2]
MIN_CORPUS_BYTES = 10 * 1024 * 1024
SECRET_COUNT = 100


def _corpus() -> list[str]:
    """pincer's text files first, then the standard library's modules, until past MIN_CORPUS_BYTES."""
    paths = sorted(p for folder in ("src", "docs", "tests") for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".toml"))
    paths.append(ROOT / "README.md")
    paths += sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    texts: list[str] = []
    size = 0
    for path in paths:
        if size >= MIN_CORPUS_BYTES:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        size += len(text.encode("utf-8"))
    assert size >= MIN_CORPUS_BYTES, f"only {size} bytes of text found"
    return texts


def _secrets() -> list[str]:
    """Half printable ASCII of 12 to 64 characters (passwords), half url-safe tokens (API keys)."""
    rng = random.Random(34)
    printable = string.ascii_letters + string.digits + string.punctuation + " "
    urlsafe = string.ascii_letters + string.digits + "-_"
    half = SECRET_COUNT // 2
    return [
        *("".join(rng.choices(printable, k=rng.randint(12, 64))) for _ in range(half)),
        *("".join(rng.choices(urlsafe, k=rng.randint(16, 48))) for _ in range(SECRET_COUNT - half)),
    ]


@pytest.mark.slow
def test_no_redaction_of_a_stored_secret_in_ten_megabytes_of_real_text() -> None:
    texts = _corpus()
    secrets = _secrets()
    stored, shapes_only = LeakScanner(secrets), LeakScanner([])
    # Not vacuous: every stored secret, dash-joined in the middle of a corpus file, is redacted.
    for secret in secrets[::10]:
        planted = texts[0][:500] + "-".join(secret) + texts[0][500:1000]
        assert stored.scan_text(planted)[1] > shapes_only.scan_text(planted)[1], secret
    started = time.perf_counter()
    extra: list[str] = []
    for text in texts:
        with_store = stored.scan_text(text)
        if with_store[1] and with_store != shapes_only.scan_text(text):
            extra.append(with_store[0][:200])
    elapsed = time.perf_counter() - started
    assert extra == [], f"{len(extra)} texts had redactions only the stored secrets explain"
    print(f"scanned {sum(map(len, texts)):,} characters in {len(texts)} files in {elapsed:.1f} s")
