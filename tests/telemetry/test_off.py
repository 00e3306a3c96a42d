"""Traces are off unless asked for: nothing of the OpenTelemetry SDK (or of prometheus-client) is
imported by the CLI or the call chain, and a gateway with the OTLP variables set but traces off
(or with OTEL_SDK_DISABLED=true) exports nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import pincer_serve
from tests.telemetry.otlp_receiver import otlp_receiver

CALL_TIMEOUT_S = 30.0


def test_the_cli_and_the_chain_import_no_telemetry_library() -> None:
    code = (
        "import sys, pincer.cli.main, pincer.cli.serve, pincer.dispatch, pincer.service, pincer.gateway.serve, "
        "pincer.gateway.stdio, pincer.llm.loop, pincer.safety.egress_transport; "
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter', "
        "'prometheus_client'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize(
    ("config", "disabled"), [("", False), ("[telemetry]\ntraces = true\n", True)], ids=["traces-off", "sdk-disabled"]
)
def test_a_gateway_with_traces_off_exports_nothing(tmp_path: Path, config: str, disabled: bool) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config + '[[grants]]\ntool = "echo"\ndefault = "allow"\n')
    with otlp_receiver() as receiver:
        saved = dict(os.environ)
        os.environ.update({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "10"})
        if disabled:
            os.environ["OTEL_SDK_DISABLED"] = "true"
        try:
            with pincer_serve(home) as server:
                called = httpx.post(
                    f"{server.info['api_url']}/tools/echo/call", json={"args": {"text": "hi"}},
                    headers={"Authorization": f"Bearer {server.token}", "traceparent": f"00-{'1' * 32}-{'2' * 16}-01"},
                    trust_env=False, timeout=CALL_TIMEOUT_S,
                )  # fmt: skip
                assert called.status_code == 200
        finally:
            os.environ.clear()
            os.environ.update(saved)
        # The gateway has stopped (and flushed whatever it batched): nothing came.
        assert (receiver.requests, receiver.snapshot()) == (0, [])
