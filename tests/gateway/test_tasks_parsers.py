"""The parsers of MCP Tasks requests, over arbitrary JSON: the per-request capability check, the
``tasks/*`` params, a listen stream's ``taskIds`` and REST's ``Prefer`` header never fail any other way than saying no."""

from __future__ import annotations

from typing import Any

import pydantic
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, SubscriptionFilter

from pincer.gateway.handshake_tasks import MAX_TTL_MS, list_cursor, next_cursor, task_id_of, task_ttl
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
from pincer.store.tasks import Task, TaskStatus

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


# -- the handshake era (2025-11-25) ------------------------------------------------------------


# Task ids are the store's (hex since 2026-12-07, url-safe base64 before: store/tasks.py new_task_id),
# up to the longest taken.
URLSAFE = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@given(JSON)
def test_a_task_param_is_a_ttl_in_range_or_invalid_params(task: Any) -> None:
    try:
        ttl = task_ttl({"name": "say", "task": task})
    except MCPError as exc:
        assert exc.error.code == INVALID_PARAMS and "params.task" in exc.error.message
        return
    assert isinstance(task, dict) and set(task) <= {"ttl"}
    assert ttl is None or (type(ttl) is int and 0 <= ttl <= MAX_TTL_MS and ttl == task["ttl"])


@given(JSON)
def test_a_task_id_param_is_a_bounded_string_or_invalid_params(task_id: Any) -> None:
    try:
        parsed = task_id_of({"taskId": task_id})
    except MCPError as exc:
        assert exc.error.code == INVALID_PARAMS and "params.taskId" in exc.error.message
        return
    assert parsed == task_id and 1 <= len(parsed) <= MAX_TASK_ID_CHARS


@given(JSON | st.text(alphabet=URLSAFE + "=", max_size=80))
def test_a_list_cursor_is_one_the_gateway_gave_or_invalid_params(cursor: Any) -> None:
    try:
        after = list_cursor({"cursor": cursor})
    except MCPError as exc:
        assert exc.error.code == INVALID_PARAMS and "cursor" in exc.error.message
        return
    assert after is None if cursor is None else isinstance(after, tuple)


@given(st.floats(min_value=0, max_value=4e9), st.text(alphabet=URLSAFE, min_size=1, max_size=MAX_TASK_ID_CHARS))
def test_a_cursor_the_gateway_gives_reads_back_as_the_task_it_names(created_at: float, task_id: str) -> None:
    task = Task(
        id=task_id, session="main", caller="mcp", tool="say", args={}, idempotency_key=None,
        status=TaskStatus.WORKING, status_message=None, approval_id=None, result=None, error=None, owner=None,
        cancel_requested=False, created_at=created_at, updated_at=created_at, expires_at=created_at + 1,
        ttl_ms=1000, poll_ms=1000,
    )  # fmt: skip
    assert list_cursor({"cursor": next_cursor(task)}) == (created_at, task_id)
