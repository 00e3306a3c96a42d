"""The counter and rate-limited log of refusals made before authentication, on a clock the test
moves by hand (the log windows are about time, and a test must not sleep through them)."""

from __future__ import annotations

import logging

import pytest

from pincer.gateway.refusals import UnauthenticatedRefusals

LOGGER = "pincer.gateway.refusals"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_one_line_per_address_per_window_then_the_suppressed_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = UnauthenticatedRefusals(log_interval_s=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(50):
            refusals.record(address="10.0.0.1", method="POST", path="/api/v1/tools/x/call", code="unauthorized")
        refusals.record(address="10.0.0.2", method="GET", path="/mcp", code="foreign_origin")
        clock.now += 9.9
        refusals.record(address="10.0.0.1", method="POST", path="/x", code="unauthorized")
        clock.now += 0.2
        refusals.record(address="10.0.0.1", method="POST", path="/x", code="unauthorized")
    lines = _lines(caplog)
    assert len(lines) == 3
    assert "10.0.0.1" in lines[0] and "unauthorized" in lines[0] and "not logged" not in lines[0]
    assert "10.0.0.2" in lines[1] and "foreign_origin" in lines[1]
    assert "10.0.0.1" in lines[2] and "50 more from there in the last 10 s were not logged" in lines[2]
    assert refusals.snapshot() == {"total": 53, "by_code": {"foreign_origin": 1, "unauthorized": 52}}


def test_a_path_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    refusals = UnauthenticatedRefusals()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        refusals.record(address="::1", method="GET", path="/a\nWARNING forged: all good" + "x" * 500, code="x")
    (line,) = _lines(caplog)
    assert "\n" not in line and "\\n" in line and len(line) < 400


def test_many_addresses_share_a_window_past_the_table_size(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = UnauthenticatedRefusals(log_interval_s=10.0, max_addresses=4, clock=clock)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(100):
            refusals.record(address=f"10.0.1.{i}", method="GET", path="/", code="unauthorized")
    # Four addresses of their own, then one shared window for all the rest.
    assert len(_lines(caplog)) == 5
    assert len(refusals._windows) <= 5
    clock.now += 11
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        refusals.record(address="10.0.2.1", method="GET", path="/", code="unauthorized")
    assert "10.0.2.1" in _lines(caplog)[-1]  # stale windows were dropped to make room
    assert refusals.snapshot()["total"] == 101
