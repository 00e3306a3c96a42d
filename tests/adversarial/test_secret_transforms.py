"""Issue 20 item 5: a stored secret echoed back in a trivial transform reached the model.

Before the fix the leak scanner knew a secret's literal forms only (raw, URL/JSON escapes, hex,
base64): an endpoint that echoed the injected credential reversed, spaced out, upper-cased, rot13,
split in two, ``\\uXXXX``-escaped, base32 or zero-width-joined passed it through the chain into
the tool result (what the model and the run's transcript get). Each test failed on main.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.safety.normalising import normalise
from pincer.safety.scanner import LeakScanner
from pincer.service import Pincer
from tests.localservers import TRANSFORMS, serve

SECRET = "tr0ub4dor-Horse-8-battery"  # 25 characters
ORDINARY = [
    "2024-05-01T12:00:00Z INFO request handled in 12 ms path=/api/v1/items user=alice status=200 ok",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX. \\u0041\\x42 done",
    json.dumps({"items": ["troubadour", "horse", "battery"], "note": "tr0ub4dor is a word"}),
]


def _visible(output: str, how: str) -> list[str]:
    """What of SECRET can still be read in ``output``: the transformed text itself, or (for a
    split) its longer piece, in any case/spacing."""
    sent = TRANSFORMS[how](SECRET)
    if how == "split":
        middle = len(SECRET) // 2
        longer = max(SECRET[:middle], SECRET[middle:], key=len)
        return [longer] if normalise(longer) in normalise(output) else []
    return [sent] if sent in output or normalise(sent) in normalise(output) else []


@pytest.mark.parametrize("how", sorted(TRANSFORMS))
def test_a_transformed_secret_is_redacted(how: str) -> None:
    """Failed on main for every transform here: the scanner searched literal forms only."""
    text = f"response: {TRANSFORMS[how](SECRET)} (end)"
    output, count = LeakScanner([SECRET]).scan_text(text)
    assert count >= 1 and not _visible(output, how), output
    assert output.startswith("response: ") and output.endswith(" (end)")  # only the secret's span goes


@pytest.mark.parametrize("how", sorted(TRANSFORMS))
def test_a_transformed_value_injected_in_one_call_is_redacted(how: str) -> None:
    """Failed on main: values added per call (``with_values``) had only their literal forms."""
    scanner = LeakScanner([]).with_values([SECRET])
    output, count = scanner.scan({"body": f"echo: {TRANSFORMS[how](SECRET)}"})
    assert count >= 1 and not _visible(output["body"], how), output


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert LeakScanner([SECRET]).scan_text(text) == (text, 0)


def test_short_values_keep_only_their_literal_forms() -> None:
    """Normalising a value with fewer than 8 letters and digits would match ordinary text by chance."""
    scanner = LeakScanner(["abc123"])
    assert scanner.scan_text("ABC123 and 321cba") == ("ABC123 and 321cba", 0)
    assert scanner.scan_text("x abc123 y") == ("x [REDACTED:secret] y", 1)


@pytest.mark.anyio
async def test_an_endpoint_echoing_the_injected_credential_transformed_is_redacted(tmp_path: Path) -> None:
    """Failed on main: with ``api_key`` injected into ``http`` as a header, a /mirror endpoint
    returning it transformed gave the model the credential in 12 of these 13 forms (mixed-case hex was caught)."""
    leaks: dict[str, Any] = {}
    with serve() as server:
        config = parse_config(
            f"""
[network]
allow_private = true

[[grants]]
tool = "http"
effects = {{ network = "allow", use_secret = "allow" }}
hosts = ["127.0.0.1:{server.port}"]

[[credentials]]
secret = "api_key"
location = "header"
name = "X-Api-Key"
host_patterns = ["127.0.0.1"]
""",
            home=tmp_path,
        )
        async with Pincer.open(tmp_path, config=config, secret_key=b"c" * 32) as pincer:
            pincer.secrets.set("api_key", SECRET)
            for how in sorted(TRANSFORMS):
                url = server.url(f"/mirror?header=X-Api-Key&how={how}")
                result = await pincer.call(CallRequest(tool="http", args={"url": url}))
                assert result.ok, result.error
                body = json.dumps(result.output, ensure_ascii=False)
                if _visible(result.output["body"], how) or SECRET in body:
                    leaks[how] = result.output["body"]
    assert all(r.headers["X-Api-Key"] == SECRET for r in server.requests)  # it was injected
    assert leaks == {}
