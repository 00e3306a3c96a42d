"""The API key never appears in the runs table, the audit log, the logs or an error, whether it
comes from the secret store or from an environment variable named in the config; a server that
quotes the key it refused does not change that."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from pincer.core.errors import ConfigError
from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.llm import RunRequest
from tests.llm.conftest import llm_config, open_pincer

# No well-known credential shape: only the value itself can find it.
API_KEY = "local-model-key-5f2b9c7d1e3a4b6c"
WRONG_KEY = "other-model-key-0a9b8c7d6e5f4a3b"


def _everything_written(home: Path, caplog: pytest.LogCaptureFixture, run: object) -> str:
    files = b"".join(p.read_bytes() for p in home.glob("pincer.db*"))
    return files.decode("latin-1") + caplog.text + repr(run)


def _script() -> list[Turn]:
    return [Turn(calls=(ScriptedCall(name="echo", arguments={"text": "hello"}),)), Turn(text="done")]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_key_from_the_secret_store_reaches_the_server_and_nothing_else(
    tmp_path: Path, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "home"
    with serve_models(_script(), api_key=API_KEY) as server:
        config = llm_config(server, provider=provider, extra='[llm.profiles.x]\nmodel = "m"\n').replace(
            'max_retries = 3', 'max_retries = 3\napi_key_secret = "model_key"'
        )
        async with open_pincer(home, config) as pincer:
            pincer.secrets.set("model_key", API_KEY)
            with anyio.fail_after(60):
                run = await pincer.agent.run(RunRequest(message=f"do not repeat {API_KEY[:6]}"))
            assert run.status == "done"
            sent = server.requests[0].headers
            assert API_KEY in (sent.get("x-api-key") or sent["authorization"])
            rows = [r.to_dict() for r in await pincer.runs.list()] + [m.to_dict() for m in await pincer.runs.messages(run.id)]
            records = [r.to_dict() for r in await pincer.audit.records()]
        written = _everything_written(home, caplog, run) + repr(rows) + repr(records)
        assert API_KEY not in written


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_refused_key_quoted_back_by_the_server_stays_out_of_errors_and_logs(
    tmp_path: Path, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "home"
    with serve_models(_script(), api_key=API_KEY) as server:
        config = llm_config(server, provider=provider).replace('max_retries = 3', 'max_retries = 3\napi_key_env = "MODEL_KEY"')
        async with open_pincer(home, config, environ={"MODEL_KEY": WRONG_KEY}) as pincer:
            with anyio.fail_after(60):
                run = await pincer.agent.run(RunRequest(message="hi"))
            assert run.status == "failed" and run.error["code"] == "provider_auth_failed"
            assert "api_key_secret" in run.error["hint"]
            records = [r.to_dict() for r in await pincer.audit.records()]
            rows = [r.to_dict() for r in await pincer.runs.list()]
    written = _everything_written(home, caplog, run) + repr(records) + repr(rows)
    assert WRONG_KEY not in written and API_KEY not in written


@pytest.mark.anyio
async def test_a_missing_key_names_the_setting_and_writes_nothing(tmp_path: Path) -> None:
    with serve_models(_script()) as server:
        config = llm_config(server).replace('max_retries = 3', 'max_retries = 3\napi_key_secret = "nope"')
        async with open_pincer(tmp_path / "home", config) as pincer:
            with pytest.raises(ConfigError) as info:
                await pincer.agent.run(RunRequest(message="hi"))
            assert "api_key_secret" in info.value.message and "pincer secrets set nope" in (info.value.hint or "")
            assert await pincer.runs.list() == [] and await pincer.audit.records() == [] and server.requests == []
        config = llm_config(server).replace('max_retries = 3', 'max_retries = 3\napi_key_env = "UNSET_MODEL_KEY"')
        async with open_pincer(tmp_path / "home2", config, environ={}) as pincer:
            with pytest.raises(ConfigError) as info:
                await pincer.agent.run(RunRequest(message="hi"))
            assert "UNSET_MODEL_KEY" in info.value.message
