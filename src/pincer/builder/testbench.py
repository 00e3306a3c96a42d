"""The test stage: a build's tests, run in the WASM sandbox with the tool's own capabilities.

Each case is one fresh instance of the shared runner with the tool's source handed in, under the
build's fuel, memory and time limits, its capabilities exactly as they will be installed, and
its HTTP sent to a :class:`~pincer.builder.fixtures.FixtureServer` after the real checks. The
credentials it declares resolve to throwaway test values (never the user's secrets), injected
host-side as in production; the fixture server records where they arrived.

A case fails on a trap (fuel, deadline, memory), a leak-scanner hit in its output or logs (the
test values and the known secret values), an error where a value was expected, or an output
that does not contain the expected value. Schema-derived inputs (hypothesis-jsonschema, a few
per build) fail only on a trap, a leak or output that is not JSON: a tool may refuse odd input.
When the plan's output is a JSON Schema, every output that is not an error (of a test or of a
generated input) must match it.
"""

from __future__ import annotations

import json
import secrets as _random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pincer.builder.code import Submission
from pincer.builder.fixtures import FixtureServer
from pincer.core.schema import compile_schema, value_problem
from pincer.core.values import HostContext
from pincer.runtimes.wasm import RunnerSandbox, RunnerSource, WasmLimits, source_sha256

if TYPE_CHECKING:
    from pincer.core.capabilities import Capabilities
    from pincer.runtimes.wasm import RawResponse
    from pincer.safety.scanner import LeakScanner

__all__ = ["CaseResult", "TestBench", "contains", "GENERATED_CASES"]

GENERATED_CASES = 4
_OUTPUT_CHARS = 600


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseResult:
    label: str
    ok: bool
    args: Mapping[str, Any]
    expect: Any = None
    output: Any = None
    error: str | None = None
    problem: str = ""
    logs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "ok": self.ok, "args": dict(self.args), "expect": self.expect,
                "output": self.output, "error": self.error, "problem": self.problem, "logs": list(self.logs)[-5:]}  # fmt: skip

    def feedback(self) -> str:
        text = f"{self.label} with args {json.dumps(dict(self.args))[:300]}: {self.problem}"
        if self.logs:
            text += "\n  log: " + "\n  log: ".join(line[-800:] for line in self.logs[-3:])
        return text


def contains(output: Any, expect: Any) -> bool:
    """``expect`` is in ``output``: every key of an object (recursively), every item of a list
    in some item, a substring of a string, else equality."""
    if isinstance(expect, dict):
        return isinstance(output, dict) and all(k in output and contains(output[k], v) for k, v in expect.items())
    if isinstance(expect, list):
        return isinstance(output, list) and all(any(contains(o, e) for o in output) for e in expect)
    if isinstance(expect, str) and isinstance(output, str):
        return expect in output
    if isinstance(expect, bool) or isinstance(output, bool):
        return expect is output
    return bool(output == expect)


class _TestSecrets:
    """The SecretAccess of a test run: declared names resolve to fresh throwaway values."""

    def __init__(self, names: Sequence[str]) -> None:
        self.values = {name: f"pincer-test-{name}-{_random.token_hex(12)}" for name in names}
        self._injected: list[str] = []

    def is_allowed(self, name: str) -> bool:
        return name in self.values

    def find(self, name: str) -> str | None:
        return self.values.get(name)

    def has(self, name: str) -> bool:
        return bool(self.values.get(name))

    def get(self, name: str) -> str:
        return self.values[name]

    def record(self, value: str) -> None:
        self._injected.append(value)

    @property
    def injected(self) -> tuple[str, ...]:
        return tuple(self._injected)


