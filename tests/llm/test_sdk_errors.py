"""The one error translator for both model SDKs (llm/sdk_errors.py): every rung of the ladder, on
errors the real ``openai`` and ``anthropic`` clients raise against the local model server, with the
same outcome for both where the wire means the same and the dialect's difference where it does not."""

from __future__ import annotations

import socket
from typing import Any

import anthropic
import anyio
import openai
import pytest

from pincer.core.errors import (
    ContextTooLong,
    ModelNotFound,
    ProviderAuthFailed,
    ProviderError,
    ProviderRateLimited,
    ProviderUnavailable,
)
from pincer.demo.model_server import ModelServer, ScriptedError, Turn, serve_models
from pincer.llm.anthropic_provider import ANTHROPIC_ERRORS
from pincer.llm.openai_provider import OPENAI_ERRORS
from pincer.llm.sdk_errors import _CLASSES, SdkDialect, translate_sdk_error

KEY = "sk-live-0123456789abcdefghijklmnop"
CALL_LIMIT_S = 30
DIALECTS = {"openai": OPENAI_ERRORS, "anthropic": ANTHROPIC_ERRORS}


async def _sdk_error(provider: str, base_url: str, *, timeout_s: float = 20.0) -> BaseException:
    """The exception the real SDK raises for one request (no retries: one request, one error)."""
    with anyio.fail_after(CALL_LIMIT_S):
        if provider == "openai":
            client: Any = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=timeout_s)
            call = client.chat.completions.create(model="scripted-model", messages=[{"role": "user", "content": "hi"}])
        else:
            client = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0, timeout=timeout_s)
            call = client.messages.create(model="scripted-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
        try:
            await call
        except Exception as exc:
            return exc
        finally:
            await client.close()
    raise AssertionError(f"the {provider} SDK answered a scripted error without raising")


def _url(server: ModelServer, provider: str) -> str:
    return server.openai_url if provider == "openai" else server.anthropic_url


async def _translated(provider: str, error: ScriptedError) -> ProviderError:
    with serve_models([Turn(error=error)]) as server:
        exc = await _sdk_error(provider, _url(server, provider))
    return translate_sdk_error(exc, "scripted-model", DIALECTS[provider])


BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])


@pytest.mark.anyio
@BOTH
@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_auth_failed_and_the_quoted_key_is_never_repeated(provider: str, status: int) -> None:
    err = await _translated(provider, ScriptedError(status=status, kind="auth", message=f"Incorrect API key provided: {KEY}"))
    assert type(err) is ProviderAuthFailed and err.status == status
    assert KEY not in str(err) and KEY[:12] not in str(err) and "pincer secrets set" in (err.hint or "")
    assert f"HTTP {status}" in str(err)


@pytest.mark.anyio
@BOTH
async def test_an_unknown_model_names_the_model_and_the_key_to_check(provider: str) -> None:
    err = await _translated(provider, ScriptedError(status=404, kind="not_found", message="no such model"))
    assert type(err) is ModelNotFound and err.status == 404
    assert "'scripted-model'" in str(err) and "no such model" in str(err) and "[llm] model" in (err.hint or "")


@pytest.mark.anyio
@BOTH
async def test_a_429_keeps_the_retry_after_the_provider_asked_for(provider: str) -> None:
    err = await _translated(provider, ScriptedError(status=429, kind="rate_limit", message="slow down", retry_after="7"))
    assert type(err) is ProviderRateLimited and err.retryable and err.retry_after_s == 7
    assert "slow down" in str(err) and "[llm] max_retries" in (err.hint or "")


@pytest.mark.anyio
@BOTH
@pytest.mark.parametrize("status", [500, 503, 408])
async def test_a_server_failure_is_unavailable_with_its_retry_after(provider: str, status: int) -> None:
    err = await _translated(provider, ScriptedError(status=status, kind="server", message="boom", retry_after="2"))
    assert type(err) is ProviderUnavailable and err.retryable and err.status == status and err.retry_after_s == 2
    assert f"HTTP {status}" in str(err) and "boom" in str(err)


@pytest.mark.anyio
@BOTH
@pytest.mark.parametrize("status", [400, 413])
async def test_a_context_too_long_is_told_apart_from_other_refusals(provider: str, status: int) -> None:
    err = await _translated(provider, ScriptedError(status=status, kind="context_length", message="prompt is too long: 9000 tokens"))
    assert type(err) is ContextTooLong and err.status == status and "[output] max_bytes" in (err.hint or "")
    refused = await _translated(provider, ScriptedError(status=status, kind="bad_request", message="temperature must be below 2"))
    assert type(refused) is ProviderError and not refused.retryable
    assert f"refused the request (HTTP {status}): temperature must be below 2" in str(refused)


@pytest.mark.anyio
async def test_the_dialects_differ_where_the_providers_do() -> None:
    """A 422 is how some OpenAI-compatible servers say "context too long"; the Anthropic API never
    does, so there it is an ordinary refusal. The code field counts for OpenAI (context_length_exceeded)."""
    words = ScriptedError(status=422, kind="context_length", message="maximum context length is 8192 tokens")
    assert type(await _translated("openai", words)) is ContextTooLong
    assert type(await _translated("anthropic", words)) is ProviderError
    by_code = ScriptedError(status=400, kind="context_length", message="request rejected")
    assert type(await _translated("openai", by_code)) is ContextTooLong
    assert type(await _translated("anthropic", by_code)) is ProviderError
    assert "the Anthropic API" in str(await _translated("anthropic", by_code))


@pytest.mark.anyio
@BOTH
async def test_a_server_that_does_not_answer_in_time_is_a_timeout(provider: str) -> None:
    with serve_models([Turn(text="late", delay_s=10)]) as server:
        exc = await _sdk_error(provider, _url(server, provider), timeout_s=0.5)
    err = translate_sdk_error(exc, "scripted-model", DIALECTS[provider])
    assert type(err) is ProviderUnavailable and "did not answer in time" in str(err)
    assert f"127.0.0.1:{server.port}" in str(err) and "[llm] timeout_s" in (err.hint or "")


@pytest.mark.anyio
@BOTH
async def test_a_closed_port_is_unreachable_and_names_the_url(provider: str) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1" if provider == "openai" else f"http://127.0.0.1:{port}"
    err = translate_sdk_error(await _sdk_error(provider, base), "scripted-model", DIALECTS[provider])
    server = "the model server" if provider == "openai" else "the Anthropic API"
    assert type(err) is ProviderUnavailable and f"cannot reach {server} at http://127.0.0.1:{port}" in str(err)
    assert "[llm] base_url" in (err.hint or "")


@BOTH
def test_an_sdk_error_outside_the_ladder_names_its_class_and_never_its_text(provider: str) -> None:
    sdk = openai if provider == "openai" else anthropic
    root = sdk.OpenAIError if provider == "openai" else sdk.AnthropicError
    err = translate_sdk_error(root(f"client misconfigured with {KEY}"), "m", DIALECTS[provider])
    assert type(err) is ProviderError and str(err).startswith(f"the {provider} SDK failed: {root.__name__} (")
    assert KEY not in str(err) and "misconfigured" not in str(err)


def test_every_class_the_ladder_names_exists_in_both_sdks() -> None:
    """The ladder is read by name: an SDK that renamed a class would make every error "other".
    Fails on an upgrade that drops one of the names."""
    for dialect in (OPENAI_ERRORS, ANTHROPIC_ERRORS):
        assert isinstance(dialect, SdkDialect)
        for name, _ in _CLASSES:
            assert isinstance(getattr(dialect.sdk, name), type), f"{dialect.name}.{name}"
