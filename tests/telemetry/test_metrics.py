"""Metrics, read the way operators read them: Debian's Prometheus scrapes a real ``pincer serve`` (with
a main session's token on the gateway's port, and without one on ``[telemetry] metrics_port``), and
the test reads the call counters and the latency histograms back through Prometheus' query API
after a known number of calls. Then what each other metric counts, through a real gateway."""

from __future__ import annotations

import math
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pincer.demo.model_server import Turn, serve_models
from pincer.telemetry.metrics import OTHER, UNKNOWN, Metrics
from tests.gateway.conftest import PINCER_BIN, LiveGateway, live_gateway, pincer_serve
from tests.telemetry.prometheus import Target, free_port, prometheus

ECHO_CALLS, DENIED_CALLS, UNKNOWN_CALLS = 7, 3, 2
CALL_TIMEOUT_S = 30.0
CLI_TIMEOUT_S = 60.0
FAULTY_SERVER = Path(__file__).resolve().parents[1] / "runtimes" / "mcp" / "faulty_server.py"


def test_prometheus_scrapes_pincer_serve_and_reads_back_counters_and_histograms(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    metrics_port = free_port()
    (home / "config.toml").write_text(f"""
[telemetry]
metrics_port = {metrics_port}

[[grants]]
tool = "echo"
default = "allow"

[[grants]]
tool = "write_file"
default = "deny"
""")
    unknown_name = f"no_such_tool_{secrets.token_hex(4)}"
    with pincer_serve(home) as server:
        address = f"127.0.0.1:{server.info['port']}"
        targets = [
            Target(job="gateway", address=address, token_file=home / "gateway.token"),
            Target(job="loopback", address=f"127.0.0.1:{metrics_port}"),
        ]
        with prometheus(tmp_path / "prometheus", targets) as prom:
            for job in ("gateway", "loopback"):
                prom.wait_for(f'up{{job="{job}"}}', lambda v: v == 1.0, what=f"Prometheus scraping {job}")
            headers = {"Authorization": f"Bearer {server.token}"}
            with httpx.Client(base_url=server.info["api_url"], headers=headers, trust_env=False, timeout=CALL_TIMEOUT_S) as api:
                for i in range(ECHO_CALLS):
                    assert api.post("/tools/echo/call", json={"args": {"text": f"call {i}"}}).status_code == 200
                for _ in range(DENIED_CALLS):
                    denied = api.post("/tools/write_file/call", json={"args": {"path": "x.txt", "content": "x"}})
                    assert denied.status_code == 403, denied.text
                for _ in range(UNKNOWN_CALLS):
                    assert api.post(f"/tools/{unknown_name}/call", json={"args": {}}).status_code == 404

            for job in ("gateway", "loopback"):
                calls = f'pincer_tool_calls_total{{job="{job}",tool="echo",decision="allow",outcome="ok"}}'
                prom.wait_for(calls, lambda v: v == ECHO_CALLS, what=f"the echo calls counted ({job})")
            selector = 'job="gateway",tool="echo",runtime="native"'
            # Each count is waited for: a scrape may fall between the echo calls and the last call.
            prom.wait_for('pincer_tool_calls_total{job="gateway",tool="write_file",decision="deny",outcome="denied"}',
                          lambda v: v == DENIED_CALLS, what="the denied calls counted")
            prom.wait_for(f'pincer_tool_calls_total{{job="gateway",tool="{UNKNOWN}"}}',
                          lambda v: v == UNKNOWN_CALLS, what="the calls of unknown tools counted")  # fmt: skip
            # The caller's word for a tool name never becomes a label value.
            assert prom.query(f'{{__name__=~"pincer_.+",tool="{unknown_name}"}}') == []
            for histogram in ("pincer_tool_call_duration_seconds", "pincer_tool_execution_duration_seconds"):
                assert prom.value(f"{histogram}_count{{{selector}}}") == ECHO_CALLS
                assert prom.value(f'{histogram}_bucket{{{selector},le="+Inf"}}') == ECHO_CALLS
                total = prom.value(f"{histogram}_sum{{{selector}}}")
                assert total is not None and total > 0
                median = prom.value(f"histogram_quantile(0.5, {histogram}_bucket{{{selector}}})")
                assert median is not None and 0 < median < 10, median
            # Tool time is part of the whole call's time.
            whole = prom.value(f"pincer_tool_call_duration_seconds_sum{{{selector}}}")
            own = prom.value(f"pincer_tool_execution_duration_seconds_sum{{{selector}}}")
            assert whole is not None and own is not None and own <= whole
            recorded = prom.value('pincer_audit_append_duration_seconds_count{job="gateway"}')
            assert recorded == ECHO_CALLS + DENIED_CALLS + UNKNOWN_CALLS
            assert prom.value('pincer_audit_queue_depth{job="gateway"}') == 0
            (info,) = prom.query('pincer_info{job="gateway"}')
            assert info["metric"]["version"]
            assert prom.value('pincer_store_errors_total{job="gateway",store="database"}') == 0
            assert prom.value('process_resident_memory_bytes{job="gateway"}') > 0


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exposition as (name, sorted labels) -> value, parsed by prometheus-client's own parser."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def _scrape(gateway: LiveGateway) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with gateway.http() as http:
        answer = await http.get("/metrics", headers=gateway.headers)
    assert answer.status_code == 200, answer.text
    return _samples(answer.text)


def _value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.mark.anyio
async def test_metrics_need_a_main_sessions_token_and_the_loopback_port_checks_the_host(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    (home / "config.toml").write_text(f"[telemetry]\nmetrics_port = {port}\n")
    other = subprocess.run(
        [str(PINCER_BIN), "token", "new", "--session", "ci-bot"], capture_output=True, text=True,
        env={**os.environ, "PINCER_HOME": str(home)}, timeout=CLI_TIMEOUT_S,
    ).stdout.strip()  # fmt: skip
    async with live_gateway(home, config=(home / "config.toml").read_text()) as gateway:
        async with gateway.http() as http:
            assert (await http.get("/metrics")).status_code == 401
            refused = await http.get("/metrics", headers={"Authorization": f"Bearer {other}"})
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "session_forbidden"
            assert "metrics_port" in refused.json()["error"]["hint"]
            assert (await http.get("/metrics", headers={**gateway.headers, "Host": "evil.example"})).status_code == 421
            # The JSON counters the dashboard reads are still there.
            counters = await http.get("/api/v1/metrics", headers=gateway.headers)
            assert counters.status_code == 200 and "refused_unauthenticated" in counters.json()["gateway"]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as loopback:
            plain = await loopback.get("/metrics")
            assert plain.status_code == 200 and "# TYPE pincer_tool_calls_total counter" in plain.text
            assert plain.headers["content-type"].startswith("text/plain; version=")
            # A page whose name was rebound to 127.0.0.1 cannot read it.
            assert (await loopback.get("/metrics", headers={"Host": "evil.example"})).status_code == 421
            assert (await loopback.get("/api/v1/tools")).status_code == 401  # only /metrics is open there


@pytest.mark.anyio
async def test_approvals_runs_webhooks_and_upstream_servers_are_counted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = """
[approvals]
timeout_s = 1

[llm]
model = "scripted-model"
base_url = "{url}"

[[grants]]
tool = "say"
default = "allow"

[[hooks]]
name = "ping"
auth = "bearer"
secret = "ping_token"
message = "ping"
"""
    with serve_models([Turn(text="Pong."), Turn(text="Pong again.")]) as model:
        async with live_gateway(home, config=config.replace("{url}", model.openai_url)) as gateway:
            pincer = gateway.pincer
            pincer.secrets.set("ping_token", "hook-token-123456")
            headers = gateway.headers
            async with gateway.http(timeout=CALL_TIMEOUT_S) as http:
                # write_note asks (write_filesystem): answered allow once, denied once, and one expires.
                async def call_note() -> Any:
                    return await http.post("/api/v1/tools/write_note/call", json={"args": {"text": "n"}}, headers=headers)

                for answer in ("allow_once", "deny"):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(call_note)
                        with anyio.fail_after(CALL_TIMEOUT_S):
                            while not (pending := (await http.get("/api/v1/approvals", headers=headers)).json()["approvals"]):
                                await anyio.sleep(0.02)
                        waiting = _value(await _scrape(gateway), "pincer_approvals_pending")
                        assert waiting == 1.0, waiting
                        answered = await http.post(f"/api/v1/approvals/{pending[0]['id']}", json={"decision": answer}, headers=headers)
                        assert answered.status_code == 200, answered.text
                expired = await call_note()  # nobody answers within approvals.timeout_s
                assert expired.json()["error"]["code"] == "approval_timeout"

                # Webhook deliveries: one accepted (its run ends done), one with a wrong token, one to no hook.
                accepted = await http.post("/hooks/ping", json={}, headers={"Authorization": "Bearer hook-token-123456"})
                assert accepted.status_code == 202, accepted.text
                assert (await http.post("/hooks/ping", json={}, headers={"Authorization": "Bearer wrong"})).status_code == 401
                assert (await http.post("/hooks/nope-x1", json={}, headers={"Authorization": "Bearer x"})).status_code == 404
                started = await http.post("/api/v1/runs", json={"message": "hi"}, headers=headers)
                assert started.status_code == 202
                with anyio.fail_after(CALL_TIMEOUT_S):
                    while _value(await _scrape(gateway), "pincer_runs_total", status="done") != 2.0:
                        await anyio.sleep(0.05)

            samples = await _scrape(gateway)
    assert _value(samples, "pincer_approvals_answered_total", answer="allow") == 1
    assert _value(samples, "pincer_approvals_answered_total", answer="deny") == 1
    assert _value(samples, "pincer_approvals_expired_total") == 1
    assert _value(samples, "pincer_approvals_pending") == 0
    assert _value(samples, "pincer_approval_wait_seconds_count", tool="write_note", runtime="native") == 3
    # one call denied by the person, one whose approval timed out (recorded as cancelled: docs/acts.md)
    assert _value(samples, "pincer_tool_calls_total", tool="write_note", decision="ask", outcome="denied") == 1
    assert _value(samples, "pincer_tool_calls_total", tool="write_note", decision="ask", outcome="cancelled") == 1
    assert _value(samples, "pincer_tool_calls_total", tool="write_note", decision="allow", outcome="ok") == 1
    assert _value(samples, "pincer_runs_total", status="done") == 2
    tokens_in = _value(samples, "pincer_run_tokens_total", direction="input")
    assert tokens_in is not None and tokens_in > 0
    assert _value(samples, "pincer_webhook_deliveries_total", hook="ping", status="202") == 1
    assert _value(samples, "pincer_webhook_deliveries_total", hook="ping", status="401") == 1
    assert _value(samples, "pincer_webhook_deliveries_total", hook=UNKNOWN, status="404") == 1
    assert not any("nope-x1" in str(key) for key in samples)


@pytest.mark.anyio
async def test_an_upstream_mcp_server_up_down_and_restarts(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    added = subprocess.run(
        [str(PINCER_BIN), "mcp", "add", "faulty", "--command", sys.executable, "--arg", "-u", "--arg", str(FAULTY_SERVER),
         "--json"], capture_output=True, text=True, env={**os.environ, "PINCER_HOME": str(home)}, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    async with live_gateway(home, config='[[grants]]\ntool = "faulty_*"\ndefault = "allow"\n') as gateway:
        async with gateway.http(timeout=CALL_TIMEOUT_S) as http:
            echo = await http.post("/api/v1/tools/faulty_echo/call", json={"args": {"text": "hi"}}, headers=gateway.headers)
            assert echo.status_code == 200, echo.text
            first = await _scrape(gateway)
            crash = await http.post("/api/v1/tools/faulty_crash/call", json={"args": {}}, headers=gateway.headers)
            assert crash.json()["ok"] is False
            down = await _scrape(gateway)
            again = await http.post("/api/v1/tools/faulty_echo/call", json={"args": {"text": "hi"}}, headers=gateway.headers)
            assert again.status_code == 200, again.text
            restarted = await _scrape(gateway)
    assert _value(first, "pincer_mcp_server_up", server="faulty") == 1
    assert _value(first, "pincer_mcp_server_restarts_total", server="faulty") == 0
    assert _value(down, "pincer_mcp_server_up", server="faulty") == 0
    assert _value(restarted, "pincer_mcp_server_up", server="faulty") == 1
    assert _value(restarted, "pincer_mcp_server_restarts_total", server="faulty") == 1


def test_label_values_are_bounded() -> None:
    """Past the bound every new tool, hook or server is counted under _other, never a new series."""
    metrics = Metrics(max_label_values=3)
    for i in range(10):
        metrics.call_finished(
            tool=f"tool_{i}", runtime="native", decision="allow", outcome="ok", seconds=0.001, tool_seconds=0.0005,
            audit_seconds=0.0001,
        )  # fmt: skip
        metrics.delivery(hook=f"hook_{i}", status=202)
    samples = _samples(metrics.exposition(None)[0].decode())
    tools = {dict(labels).get("tool") for (name, labels) in samples if name == "pincer_tool_calls_total"}
    assert tools == {"tool_0", "tool_1", "tool_2", OTHER}
    assert _value(samples, "pincer_tool_calls_total", tool=OTHER, decision="allow", outcome="ok") == 7
    hooks = {dict(labels).get("hook") for (name, labels) in samples if name == "pincer_webhook_deliveries_total"}
    assert hooks == {"hook_0", "hook_1", "hook_2", OTHER}
    count = _value(samples, "pincer_tool_call_duration_seconds_count", tool=OTHER, runtime="native")
    assert count == 7 and not math.isnan(count)


def test_every_metric_is_documented_and_every_documented_metric_exists() -> None:
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    documented = set(re.findall(r"^\| `(pincer_[a-z_]+)` \|", page, re.MULTILINE))
    metrics = Metrics()
    metrics.call_finished(tool="t", runtime="native", decision="allow", outcome="ok", seconds=0.1, tool_seconds=0.1, audit_seconds=0.1)
    text = metrics.exposition(None)[0].decode()
    exposed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE pincer_")}
    assert exposed == documented, f"undocumented: {sorted(exposed - documented)}; gone: {sorted(documented - exposed)}"