@dataclass(kw_only=True, slots=True)
class TestBench:
    """Runs sources in the runner. ``known_secrets``: values the leak scan looks for as well."""

    home: Path
    runner_wasm: Path
    limits: WasmLimits
    known_secrets: Sequence[str] = ()
    workspace: Path | None = None
    _sandbox: RunnerSandbox = field(init=False)

    def __post_init__(self) -> None:
        self._sandbox = RunnerSandbox(self.home, self.runner_wasm, self.limits)  # loads on first use

    def _ensure(self) -> None:
        self._sandbox.open()

    def close(self) -> None:
        self._sandbox.close()

    async def describe(self, source: str) -> tuple[str, dict[str, Any]]:
        """The source's ``description()`` and ``schema()``, from running it in the runner.
        Raises ValueError with the runner's message when it does not load."""
        await anyio.to_thread.run_sync(self._ensure)
        tool = RunnerSource(source=source, sha256=source_sha256(source), description="")
        raw, logs = await self._execute("describe", tool, {}, None, None, op="describe")
        if raw is None or raw.error is not None:
            detail = raw.error if raw is not None and raw.error is not None else "trapped"
            raise ValueError(detail + ("\n" + "\n".join(logs[-3:]) if logs else ""))
        data = json.loads(raw.output or "null")
        if not isinstance(data, dict) or not isinstance(data.get("schema"), dict):
            raise ValueError("schema() did not return a JSON Schema object (pass schema={...} to @tool)")
        return str(data.get("description") or ""), data["schema"]

    async def _execute(self, name: str, tool: RunnerSource, args: Mapping[str, Any], caps: Capabilities | None,
                       fixtures: FixtureServer | None, *, op: str = "execute",
                       secrets: _TestSecrets | None = None) -> tuple[RawResponse | None, tuple[str, ...]]:  # fmt: skip
        from pincer.safety.scanner import LeakScanner

        host = HostContext(session="builder", tool=name, workspace=self.workspace, timeout_s=self.limits.timeout_s,
                           capabilities=caps, secrets=secrets)  # fmt: skip
        base = LeakScanner(tuple(self.known_secrets) + (tuple(secrets.values.values()) if secrets else ()))
        return await self._sandbox.run(
            tool, args, host=host, scanner=base, op=op, redirect=fixtures.redirect if fixtures is not None else None,
            secret_allowed=lambda n: bool(secrets and secrets.is_allowed(n)),
        )  # fmt: skip

    async def run(self, name: str, submission: Submission, capabilities: bytes, *, input_schema: Mapping[str, Any],
                  secret_names: Sequence[str], generated: int = GENERATED_CASES,
                  output_schema: Mapping[str, Any] | None = None) -> tuple[list[CaseResult], dict[str, Any]]:  # fmt: skip
        """Every case's result, and what the fixture server saw (``{"requests": [...]}``).
        ``output_schema``: every output, of the tests and of the generated inputs, must match it."""
        from pincer.core.capabilities import Capabilities
        from pincer.safety.scanner import LeakScanner

        await anyio.to_thread.run_sync(self._ensure)
        caps = Capabilities.from_json(capabilities, source=f"{name}.capabilities.json")
        tool = RunnerSource(source=submission.source, sha256=source_sha256(submission.source), description="")
        results: list[CaseResult] = []
        cases: list[tuple[str, Mapping[str, Any], Any, bool]] = [
            (f"test {i + 1}", t.args, t.expect, True) for i, t in enumerate(submission.tests)
        ]
        cases += [(f"generated input {i + 1}", a, None, False) for i, a in enumerate(_generated(input_schema, generated))]
        with FixtureServer(submission.fixtures) as server:
            for label, args, expect, strict in cases:
                secrets = _TestSecrets(secret_names)
                scanner = LeakScanner(tuple(self.known_secrets) + tuple(secrets.values.values()))
                raw, logs = await self._execute(name, tool, args, caps, server, secrets=secrets)
                results.append(_conforms(_judge(label, args, expect, strict, raw, logs, scanner), output_schema))
            # where the host put a test credential (never its value)
            seen = [{"method": r.method, "url": r.url, "credential_headers": sorted(k for k, v in r.headers.items()
                     if "pincer-test-" in v)} for r in server.received]  # fmt: skip
        return results, {"requests": seen}


