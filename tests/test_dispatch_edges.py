"""The dispatcher's less travelled paths, through real calls against real SQLite files: a runtime
that returns nothing, the refusals of a required idempotency key as each caller is told, a person
who is no operator calling a policy-changing tool, defaults filled in, failures that are not
replayed, MCP content and error outputs, and secret-named keys masked at any depth."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pincer import dispatch
from pincer.config import parse_config
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind as E
from pincer.core.errors import EgressDenied, UsageError
from pincer.core.values import CallRequest, RuntimeAsk, ToolOutput
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime

pytestmark = pytest.mark.anyio

KEY = b"k" * 32


class SilentRuntime(FuncRuntime):
    """A runtime with a bug: its invoke returns None instead of a ToolOutput."""

    async def invoke(self, spec, args, host):  # type: ignore[no-untyped-def]
        self.calls[spec.name] += 1  # and no ToolOutput: the result is None


async def _echo(args: dict[str, Any], host: Any) -> Any:
    return args


@pytest.fixture
async def pincer(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = parse_config(
        """
[idempotency]
required = true
[[grants]]
tool = "*"
default = "allow"
""",
        home=tmp_path,
    )
    runtime = FuncRuntime()
    runtime.add("echo", _echo, schema={"type": "object"})
    runtime.add("writer", _echo, side_effecting=True)
    runtime.add("installer", _echo, effects=[E.MODIFY_EXTENSION])
    runtime.add(
        "greeter",
        _echo,
        schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "greeting": {"type": "string", "default": "hello"}},
            "required": ["name", "greeting"],
        },
    )
    silent = SilentRuntime()
    silent.add("silent", _echo)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False) as p:
        await p.add_runtime(runtime)
        await p.add_runtime(silent)
        p.test_runtime = runtime  # type: ignore[attr-defined]
        yield p


async def call(p: Pincer, tool: str, args: Any = None, **kw: Any):  # type: ignore[no-untyped-def]
    return await p.call(CallRequest(tool=tool, args={} if args is None else args, **kw))


async def test_a_runtime_that_returns_nothing_is_a_tool_error_saying_so(pincer: Pincer) -> None:
    result = await call(pincer, "silent")
    assert not result.ok and result.error["code"] == "tool_error"
    assert result.error["message"] == "silent returned nothing"
    assert result.error["hint"] == "a runtime must return a ToolOutput"
    record = (await pincer.audit.records())[-1]
    assert (record.tool, record.outcome, record.error_code) == ("silent", "error", "tool_error")


@pytest.mark.parametrize(
    ("caller", "where", "hint"),
    [
        ("rest", "an Idempotency-Key header", "Idempotency-Key header (or idempotency_key in the body)"),
        ("mcp", '_meta["pincer/idempotencyKey"]', 'set in the tools/call params'),
        ("cli", "--idempotency-key", "`pincer tools call NAME --idempotency-key KEY`"),
        ("api", "an idempotency key", "set [idempotency] required = false"),
    ],
)
async def test_a_side_effecting_call_without_a_key_is_told_where_its_caller_puts_one(
    pincer: Pincer, caller: str, where: str, hint: str
) -> None:
    result = await call(pincer, "writer", {"text": "x"}, caller=caller)
    assert result.error["code"] == "idempotency_key_required"
    assert result.error["message"] == (
        f"writer is side-effecting and [idempotency] required = true: the call needs {where}"
    )
    assert hint in result.error["hint"]
    assert pincer.test_runtime.calls["writer"] == 0
    keyed = await call(pincer, "writer", {"text": "x"}, caller=caller, idempotency_key="one")
    assert keyed.ok and pincer.test_runtime.calls["writer"] == 1


async def test_a_person_who_is_no_operator_may_not_call_a_policy_changing_tool(pincer: Pincer) -> None:
    refused = await call(pincer, "installer", person="ada", may_change_policy=False)
    assert refused.error["code"] == "denied"
    assert refused.error["message"] == (
        "ada may not call installer: it changes what pincer may do (modify_extension)"
    )
    assert "pincer people add NAME --role operator" in refused.error["hint"]
    assert pincer.test_runtime.calls["installer"] == 0
    allowed = await call(pincer, "installer", person="root", may_change_policy=True)
    assert allowed.ok and pincer.test_runtime.calls["installer"] == 1


async def test_a_required_arguments_default_is_filled_in_sent_and_audited(pincer: Pincer) -> None:
    result = await call(pincer, "greeter", {"name": "Ada"})
    assert result.ok and result.output == {"name": "Ada", "greeting": "hello"}
    record = (await pincer.audit.records())[-1]
    assert record.args == {"name": "Ada", "greeting": "hello"}


async def test_a_failure_that_is_no_tool_error_is_not_replayed_for_its_key(pincer: Pincer) -> None:
    """Only a result or a tool's own error is stored under the key: a refusal on the way (here the
    tool's request refused by the egress rules) leaves the key free, so the retry runs again."""
    attempts = 0

    async def flaky(args: dict[str, Any], host: Any) -> Any:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise EgressDenied("GET https://x.example/ refused: not in the allowlist")
        return {"attempt": attempts}

    pincer.test_runtime.funcs["writer"] = flaky
    first = await call(pincer, "writer", {"text": "x"}, idempotency_key="k-1")
    assert first.error["code"] == "egress_denied"
    second = await call(pincer, "writer", {"text": "x"}, idempotency_key="k-1")
    assert second.ok and not second.cached and second.output == {"attempt": 2}
    third = await call(pincer, "writer", {"text": "x"}, idempotency_key="k-1")
    assert third.cached and third.output == {"attempt": 2} and attempts == 2


