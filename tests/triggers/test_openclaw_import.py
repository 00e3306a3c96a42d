"""OpenClaw's cron files as they are: cron.yaml (name/schedule/message) and the jobs JSON
(``{version: 1, jobs: [...]}``, legacy spellings too); what pincer does not use is listed."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import PincerError, UsageError
from pincer.triggers.openclaw import read_cron_file

from .conftest import utc

DATA = Path(__file__).parent / "data"


def test_cron_yaml() -> None:
    imported = read_cron_file(DATA / "cron.yaml")
    by_name = {j.name: j for j in imported.jobs}
    assert imported.format == "cron.yaml" and set(by_name) == {"Morning brief", "weekly-report", "reminder", "heartbeat"}
    brief = by_name["Morning brief"]
    assert brief.schedule.to_dict() == {"kind": "cron", "expr": "0 7 * * *", "tz": "America/Los_Angeles"}
    assert brief.message == "Summarize overnight updates." and brief.source == "import" and brief.run_session == "cron:Morning brief"
    assert by_name["reminder"].schedule.at == utc(2030, 2, 1, 16)
    assert by_name["heartbeat"].schedule.every_s == 1_800
    assert imported.unknown_keys == {"weekly-report": ("channel",)}
    assert len(imported.problems) == 1 and imported.problems[0].startswith("jobs.4:") and "'not a schedule'" in imported.problems[0]


def test_jobs_json() -> None:
    imported = read_cron_file(DATA / "jobs.json")
    by_name = {j.name: j for j in imported.jobs}
    assert imported.format == "jobs.json"
    brief = by_name["Morning Briefing - 7AM Daily"]
    assert brief.schedule.to_dict() == {"kind": "cron", "expr": "0 7 * * *", "tz": "Asia/Ho_Chi_Minh"}
    assert brief.message == "Create a morning briefing." and brief.budgets.deadline_s == 180
    assert brief.session is None and brief.run_session == "cron:Morning Briefing - 7AM Daily"  # isolated
    assert imported.next_runs["Morning Briefing - 7AM Daily"] == 1_893_481_200
    reminder = by_name["Reminder"]
    assert reminder.session == "main" and reminder.message == "Reminder: check the cron docs draft"
    assert reminder.schedule.at == utc(2031, 2, 1, 16)
    poll = by_name["poll"]
    assert not poll.enabled and poll.schedule.every_s == 1_800 and poll.schedule.anchor == 1_767_225_600
    assert by_name["legacy"].schedule.expr == "*/5 * * * *"  # schedule.cron, the legacy spelling
    assert by_name["old-at"].schedule.at == 1_924_991_999  # atMs
    assert "delivery" in imported.unknown_keys["Morning Briefing - 7AM Daily"]
    assert "payload.model" in imported.unknown_keys["poll"]
    assert imported.problems == ("jobs.5: the payload has no message or text",)


def test_files_that_are_neither(tmp_path: Path) -> None:
    for name, text in (("a.json", '{"jobs": 3}'), ("b.yaml", "just: text\n"), ("c.yaml", "- [unclosed\n"), ("d.json", "{")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(UsageError):
            read_cron_file(path)
    with pytest.raises(UsageError, match="cannot read"):
        read_cron_file(tmp_path / "missing.yaml")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["name", "schedule", "message", "kind", "expr", "at", "atMs", "everyMs", "payload", "jobs", "version", "tz"]
    ), inner, max_size=5),
    max_leaves=20,
))
def test_arbitrary_documents_only_raise_our_errors(tmp_path: Path, document: object) -> None:
    import json

    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(document))
    try:
        read_cron_file(path)
    except PincerError:
        pass
