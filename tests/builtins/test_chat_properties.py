"""Property tests for what slack, telegram, portfolio and composio read: arbitrary API answers,
upload URLs and config declarations only ever raise pincer's own errors."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.builtins import composio, portfolio, slack, telegram
from pincer.builtins.api import BaseUrl
from pincer.core.errors import ConfigError, EgressDenied, PincerError
from pincer.safety.egress import HttpResponse

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_answer = st.one_of(
    _json,
    st.fixed_dictionaries({"ok": st.booleans()}, optional={"error": _json, "result": _json, "description": _json,
                                                           "error_code": _json, "parameters": _json,
                                                           "messages": _json, "channels": _json, "user": _json}),
)


def _response(status: int, body: Any, raw: bytes | None = None) -> HttpResponse:
    return HttpResponse(status=status, headers=(), body=raw if raw is not None else json.dumps(body).encode())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([200, 400, 401, 429, 500]), _answer, st.one_of(st.none(), st.binary(max_size=40)))
def test_api_answers_parse_or_raise_pincer_errors(status: int, body: Any, raw: bytes | None) -> None:
    response = _response(status, body, raw)
    for check in (lambda: slack._check("chat.postMessage", response), lambda: telegram._check("sendMessage", response),
                  lambda: portfolio._check(response)):
        try:
            check()
        except PincerError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["ts", "user", "text", "reactions", "files", "thread_ts"]), _json, max_size=6),
       st.dictionaries(st.sampled_from(["message_id", "chat", "from", "photo", "document", "text"]), _json, max_size=6))
def test_messages_are_shaped_whatever_they_hold(slack_message: dict[str, Any], telegram_message: dict[str, Any]) -> None:
    json.dumps(slack._message(slack_message))
    json.dumps(telegram._message(telegram_message))


_BASES = [BaseUrl.parse("https://files.slack.com", configured=False, key="k"),
          BaseUrl.parse("http://127.0.0.1:8080", configured=True, key="k")]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.builds(lambda p: f"https://files.slack.com/{p}", st.text(max_size=30))))
def test_upload_urls_stay_on_the_origin_or_are_refused(url: str) -> None:
    for base in _BASES:
        try:
            path = slack._upload_path(base, url)
        except EgressDenied:
            continue
        assert path.startswith("/upload/")
        assert base.url(path).split("?")[0] == url.split("?")[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=4),
       st.dictionaries(st.text(max_size=20), st.lists(st.text(max_size=16), max_size=3), max_size=4))
def test_composio_declarations_build_or_raise_config_errors(actions: list[str], effects: dict[str, list[str]]) -> None:
    try:
        tool = composio.composio_tool(actions=actions, effects=effects)
    except ConfigError:
        return
    assert tool.spec.input_schema["properties"]["action"]["enum"] == list(dict.fromkeys(actions))
    assert all(effects[a] for a in actions)




@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=80), st.binary(max_size=600), st.one_of(st.integers(), st.text(max_size=20)))
def test_a_telegram_upload_body_reads_back_whatever_the_names(caption: str, filename: str, data: bytes,
                                                              chat_id: int | str) -> None:
    """Whatever the caption, file name and bytes, the multipart body parses back (the standard
    library's MIME parser) into exactly the fields and the one file sent: a quote, CR or LF in a
    file name cannot end its header or add a part."""
    from tests.builtins.faketelegram import parse_multipart

    body, kind = telegram.multipart_body({"chat_id": chat_id, "caption": caption}, file_field="document",
                                         filename=filename, data=data)
    fields, files = parse_multipart("sendDocument", kind, body)
    assert set(fields) == {"chat_id", "caption", "document"} and set(files) == {"document"}
    assert fields["caption"] == caption
    assert files["document"].data == data
    assert not any(c in files["document"].filename for c in '"\r\n')
