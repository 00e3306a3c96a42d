"""The one host-pattern matcher (``pincer.safety.hosts``): the http tool, WASM and OpenAPI requests,
credential injection and the sandbox proxy all read patterns through it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import EgressDenied, UsageError
from pincer.safety.hosts import EXACT_RANK, HostPattern, host_pattern_rank, normalise_request_host


@pytest.mark.parametrize(
    ("host", "pattern", "port", "ok"),
    [
        ("api.example.com", "api.example.com", None, True),
        ("API.Example.COM.", "api.example.com", None, True),
        ("api.example.com", "*.example.com", None, True),
        ("a.b.example.com", "*.example.com", None, True),
        ("example.com", "*.example.com", None, False),
        ("badexample.com", "*.example.com", None, False),
        ("example.com.evil.io", "example.com", None, False),
        ("anything.io", "*", None, False),
        ("localhost", "localhost:3000", 3000, True),
        ("localhost", "localhost:3000", 4000, False),
        ("localhost", "localhost:3000", None, True),
        ("::1", "[::1]:8080", 8080, True),
        ("[::1]", "[0:0::1]", 443, True),
        ("2002:7f00:1::", "2002:7f00:1::", 80, True),  # without brackets: an address, no port
        ("xn--bcher-kva.de", "bücher.de", 443, True),
        ("api.example.com", "api.example.com:*", 8443, True),
        ("", "example.com", None, False),
        ("example.com", "", None, False),
    ],
)
def test_host_pattern_rank_matches(host: str, pattern: str, port: int | None, ok: bool) -> None:
    assert (host_pattern_rank(host, pattern, port=port) is not None) is ok


def test_exact_beats_wildcard_and_longer_suffix_beats_shorter() -> None:
    assert host_pattern_rank("a.b.example.com", "a.b.example.com") == EXACT_RANK
    narrow = host_pattern_rank("a.b.example.com", "*.b.example.com")
    wide = host_pattern_rank("a.b.example.com", "*.example.com")
    assert narrow is not None and wide is not None and EXACT_RANK > narrow > wide


@pytest.mark.parametrize(
    ("pattern", "port", "ok"),
    [
        ("api.example.com", 443, True),
        ("api.example.com", 80, True),
        ("api.example.com", 8443, False),  # no port written: only the default ports
        ("api.example.com:8443", 8443, True),
        ("api.example.com:8443", 443, False),
        ("api.example.com:*", 8443, True),
    ],
)
def test_default_ports_apply_only_to_patterns_without_a_port(pattern: str, port: int, ok: bool) -> None:
    assert HostPattern.parse(pattern).matches("api.example.com", port, default_ports=(80, 443)) is ok


@pytest.mark.parametrize(
    "pattern",
    ["*", "a*.example.com", "*.*.com", "example.com:99999", "example.com:x", "", "ex ample.com", "::1:x", "[::1", "[::1]x", "a%2e.com"],
)
def test_bad_patterns_are_usage_errors(pattern: str) -> None:
    with pytest.raises(UsageError):
        HostPattern.parse(pattern)


@given(st.text(max_size=40))
@settings(max_examples=400, deadline=None)
def test_parsing_arbitrary_text_raises_only_our_errors(text: str) -> None:
    try:
        HostPattern.parse(text)
    except UsageError:
        pass
    try:
        normalise_request_host(text)
    except EgressDenied:
        pass
    assert host_pattern_rank(text, text) is None or isinstance(host_pattern_rank(text, text), int)
