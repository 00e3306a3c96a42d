"""The exec tool under exec approvals, and where sessions run, with real processes."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from pincer.core.errors import ApprovalDenied, Denied, ToolNotFound, UsageError
from pincer.core.values import HostContext, RuntimeAsk
from pincer.policy.exec_approvals import Answer, Ask, ExecApprovalPolicy, Security
from pincer.runtimes.script import ScriptRuntime, ScriptSettings

from .helpers import manifest, sandbox_owned_dir

pytestmark = pytest.mark.anyio

SHELLS = ("/usr/bin/sh", "/usr/bin/dash", "/bin/sh")


def exec_runtime(scratch: Path, policy: ExecApprovalPolicy, **kwargs) -> ScriptRuntime:
    return ScriptRuntime([], ScriptSettings(scratch_root=scratch, exec_policy=policy, use_workspace=True), **kwargs)


class Recorder:
    """Plays the call chain's approval step: answers from a script (None: nobody answered in
    time) and remembers what it was asked."""

    def __init__(self, *answers: Answer | None) -> None:
        self.answers = list(answers)
        self.asked: list[RuntimeAsk] = []

    def decide(self, ask: RuntimeAsk) -> str:
        """The approval the call runs under, as the chain would set HostContext.approval."""
        self.asked.append(ask)
        answer = self.answers.pop(0)
        if answer is None:
            if ask.fallback_allows:
                return "ask_fallback"
            raise ApprovalDenied(f"exec needs approval and nobody answered ({ask.reason})")
        if answer is Answer.DENY:
            raise ApprovalDenied("exec was denied")
        if answer is Answer.ALLOW_ALWAYS and ask.remember is not None:
            ask.remember()
        return "approval-1"


async def call(
    runtime: ScriptRuntime,
    command: str,
    workspace: Path | None = None,
    session: str = "agent",
    recorder: Recorder | None = None,
):
    """One exec call as the chain makes it: preflight, the approval step, invoke."""
    spec = next(s for s in runtime.tools() if s.name == "exec")
    host = HostContext(session=session, tool="exec", workspace=workspace)
    ask = await runtime.preflight(spec, {"command": command}, host)
    if ask is not None:
        host = replace(host, approval=(recorder or Recorder(None)).decide(ask))
    return await runtime.invoke(spec, {"command": command}, host)


async def test_allowlisted_sh_does_not_let_sh_c_curl_through(public_dir: Path) -> None:
    workspace = sandbox_owned_dir(public_dir / "ws")
    policy = ExecApprovalPolicy(allowlist=(*SHELLS, "/usr/bin/touch"))
    command = 'sh -c "touch /work/ran; curl -s http://127.0.0.1:9/"'

    # Nobody to ask: the fallback (deny) refuses, and nothing ran.
    runtime = exec_runtime(public_dir / "scratch", policy)
    with pytest.raises(ApprovalDenied) as caught:
        await call(runtime, command, workspace)
    assert "/usr/bin/curl is not in the allowlist" in caught.value.message
    assert not (workspace / "ran").exists()

    # A person is asked about curl, not about sh, and says no.
    recorder = Recorder(Answer.DENY)
    runtime = exec_runtime(public_dir / "scratch", policy)
    with pytest.raises(ApprovalDenied):
        await call(runtime, command, workspace, recorder=recorder)
    assert not (workspace / "ran").exists()
    (asked,) = recorder.asked
    missing = [s["executable"] for s in asked.detail["evaluation"]["segments"] if s["matched"] is None]
    assert missing == ["/usr/bin/curl"]
    assert asked.detail["sandboxed"] is True

    # Allowed once: it runs (in the sandbox, where curl finds no network).
    runtime = exec_runtime(public_dir / "scratch", policy)
    out = await call(runtime, command, workspace, recorder=Recorder(Answer.ALLOW_ONCE))
    assert (workspace / "ran").exists()
    assert out.is_error and out.usage["exit_code"] != 0  # curl could not connect
    assert runtime.exec_policy.allowlist == policy.allowlist


async def test_allow_always_persists_the_inner_program(public_dir: Path) -> None:
    saved: list[ExecApprovalPolicy] = []
    recorder = Recorder(Answer.ALLOW_ALWAYS)
    runtime = exec_runtime(public_dir / "scratch", ExecApprovalPolicy(allowlist=SHELLS), on_policy_change=saved.append)
    out = await call(runtime, "env LANG=C nice -n 5 uname -s", recorder=recorder)
    assert out.value["stdout"] == "Linux\n"
    assert saved and "/usr/bin/uname" in saved[-1].allowlist
    assert not {"/usr/bin/env", "/usr/bin/nice"} & set(saved[-1].allowlist)
    out = await call(runtime, "uname -s", recorder=recorder)  # now allowlisted: no question
    assert out.value["stdout"] == "Linux\n"
    assert len(recorder.asked) == 1


async def test_inline_eval_asks_even_for_an_allowlisted_interpreter(public_dir: Path) -> None:
    policy = ExecApprovalPolicy(allowlist=("/usr/bin/python3*",))
    recorder = Recorder(Answer.ALLOW_ALWAYS)
    runtime = exec_runtime(public_dir / "scratch", policy)
    out = await call(runtime, "python3 -c 'print(6*7)'", recorder=recorder)
    assert out.value["stdout"] == "42\n"
    assert recorder.asked[0].detail["evaluation"]["segments"][0]["inline_eval"]
    assert runtime.exec_policy.allowlist == policy.allowlist  # allow_always never persists inline eval
    allowed = exec_runtime(public_dir / "scratch", ExecApprovalPolicy(allowlist=policy.allowlist, allow_inline_eval=True))
    assert (await call(allowed, "python3 -c 'print(1)'")).value["stdout"] == "1\n"


async def test_security_deny_and_ask_off(public_dir: Path) -> None:
    with pytest.raises(Denied, match="security=deny"):
        await call(exec_runtime(public_dir / "s", ExecApprovalPolicy(security=Security.DENY)), "true")
    with pytest.raises(Denied, match="ask=off"):
        await call(exec_runtime(public_dir / "s", ExecApprovalPolicy(ask=Ask.OFF)), "true")
    recorder = Recorder(Answer.ALLOW_ONCE)
    runtime = exec_runtime(public_dir / "s", ExecApprovalPolicy(security=Security.FULL, ask=Ask.ALWAYS))
    await call(runtime, "true", recorder=recorder)
    assert len(recorder.asked) == 1


async def test_a_line_no_allowlist_can_allow_says_so(public_dir: Path) -> None:
    """The hint for a fail-closed line names the setting that lets a person decide, not the allowlist."""
    runtime = exec_runtime(public_dir / "s", ExecApprovalPolicy(ask=Ask.OFF, allowlist=("/usr/bin/*",)))
    with pytest.raises(Denied) as caught:
        await call(runtime, "env -S 'ls -l'")
    assert "env -S" in caught.value.message
    assert caught.value.hint is not None and '"ask": "on-miss"' in caught.value.hint
    with pytest.raises(Denied) as caught:
        await call(runtime, "/opt/nothing-here")
    assert caught.value.hint is not None and "allowlist the program's resolved path" in caught.value.hint


async def test_ask_fallback_allowlist_and_unanswered(public_dir: Path) -> None:
    policy = ExecApprovalPolicy(ask=Ask.ALWAYS, ask_fallback=Security.ALLOWLIST, allowlist=("/usr/bin/true",))
    runtime = exec_runtime(public_dir / "s", policy)
    assert (await call(runtime, "true", recorder=Recorder(None))).value["exit_code"] == 0
    runtime = exec_runtime(public_dir / "s", policy)
    with pytest.raises(ApprovalDenied, match="nobody answered"):
        await call(runtime, "false", recorder=Recorder(None))


async def test_non_main_sessions_are_always_sandboxed(public_dir: Path) -> None:
    settings = ScriptSettings(
        scratch_root=public_dir / "scratch",
        main_session_on_host=True,
        exec_policy=ExecApprovalPolicy(security=Security.FULL, ask=Ask.OFF),
    )
    runtime = ScriptRuntime([], settings, is_main_session=lambda session: session == "owner")
    on_host = await call(runtime, "cat /proc/1/comm; id -u", session="owner")
    sandboxed = await call(runtime, "cat /proc/1/comm; id -u", session="main")
    assert on_host.value["backend"] == "host"
    assert on_host.value["stdout"].split()[1] == str(os.geteuid())
    assert sandboxed.value["backend"] != "host"
    assert sandboxed.value["stdout"].split()[0] == "bwrap"
    default = ScriptRuntime([], ScriptSettings(scratch_root=public_dir / "scratch", exec_policy=settings.exec_policy))
    assert (await call(default, "true", session="main")).value["backend"] != "host"


async def test_unknown_tool_and_duplicate_names(settings) -> None:
    runtime = ScriptRuntime([], settings)
    spec = runtime.tools()[0]
    from dataclasses import replace

    with pytest.raises(ToolNotFound):
        await runtime.invoke(replace(spec, name="nope"), {}, HostContext(session="a", tool="nope"))
    with pytest.raises(UsageError, match="two script tools"):
        ScriptRuntime([manifest(name="x"), manifest(name="x")], settings)
    with pytest.raises(UsageError, match="two script tools"):
        ScriptRuntime([manifest(name="exec")], settings)


async def test_tools_describe_themselves(settings) -> None:
    runtime = ScriptRuntime([manifest(name="wc", sandbox={"network": "host"})], settings)
    specs = {s.name: s for s in runtime.tools()}
    assert set(specs) == {"wc", "exec"}
    assert specs["exec"].input_schema["required"] == ["command"]
    assert "network" in {e.value for e in specs["wc"].effects}
    assert specs["wc"].runtime.value == "script"
