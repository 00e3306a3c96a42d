"""Property tests of the OAuth and Google parsers: arbitrary input only raises pincer's errors."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.builtins.google.sheets import check_range
from pincer.builtins.oauth import LoginStart, code_from_redirect, load_record
from pincer.core.errors import OAuthCallbackRefused, UsageError

START = LoginStart(provider="google", url="https://accounts.example/auth", state="s" * 32, code_verifier="v" * 64,
                   redirect_uri="http://127.0.0.1:4711/callback", scopes=("a",))
_URLS = st.one_of(
    st.text(max_size=300),
    st.builds(lambda q: f"http://127.0.0.1:4711/callback?{q}", st.text(max_size=200)),
    st.builds(lambda c, s: f"http://127.0.0.1:4711/callback?code={c}&state={s}", st.text(max_size=40),
              st.sampled_from(["s" * 32, "forged", ""])),
)


@given(_URLS)
@settings(max_examples=300, deadline=None)
def test_a_redirect_url_gives_a_code_or_a_refusal(url: str) -> None:
    try:
        code = code_from_redirect(START, url)
    except OAuthCallbackRefused:
        return
    assert isinstance(code, str) and f"state={'s' * 32}" in url  # only this login's state passes


@given(st.text(max_size=600))
@settings(max_examples=300, deadline=None)
def test_a_range_is_one_segment_or_refused(value: str) -> None:
    try:
        encoded = check_range(value)
    except UsageError:
        return
    assert "/" not in encoded and "?" not in encoded and "#" not in encoded and " " not in encoded


@given(st.one_of(st.binary(max_size=400), st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(
    st.sampled_from(["provider", "scopes", "obtained_at", "expires_at", "has_refresh"]),
    st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=10), st.lists(st.text(max_size=5)))))))
@settings(max_examples=200, deadline=None)
def test_any_record_file_loads_or_counts_as_expired(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "oauth").mkdir()
        (Path(home) / "oauth" / "google.json").write_bytes(data)
        record = load_record(Path(home), "google")
    assert record is not None


def test_a_damaged_record_is_expired_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "oauth").mkdir()
    for text in (b"", b"{", b"[]", b'{"provider": 1}', b'{"provider": "google", "obtained_at": "x"}', b"\xff\xfe"):
        (tmp_path / "oauth" / "google.json").write_bytes(text)
        record = load_record(tmp_path, "google")
        assert record is not None and record.expires_within(0.0)
