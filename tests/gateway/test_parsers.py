"""Property tests for what the gateway parses from untrusted input: Host and Origin headers,
bearer tokens, refused bodies, the requestState it minted, and the [gateway] config section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.config import parse_config
from pincer.core.errors import ConfigError
from pincer.gateway.channel import _open_state, _seal_state
from pincer.gateway.guard import Guard, _call_attempt
from pincer.gateway.tokens import TokenBook, token_digest

HOME = Path("/nonexistent-pincer-home")
TOKEN = "pcr_primary_token_for_property_tests"
EXAMPLES = settings(max_examples=300, deadline=None)


def _guard(**kwargs: Any) -> Guard:
    config = parse_config(f'[[gateway.tokens]]\nsha256 = "{token_digest("pcr_second")}"\nsession = "ci"\n', home=HOME)
    return Guard(
        app=lambda *a: None,  # type: ignore[arg-type, return-value]
        tokens=TokenBook(config=config, primary_token=TOKEN),
        max_body_bytes=1024,
        bound_host="127.0.0.1",
        **kwargs,
    )


GUARD = _guard(allowed_hosts=["pincer.internal", "exact.example:9000"], allowed_origins=["https://console.example"])


def _authenticate(authorization: str) -> Any:
    return anyio.run(GUARD._authenticate, authorization)


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8765", True), ("localhost", True), ("LOCALHOST:1", True), ("[::1]:80", True),
        ("pincer.internal:1", True), ("exact.example:9000", True), ("exact.example:9001", False),
        ("evil.example", False), ("127.0.0.1.evil.example", False), ("localhost.evil:1", False), ("", False),
    ],
)  # fmt: skip
def test_host_table(host: str, allowed: bool) -> None:
    assert GUARD._host_allowed(host) is allowed


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:3000", True), ("https://127.0.0.1", True), ("http://[::1]:9", True),
        ("https://console.example", True), ("https://console.example/", True),
        ("http://evil.example", False), ("null", False), ("file://localhost", False),
        ("http://localhost@evil.example", False),
    ],
)  # fmt: skip
def test_origin_table(origin: str, allowed: bool) -> None:
    assert GUARD._origin_allowed(origin) is allowed


@EXAMPLES
@given(st.text(max_size=300))
def test_host_and_origin_checks_never_raise_and_refuse_foreign_names(value: str) -> None:
    host_ok = GUARD._host_allowed(value)
    origin_ok = GUARD._origin_allowed(value)
    assert isinstance(host_ok, bool) and isinstance(origin_ok, bool)
    if host_ok:
        name = value.lower().rsplit(":", 1)[0] if value.count(":") == 1 else value.lower()
        assert name.startswith(("127.", "localhost", "[::1]", "::1", "pincer.internal", "exact.example"))


@EXAMPLES
@given(st.text(max_size=200))
def test_only_known_tokens_map_to_sessions(presented: str) -> None:
    session = _authenticate(f"Bearer {presented}")
    if presented.strip() == TOKEN:
        assert session is not None and session.name == "main"
    elif presented.strip() == "pcr_second":
        assert session is not None and session.name == "ci"
    else:
        assert session is None


def test_known_tokens_in_any_scheme_case() -> None:
    assert _authenticate(f"bearer {TOKEN}") is not None
    assert _authenticate("Bearer pcr_second").name == "ci"  # type: ignore[union-attr]
    assert _authenticate(f"Token {TOKEN}") is None


@EXAMPLES
@given(st.binary(max_size=2048), st.sampled_from(["/mcp", "/api/v1/tools/echo/call", "/api/v1/tools", "/other"]))
def test_refused_bodies_never_crash_the_call_detection(head: bytes, path: str) -> None:
    attempt = _call_attempt({"path": path}, head)
    if path == "/api/v1/tools/echo/call":
        assert attempt == ("rest", "echo")
    elif attempt is not None:
        caller, tool = attempt
        assert caller == "mcp" and path == "/mcp" and isinstance(tool, str) and tool


@EXAMPLES
@given(
    st.dictionaries(
        st.text(max_size=20),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
            max_leaves=10,
        ),
        max_size=5,
    ),
    st.none() | st.text(max_size=50),
)
def test_request_state_round_trips(answers: dict[str, Any], state: str | None) -> None:
    assert _open_state(_seal_state(answers, state)) == (answers, state)


@EXAMPLES
@given(st.text(max_size=300))
def test_foreign_request_state_is_kept_as_the_tools_own(state: str) -> None:
    answers, user_state = _open_state(state)
    assert isinstance(answers, dict)
    assert user_state is None or isinstance(user_state, str)


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**40), max_value=2**40), st.text(max_size=30),
    st.lists(st.text(max_size=10), max_size=3),
)  # fmt: skip


@EXAMPLES
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "host",
                "port",
                "allow_remote",
                "session",
                "max_body_bytes",
                "allowed_hosts",
                "allowed_origins",
                "tokens",
                "nope",
            ]
        ),
        _VALUES,
        max_size=5,
    )
)
def test_gateway_config_parses_or_says_which_key(section: dict[str, Any]) -> None:
    body = "\n".join(f"{key} = {json.dumps(value)}" for key, value in section.items() if value is not None)
    try:
        config = parse_config(f"[gateway]\n{body}\n", home=HOME)
    except ConfigError as exc:
        assert "gateway" in exc.message or "TOML" in exc.message
    else:
        assert 0 <= config.gateway.port <= 65_535 and config.gateway.max_body_bytes >= 1_024


@EXAMPLES
@given(st.binary(max_size=1024) | st.text(max_size=300).map(str.encode))
def test_the_direct_path_declines_what_it_cannot_read(body: bytes) -> None:
    from pincer.gateway.fastpath import ModernCallFastPath

    call = ModernCallFastPath._eligible_call(body)
    if call is not None:
        decoded, name, arguments, meta = call
        assert decoded["method"] == "tools/call" and isinstance(name, str) and name
        assert isinstance(arguments, dict) and isinstance(meta, dict) and "progressToken" not in meta


@EXAMPLES
@given(
    st.recursive(
        st.none() | st.booleans() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=10), c, max_size=3),
        max_leaves=8,
    )
)
def test_elicitation_replies_become_a_decision_or_nothing(reply: Any) -> None:
    from pincer.gateway.approvals import answer_from_reply
    from pincer.store.approvals import Answer

    answer = answer_from_reply(reply)
    assert answer is None or isinstance(answer, Answer)
    if answer is not None and answer is not Answer.DENY:
        assert reply["action"] == "accept" and reply["content"]["decision"] == answer.value


@EXAMPLES
@given(raw=st.one_of(st.none(), st.text(max_size=40), st.integers().map(str)))
def test_a_page_limit_is_in_bounds_or_refused_naming_it(raw: str | None) -> None:
    from pincer.core.errors import UsageError
    from pincer.store.paging import MAX_PAGE_LIMIT, parse_limit

    try:
        limit = parse_limit(raw)
    except UsageError as exc:
        assert exc.message.startswith("limit: ") and exc.hint
    else:
        assert 1 <= limit <= MAX_PAGE_LIMIT


@EXAMPLES
@given(created_at=st.floats(allow_nan=False, allow_infinity=False), row_id=st.text(min_size=1, max_size=64))
def test_a_cursor_reads_back_as_it_was_given(created_at: float, row_id: str) -> None:
    from pincer.store.paging import Cursor, encode_cursor, parse_cursor

    cursor = Cursor(at=created_at, id=row_id)
    assert parse_cursor(encode_cursor(cursor)) == cursor


@EXAMPLES
@given(raw=st.one_of(st.text(max_size=300), st.binary(max_size=200).map(lambda b: __import__("base64").urlsafe_b64encode(b).decode())))
def test_any_cursor_text_is_a_cursor_or_refused_naming_it(raw: str) -> None:
    import math

    from pincer.core.errors import UsageError
    from pincer.store.paging import parse_cursor

    try:
        cursor = parse_cursor(raw)
    except UsageError as exc:
        assert exc.message.startswith("cursor: ") and exc.hint
    else:
        assert cursor is not None and math.isfinite(cursor.at) and 0 < len(cursor.id) <= 128
