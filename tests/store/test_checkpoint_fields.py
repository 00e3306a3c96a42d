"""A checkpoint file someone edited (store/checkpoint.py): each field that is wrong is named,
with how a checkpoint is made, before any signature is checked; one made by `pincer audit
checkpoint` (also wrapped as `--json` prints it) reads back as it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pincer.core.errors import CheckpointInvalid
from pincer.store.audit import AuditLog
from pincer.store.checkpoint import AuditCheckpoint
from tests.store.conftest import KEY, Backend

pytestmark = pytest.mark.anyio


async def _made(backend: Backend) -> dict[str, Any]:
    log: AuditLog = await backend.audit(KEY)
    checkpoint = await log.checkpoint()
    document: dict[str, Any] = json.loads(checkpoint.to_json())
    assert AuditCheckpoint.from_text(json.dumps({"checkpoint": document})) == checkpoint  # as --json prints it
    return document


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("signature", "sha1:" + "0" * 40, r"'signature' must be 'hmac-sha256:<64 hex digits>'"),
        ("signature", None, r"'signature' must be"),
        ("created_at", "yesterday", r"'created_at' must be an ISO 8601 time"),
        ("created_at", 1_700_000_000, r"'created_at' must be an ISO 8601 time"),
        ("records", 3, r"'records' and 'last_id' differ \(ids run from 1 without gaps\)"),
        ("last_hash", "A" * 64, r"'last_hash' must be lower-case hex of the right length"),
    ],
)
async def test_a_field_someone_edited_is_named(backend: Backend, field: str, value: object, said: str) -> None:
    document = await _made(backend)
    document[field] = value
    with pytest.raises(CheckpointInvalid, match=said) as info:
        AuditCheckpoint.from_text(json.dumps(document), source="cp.json")
    assert info.value.message.startswith("cp.json") and "pincer audit checkpoint" in (info.value.hint or "")
