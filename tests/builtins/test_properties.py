"""Property tests for the built-ins' parsers: arbitrary input only raises pincer's own errors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.builtins.actions import ActionSet
from pincer.builtins.api import BaseUrl, segment
from pincer.builtins.github import ACTIONS, FIELDS, check_args, check_git_ref, check_repo_path
from pincer.builtins.web_fetch import decode_page
from pincer.core.errors import PincerError, UsageError

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_ref_path_and_segment_checks_raise_only_usage_errors(text: str) -> None:
    for check in (lambda: check_git_ref(text, "ref"), lambda: check_repo_path(text), lambda: segment(text, "owner")):
        try:
            check()
        except UsageError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_base_urls_parse_or_raise_usage_errors(text: str) -> None:
    try:
        base = BaseUrl.parse(text, configured=True, key="[builtins.github] base_url")
    except UsageError:
        return
    assert base.scheme in ("http", "https") and base.host and 0 < base.port < 65_536


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["action", *FIELDS]), _json, max_size=6))
def test_arbitrary_arguments_resolve_or_raise_pincer_errors(args: dict[str, Any]) -> None:
    actions = ActionSet(tool="github", actions=ACTIONS, fields=FIELDS)
    try:
        action, own = actions.resolve(args)
        check_args(action.name, own)
    except PincerError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.text(max_size=40))
def test_any_bytes_decode_with_any_content_type(body: bytes, content_type: str) -> None:
    text, charset = decode_page(body, content_type)
    assert isinstance(text, str) and charset
