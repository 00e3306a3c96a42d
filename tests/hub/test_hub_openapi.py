"""schemathesis against a real hub server's own OpenAPI document: generated requests for every
operation, a bounded number of examples each, and no answer is a server error or strays from
the document (issue 15, "How it is checked"). The server holds one published skill, so the
generated keys sometimes hit.

The operations are driven with hypothesis directly (``operation.as_strategy()``): schemathesis's
pytest integration (``from_fixture``) does not run under pytest 9."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from pincer.hub.remote import RemoteSource
from pincer.hub.server.app import HubLimits
from pincer.hub.signing import generate_key
from tests.hub.conftest import Publisher, running_hub, write_skill

MAX_EXAMPLES = 50  # per operation; 9 operations take ~6 s (200 each: ~22 s, also clean)


def test_no_generated_request_gets_a_server_error(tmp_path: Path) -> None:
    limits = HubLimits(address_requests_per_minute=100_000, token_requests_per_minute=100_000, max_upload_bytes=1024 * 1024)
    with running_hub(tmp_path / "hub", limits=limits) as hub:
        token = hub.token("alice")
        Publisher(name="alice", key=generate_key(), token=token, remote=RemoteSource("t", hub.url, token=token)).publish_path(
            write_skill(tmp_path, "code-review")
        )
        schema = schemathesis.openapi.from_url(f"{hub.url}/api/v1/openapi.json")
        seen: dict[str, set[int]] = {}
        for result in schema.get_all_operations():
            operation = result.ok()

            @settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            @given(case=operation.as_strategy())
            def exercise(case: schemathesis.Case) -> None:
                response = case.call(timeout=30)
                assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
                case.validate_response(response)
                seen.setdefault(case.operation.label, set()).add(response.status_code)

            exercise()
        assert len(seen) == 9, sorted(seen)


@pytest.fixture(autouse=True)
def _no_schemathesis_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEMATHESIS_HOOKS", "")