def _judge(label: str, args: Mapping[str, Any], expect: Any, strict: bool, raw: RawResponse | None, logs: tuple[str, ...],
           scanner: LeakScanner) -> CaseResult:  # fmt: skip
    def result(ok: bool, problem: str = "", output: Any = None, error: str | None = None) -> CaseResult:
        return CaseResult(label=label, ok=ok, args=args, expect=expect, output=output, error=error, problem=problem,
                          logs=tuple(scanner.scan_text(line)[0] for line in logs))  # fmt: skip

    if raw is None:
        trap = next((line for line in reversed(logs) if line.startswith("trap: ")), "trap: the tool trapped")
        return result(False, f"contained: {trap[6:]}")
    text = (raw.output or "") + "\n" + (raw.error or "") + "\n" + "\n".join(logs)
    if scanner.contains_secret(text):
        return result(False, "contained: the output or logs carry a secret or a secret-shaped value (leak scanner)",
                      error=scanner.scan_text(raw.error or "")[0] or None)  # fmt: skip
    if raw.error is not None:
        if expect == {"error": True} or not strict:
            return result(True, error=raw.error)
        return result(False, f"the tool failed: {raw.error[:_OUTPUT_CHARS]}", error=raw.error)
    try:
        output = json.loads(raw.output) if raw.output is not None else None
    except ValueError:
        return result(False, "the output is not JSON")
    if not strict:
        return result(True, output=output)
    if expect == {"error": True}:
        return result(False, f"expected an error, got {json.dumps(output)[:_OUTPUT_CHARS]}", output=output)
    if not contains(output, expect):
        return result(False, f"expected the output to contain {json.dumps(expect)[:300]}, got {json.dumps(output)[:_OUTPUT_CHARS]}",
                      output=output)  # fmt: skip
    return result(True, output=output)


def _conforms(result: CaseResult, output_schema: Mapping[str, Any] | None) -> CaseResult:
    """A passing case whose output does not match the planned output schema fails."""
    if output_schema is None or not result.ok or result.error is not None:
        return result
    from dataclasses import replace

    problem = value_problem(compile_schema(output_schema), result.output)
    if problem is None:
        return result
    where, _, message = problem.partition(": ")
    return replace(result, ok=False, problem=f"the output does not match the plan's output schema at {where}: {message[:300]}")


_PLAIN_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "description", "title", "$schema"})


def _strategy(schema: Mapping[str, Any], from_schema: Any) -> Any:
    """hypothesis-jsonschema's strategy for ``schema``, with plain object schemas composed from
    their properties' strategies by Hypothesis's public ``fixed_dictionaries``: the library's own
    object strategy uses a Hypothesis internal (``many.more``) that current Hypothesis no longer
    has, so every object schema drew nothing and no generated input ever ran."""
    from hypothesis import strategies as st

    if schema.get("type") == "object" and set(schema) <= _PLAIN_OBJECT_KEYS:
        properties = schema.get("properties") or {}
        if isinstance(properties, Mapping) and all(isinstance(v, Mapping) for v in properties.values()):
            required = [k for k in schema.get("required") or () if k in properties]
            return st.fixed_dictionaries(
                {k: _strategy(properties[k], from_schema) for k in required},
                optional={k: _strategy(v, from_schema) for k, v in properties.items() if k not in required},
            )
    return from_schema(dict(schema))


def _generated(schema: Mapping[str, Any], count: int) -> list[dict[str, Any]]:
    """Up to ``count`` distinct inputs drawn from ``schema`` (deterministic; none when the schema
    cannot be turned into a strategy)."""
    if count <= 0:
        return []
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis_jsonschema import from_schema
    except ImportError:
        return []
    found: list[dict[str, Any]] = []

    try:
        strategy = _strategy(schema, from_schema)

        @settings(max_examples=count * 3, derandomize=True, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), deadline=None)  # fmt: skip
        @given(strategy)
        def draw(value: Any) -> None:
            if isinstance(value, dict) and value not in found and len(found) < count:
                found.append(value)

        draw()
    except Exception:  # noqa: BLE001 - a schema hypothesis-jsonschema cannot handle: no generated inputs
        return found
    return found