async def test_an_error_output_with_content_blocks_keeps_them_and_reads_as_json(pincer: Pincer) -> None:
    """An MCP tool's isError result: the value as JSON text (never a Python repr), the content
    blocks scanned and returned beside it."""

    async def failing(args: dict[str, Any], host: Any) -> Any:
        return ToolOutput(
            value={"reason": "quota", "left": 0},
            content=({"type": "text", "text": "over quota"},),
            is_error=True,
        )

    pincer.test_runtime.funcs["echo"] = failing
    result = await call(pincer, "echo")
    assert not result.ok and result.error == {"code": "tool_error", "message": '{"left":0,"reason":"quota"}'}
    assert result.content == ({"type": "text", "text": "over quota"},)


async def test_secret_named_keys_are_masked_at_any_depth_in_the_audit(pincer: Pincer) -> None:
    args = {"items": [{"api_key": "abc", "name": "one"}, [{"Password": "pw"}]], "note": "plain"}
    result = await call(pincer, "echo", args)
    assert result.ok
    record = (await pincer.audit.records())[-1]
    masked = record.args
    assert masked["note"] == "plain" and masked["items"][0]["name"] == "one"
    assert masked["items"][0]["api_key"] != "abc" and masked["items"][1][0]["Password"] != "pw"
    assert "abc" not in str(masked) and "'pw'" not in str(masked)


def test_the_secret_key_verdicts_stay_bounded_and_right() -> None:
    """Keys come from callers: past the bound the remembered verdicts start over, and a verdict is
    the same whether remembered or not."""
    dispatch._secret_key_verdicts.clear()
    many = {f"field-{i}": i for i in range(dispatch._MAX_REMEMBERED_KEYS + 10)}
    many["client_secret"] = "x"
    masked = dispatch._mask_secret_keys(many)
    assert len(dispatch._secret_key_verdicts) <= dispatch._MAX_REMEMBERED_KEYS
    assert masked["client_secret"] == dispatch._REDACTED and masked["field-7"] == 7
    assert dispatch._mask_secret_keys({"client_secret": "y", 3: "z"}) == {"client_secret": dispatch._REDACTED, 3: "z"}


API_CAPS = {
    "http": {
        "allowlist": [{"host": "api.example.com"}],
        "credentials": {
            "tok": {"secret_name": "api_token", "location": {"type": "bearer"}, "host_patterns": ["api.example.com"]}
        },
    }
}


async def test_a_tool_whose_credential_is_not_set_is_refused_before_it_runs(tmp_path: Path) -> None:
    """Step 5: the refusal names the secret and the command that sets it; once set, the call runs."""
    config = parse_config('[[grants]]\ntool = "api_call"\ndefault = "allow"\n', home=tmp_path)
    runtime = FuncRuntime()
    runtime.add("api_call", _echo, effects=[E.NETWORK])
    caps = {**API_CAPS, "secrets": {"allowed_names": ["api_token"]}}
    runtime.specs["api_call"] = replace(runtime.specs["api_call"], capabilities=Capabilities.from_json(caps, source="t"))
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False) as p:
        await p.add_runtime(runtime)
        refused = await call(p, "api_call", {"text": "x"})
        assert refused.error["code"] == "secret_error"
        assert refused.error["message"] == (
            "api_call: its credential is not set up: secret 'api_token' is not set, so the call cannot run"
        )
        assert refused.error["hint"] == "set it with `pincer secrets set api_token`, then call again"
        assert runtime.calls["api_call"] == 0
        p.secrets.set("api_token", "t0k3n-value-for-the-test")
        ran = await call(p, "api_call", {"text": "x"})
        assert ran.ok and runtime.calls["api_call"] == 1


async def test_a_credential_the_tool_may_not_read_is_refused_as_not_allowed_not_as_unset(tmp_path: Path) -> None:
    """A manifest whose credential names a secret missing from its ``secrets.allowed_names``: the
    call can never run, however often the secret is set. Failed before: the refusal said the
    secret "is not set" and its hint said to set it, which changed nothing."""
    config = parse_config('[[grants]]\ntool = "api_call"\ndefault = "allow"\n', home=tmp_path)
    runtime = FuncRuntime()
    runtime.add("api_call", _echo, effects=[E.NETWORK])
    caps = Capabilities.from_json(API_CAPS, source="t")
    runtime.specs["api_call"] = replace(runtime.specs["api_call"], capabilities=caps)
    async with Pincer.open(tmp_path, config=config, secret_key=KEY, builtins=False) as p:
        await p.add_runtime(runtime)
        p.secrets.set("api_token", "t0k3n-value-for-the-test")
        refused = await call(p, "api_call", {"text": "x"})
    assert refused.error["code"] == "secret_error"
    assert refused.error["message"] == (
        "api_call: its credential's secret 'api_token' is not allowed for this tool, so the call cannot run"
    )
    assert "secrets.allowed_names" in refused.error["hint"]
    assert runtime.calls["api_call"] == 0


