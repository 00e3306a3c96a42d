"""The parsers of MCP Tasks requests, over arbitrary JSON: the per-request capability check, the
``tasks/*`` params, a listen stream's ``taskIds`` and REST's ``Prefer`` header never fail any other way than saying no."""

from __future__ import annotations

from typing import Any

import pydantic
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, SubscriptionFilter

from pincer.gateway.rest.tools import _respond_async
from pincer.gateway.task_notices import MAX_TASK_IDS, requested_task_ids
from pincer.gateway.tasks import (
    CLIENT_CAPABILITIES_META_KEY,
    MAX_TASK_ID_CHARS,
    TASKS_EXTENSION,
    TaskIdParams,
    UpdateTaskParams,
    declares_tasks,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_declares_tasks_is_true_only_for_the_declared_shape(meta: Any) -> None:
    declared = declares_tasks(meta)
    expected = (
        isinstance(meta, dict)
        and isinstance(meta.get(CLIENT_CAPABILITIES_META_KEY), dict)
        and isinstance(meta[CLIENT_CAPABILITIES_META_KEY].get("extensions"), dict)
        and isinstance(meta[CLIENT_CAPABILITIES_META_KEY]["extensions"].get(TASKS_EXTENSION), dict)
    )
    assert declared is expected


@given(st.dictionaries(st.text(max_size=12), JSON, max_size=5), JSON)
def test_declares_tasks_finds_the_extension_beside_anything_else(others: dict[str, Any], value: Any) -> None:
    meta = {**others, CLIENT_CAPABILITIES_META_KEY: {"extensions": {TASKS_EXTENSION: {}, "x/y": value}}}
    assert declares_tasks(meta)


@given(st.dictionaries(st.sampled_from(["taskId", "inputResponses", "_meta", "other"]), JSON, max_size=4))
def test_task_params_accept_exactly_a_task_id(params: dict[str, Any]) -> None:
    try:
        parsed = TaskIdParams.model_validate(params, by_name=False)
    except pydantic.ValidationError:
        task_id = params.get("taskId")
        assert (
            not isinstance(task_id, str)
            or not 1 <= len(task_id) <= MAX_TASK_ID_CHARS
            or set(params) - {"taskId", "_meta"}
            or not isinstance(params.get("_meta", {}), dict | None)
        )
        return
    assert parsed.task_id == params["taskId"] and set(params) <= {"taskId", "_meta"}


@given(st.dictionaries(st.sampled_from(["taskId", "inputResponses", "_meta"]), JSON, max_size=3))
def test_update_params_need_an_object_of_responses(params: dict[str, Any]) -> None:
    try:
        parsed = UpdateTaskParams.model_validate(params, by_name=False)
    except pydantic.ValidationError:
        return
    assert isinstance(parsed.input_responses, dict) and parsed.input_responses == params["inputResponses"]


@given(st.text(max_size=60))
def test_prefer_is_read_token_by_token(header: str) -> None:
    wanted = _respond_async(header)
    tokens = [part.split(";")[0].strip().lower() for part in header.split(",")]
    assert wanted is ("respond-async" in tokens)


def test_prefer_examples() -> None:
    assert _respond_async("respond-async")
    assert _respond_async("return=minimal, Respond-Async; wait=10")
    assert not _respond_async("respond-asyncx") and not _respond_async(None) and not _respond_async("")


def _listen_filter(task_ids: Any) -> SubscriptionFilter:
    return SubscriptionFilter.model_validate({"toolsListChanged": True, "taskIds": task_ids})


@given(JSON | st.lists(st.text(max_size=140), max_size=300))
def test_a_listen_streams_task_ids_are_a_bounded_list_of_ids_or_invalid_params(task_ids: Any) -> None:
    valid = (
        isinstance(task_ids, list)
        and len(task_ids) <= MAX_TASK_IDS
        and all(isinstance(t, str) and 0 < len(t) <= MAX_TASK_ID_CHARS for t in task_ids)
    )
    try:
        accepted = requested_task_ids(_listen_filter(task_ids))
    except MCPError as exc:
        assert not valid and task_ids is not None
        assert exc.error.code == INVALID_PARAMS and "taskIds" in exc.error.message
        return
    assert valid or task_ids is None
    assert accepted == list(dict.fromkeys(task_ids or []))  # each once, in the order asked