@pytest.mark.parametrize(
    ("args", "hosts"),
    [
        ({}, ("api.example.com",)),
        ({"url": "https://API.example.com/x"}, ("api.example.com",)),
        ({"url": "http://127.0.0.1:8080/"}, ("api.example.com", "127.0.0.1:8080")),
        ({"url": "http://[::1]:9/"}, ("api.example.com", "[::1]:9")),
        ({"url": "http://h.example:99999/"}, ("api.example.com",)),  # a port out of range: no host shown
        ({"url": "/relative/only"}, ("api.example.com",)),
        ({"url": 5}, ("api.example.com",)),
    ],
)
def test_planned_hosts_are_the_allowlist_and_the_url_a_call_names(args: dict[str, Any], hosts: tuple[str, ...]) -> None:
    runtime = FuncRuntime()
    runtime.add("api_call", _echo)
    tool = replace(runtime.specs["api_call"], capabilities=Capabilities.from_json(API_CAPS, source="test"))
    assert dispatch.planned_hosts(tool, args) == hosts
    assert dispatch.planned_hosts(runtime.specs["api_call"], {"url": "https://b.example/"}) == ("b.example",)


async def test_decisions_cached_per_session_stay_bounded_and_stay_right(
    pincer: Pincer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session names come from callers: the per-session verdicts and grant decisions the
    dispatcher remembers start over past the bound (here 2), and every call is still decided as
    its session says (``main`` may call; a session nobody configured gets the sandbox default)."""
    monkeypatch.setattr(dispatch, "_MAX_CACHED_DECISIONS", 2)
    monkeypatch.setattr(dispatch, "_MAX_REMEMBERED_KEYS", 0)  # effect names: computed, never kept
    monkeypatch.setattr(dispatch, "_effect_names_of", {})
    args = {"echo": {"n": 1}, "greeter": {"name": "Ada"}, "installer": {}}
    for _ in range(2):
        for session in ("main", "caller-1", "caller-2"):
            for tool, given in args.items():
                result = await call(pincer, tool, given, session=session)
                if session == "main":
                    assert result.ok, result.error
                else:
                    assert result.error["code"] == "denied" and f"session {session!r}" in result.error["message"]
                assert len(pincer.dispatcher._sessions) <= 2 and len(pincer.dispatcher._grant_cache) <= 2
    records = await pincer.audit.records()
    assert len(records) == 18 and [r.outcome for r in records].count("ok") == 6
    assert [list(r.effects) for r in records if r.tool == "installer" and r.outcome == "ok"] == [["modify_extension"]] * 2


class AskingRuntime(FuncRuntime):
    """A runtime with approvals of its own (as the script runtime's exec approvals): its preflight
    asks a person about every call, whatever the grants say."""

    async def preflight(self, spec, args, host):  # type: ignore[no-untyped-def]
        return RuntimeAsk(reason="runs a command nobody allowed yet", effects=("execute",))


async def test_a_runtimes_own_ask_is_put_to_a_person_even_when_the_grants_allow(pincer: Pincer) -> None:
    runtime = AskingRuntime()
    runtime.add("exec_tool", _echo, schema={"type": "object"})
    await pincer.add_runtime(runtime)
    asked: list[Any] = []

    async def answer(approval: Any, decision: str) -> None:
        asked.append(approval)
        await pincer.dispatcher.answer(approval.id, decision, by="test")

    url = {"url": "https://files.example.com:8443/a"}
    denied = await pincer.call(CallRequest(tool="exec_tool", args=url), on_approval=lambda a: answer(a, "deny"))
    assert denied.error["code"] == "approval_denied" and runtime.calls["exec_tool"] == 0
    allowed = await pincer.call(CallRequest(tool="exec_tool", args=url), on_approval=lambda a: answer(a, "allow_once"))
    assert allowed.ok and runtime.calls["exec_tool"] == 1
    assert len(asked) == 2 and asked[0].tool == "exec_tool"
    assert "files.example.com:8443" in asked[0].hosts  # the hosts a person is shown: the call's own URL


async def test_a_call_an_entry_point_refused_is_audited_with_its_error(pincer: Pincer) -> None:
    """Dispatcher.reject: malformed arguments a gateway could not even parse still leave a record."""
    error = UsageError("the arguments are not valid JSON", hint="send a JSON object")
    result = await pincer.dispatcher.reject(CallRequest(tool="echo", args={}, caller="rest"), error)
    assert not result.ok and result.audit_id is not None
    assert result.error["code"] == "usage_error" and result.error["message"] == "the arguments are not valid JSON"
    record = (await pincer.audit.records())[-1]
    assert (record.id, record.tool, record.outcome, record.error_code) == (result.audit_id, "echo", "error", "usage_error")
    assert pincer.test_runtime.calls["echo"] == 0
