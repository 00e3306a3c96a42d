"""One build: describe -> plan -> generate -> check -> build -> test -> fix -> sign and register.

    builder = Builder(home=home, provider=provider, model="...", secrets=store, runner_cache=dir)
    report = await builder.build(BuildRequest(description="...", hosts=("api.example.com",)))

The model answers through two tool calls (``submit_plan``, ``submit_code``; docs/builder.md).
Each ``submit_code`` is one iteration: parsed, checked (:mod:`pincer.builder.code`), described
and tested in the runner (:mod:`pincer.builder.testbench`); its failures go back to the model
until one passes or ``max_iterations`` are used. Generated code runs only inside WASM. A passing
iteration is signed and installed (:mod:`pincer.builder.register`); a failing build registers
nothing. Every stage is recorded (:mod:`pincer.builder.record`) and reported to ``progress``, and
every build that got past its plan is recorded, failed or not.

A build never replaces a tool by accident: when the plan names a tool there is (``taken``
says which), the build stops right after the plan unless it edits that tool (``--edit NAME``)
or was asked to replace it (``--replace``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from pincer.builder.code import CodeInvalid, Submission, check_source, parse_submission
from pincer.builder.plan import Allowance, Plan, PlanInvalid, parse_plan
from pincer.builder.prompt import SUBMIT_CODE, SUBMIT_PLAN, SYSTEM
from pincer.builder.record import BuildRecord, read_build
from pincer.builder.testbench import GENERATED_CASES, TestBench
from pincer.builder.vetting import description_problems, output_schema_of
from pincer.core.errors import BuildFailed, BuildRefused, PincerError, ToolNameTaken
from pincer.core.schema import schema_problem
from pincer.llm.answers import bound_output
from pincer.llm.messages import CompletionOptions, Message, TextDelta, TokenUsage, ToolCall, ToolCallReady, UsageReport
from pincer.runtimes.wasm import BUILT_SUFFIX, RUNNER_PROTOCOL, WasmLimits, source_sha256

__all__ = ["BuildRequest", "BuildReport", "Builder", "PlannedBuild", "StageTime", "DEFAULT_MAX_ITERATIONS", "capabilities_for"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_ITERATIONS = 4
MODEL_TURN_TIMEOUT_S = 300.0
Progress = Callable[[str, float, str], None]  # (stage, seconds, detail)
Taken = Callable[[str], "str | None"]  # a tool name -> what has that name already (None: free)


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRequest:
    description: str
    name: str | None = None
    hosts: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    standalone: bool = False
    edit: str | None = None  # the recorded build this one changes
    replace: bool = False  # the plan's name may be a tool there is: the build replaces it
    session: str = "main"


@dataclass(frozen=True, kw_only=True, slots=True)
class StageTime:
    stage: str
    seconds: float
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "seconds": round(self.seconds, 4), "detail": self.detail}


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildReport:
    name: str
    ok: bool
    version: str = ""
    key: str = ""
    fingerprint: str = ""
    signer: str = ""
    description: str = ""
    hosts: tuple[str, ...] = ()
    secrets: tuple[dict[str, Any], ...] = ()
    effects: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    tests_passed: int = 0
    tests_total: int = 0
    iterations: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    seconds: float = 0.0
    plan_to_registered_s: float | None = None
    stages: tuple[StageTime, ...] = ()
    failures: tuple[str, ...] = ()
    standalone: bool = False
    build_dir: str = ""
    requests: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "ok": self.ok, "version": self.version, "key": self.key, "fingerprint": self.fingerprint,
            "signer": self.signer, "description": self.description, "hosts": list(self.hosts),
            "secrets": list(self.secrets), "effects": list(self.effects), "dropped": list(self.dropped),
            "tests_passed": self.tests_passed, "tests_total": self.tests_total, "iterations": self.iterations,
            "tokens": dict(self.tokens), "cost_usd": self.cost_usd, "seconds": round(self.seconds, 4),
            "plan_to_registered_s": None if self.plan_to_registered_s is None else round(self.plan_to_registered_s, 4),
            "stages": [s.to_json() for s in self.stages], "failures": list(self.failures),
            "standalone": self.standalone, "build_dir": self.build_dir, "requests": list(self.requests),
        }  # fmt: skip


def capabilities_for(plan: Plan, version: str) -> dict[str, Any]:
    """The capabilities file of a plan: its hosts over https, its secrets injected there."""
    caps: dict[str, Any] = {"version": version, "wit_version": "0.3.0", "name": plan.name,
                            "description": plan.description}  # fmt: skip
    if plan.hosts:
        http: dict[str, Any] = {"allowlist": [{"host": h, "path_prefix": "/"} for h in plan.hosts]}
        if plan.secrets:
            http["credentials"] = {
                s.name: {"secret_name": s.name, "location": dict(s.location), "host_patterns": [s.host]} for s in plan.secrets
            }
        caps["http"] = http
    if plan.secrets:
        caps["secrets"] = {"allowed_names": [s.name for s in plan.secrets]}
    return caps


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedBuild:
    """A plan the model gave and pincer accepted, with the conversation that led to it: a build
    can stop there (to show the plan for an approval) and go on from it later."""

    plan: Plan
    messages: tuple[Message, ...]
    usage: TokenUsage
    failures: tuple[str, ...] = ()
    seconds: float = 0.0


class _Conversation:
    """The messages of a build and the model turns over them (tokens counted)."""

    def __init__(self, provider: Any, model: str, max_output_tokens: int) -> None:
        self.provider = provider
        self.options = CompletionOptions(model=model, max_output_tokens=max_output_tokens, parallel_tool_calls=False)
        self.messages: list[Message] = [Message(role="system", content=SYSTEM)]
        self.usage = TokenUsage()

    async def turn(self, tool: Any) -> list[ToolCall]:
        calls: list[ToolCall] = []
        text: list[str] = []
        with anyio.fail_after(MODEL_TURN_TIMEOUT_S):
            # the same per-turn bound as a run's turns (llm/answers.py): counted, not claimed
            events = bound_output(self.provider.complete(self.messages, [tool], self.options), self.options,
                                  getattr(self.provider, "name", "model"))  # fmt: skip
            async for event in events:
                kind = type(event).__name__
                if isinstance(event, ToolCallReady):
                    calls.append(event.call)
                elif isinstance(event, UsageReport):
                    self.usage = self.usage + event.usage
                elif isinstance(event, TextDelta):
                    text.append(event.text)
                elif kind == "Retrying":
                    calls, text = [], []
        self.messages.append(Message(role="assistant", content="".join(text), tool_calls=tuple(calls)))
        return calls

    def answer(self, calls: Sequence[ToolCall], content: str, *, is_error: bool) -> None:
        for index, call in enumerate(calls):
            text = content if index == 0 else "ignored: answer with one call at a time"
            self.messages.append(Message(role="tool", content=text, tool_call_id=call.id, name=call.name, is_error=is_error))

    def say(self, content: str) -> None:
        self.messages.append(Message(role="user", content=content))


class Builder:
    """Builds over one home. ``secrets``: the secret store (the signing key; the allowed secrets'
    values for the leak scan); ``audit(action, key, version, reason)``: the hub's audit sink."""

    def __init__(
        self, *, home: Path, provider: Any, model: str, secrets: Any, runner_cache: Path, limits: WasmLimits | None = None,
        progress: Progress | None = None, audit: Any = None, key_secret: str = "hub_signing_key",
        max_output_tokens: int = 4_096, price: Any = None, generated_cases: int = GENERATED_CASES,
        taken: Taken | None = None,
    ) -> None:  # fmt: skip
        self.home = Path(home)
        self.provider = provider
        self.model = model
        self.secrets = secrets
        self.runner_cache = Path(runner_cache)
        self.limits = limits or WasmLimits(fuel=2_000_000_000, timeout_s=5.0)
        self.progress = progress
        self.audit = audit
        self.key_secret = key_secret
        self.max_output_tokens = max_output_tokens
        self.price = price
        self.generated_cases = generated_cases
        self.taken = taken
        self._stages: list[StageTime] = []

    def _stage(self, stage: str, started: float, detail: str = "") -> None:
        took = time.perf_counter() - started
        self._stages.append(StageTime(stage=stage, seconds=took, detail=detail))
        if self.progress is not None:
            self.progress(stage, took, detail)

    async def plan(self, request: BuildRequest) -> PlannedBuild:
        """The plan stage alone: the model's plan, validated against what the request allows
        (BuildRefused for a refused plan, BuildFailed when no answer was a valid plan). Nothing
        is written; ``build(request, planned=...)`` goes on from it (after an approval)."""
        self._check(request)
        started = time.perf_counter()
        chat = _Conversation(self.provider, self.model, self.max_output_tokens)
        allowance = Allowance(hosts=frozenset(h.lower() for h in request.hosts), secrets=frozenset(request.secrets))
        chat.say(self._brief(request))
        plan: Plan | None = None
        failures: list[str] = []
        for _attempt in range(request.max_iterations):
            calls = await chat.turn(SUBMIT_PLAN)
            call = next((c for c in calls if c.name == "submit_plan"), None)
            if call is None:
                chat.say("Answer with the submit_plan tool call.")
                failures.append("the model did not call submit_plan")
                continue
            try:
                plan = parse_plan(call.arguments, allowance, name=request.name or request.edit)
            except PlanInvalid as exc:
                failures.append(f"plan: {exc}")
                chat.answer(calls, f"The plan was not accepted: {exc}. Call submit_plan again.", is_error=True)
                continue
            except BuildRefused:
                self._stage("plan", started, "refused")
                raise
            chat.answer(calls, json.dumps({"accepted": plan.to_json(), "dropped": list(plan.dropped),
                                           "next": "write the code and call submit_code"}), is_error=False)  # fmt: skip
            break
        if plan is None:
            self._stage("plan", started, "no valid plan")
            raise BuildFailed(f"the model gave no valid plan in {request.max_iterations} answers: {'; '.join(failures[-3:])}",
                              hint="describe the tool more precisely, or raise --max-iterations")  # fmt: skip
        self._check_name(plan.name, request, started)
        self._stage("plan", started, f"{plan.name}: hosts {', '.join(plan.hosts) or 'none'}; {len(plan.dropped)} dropped")
        return PlannedBuild(plan=plan, messages=tuple(chat.messages), usage=chat.usage, failures=tuple(failures),
                            seconds=time.perf_counter() - started)  # fmt: skip

    def _check_name(self, name: str, request: BuildRequest, started: float) -> None:
        """ToolNameTaken when ``name`` is a tool there is and the build neither edits nor replaces it."""
        holder = self.taken(name) if self.taken is not None else None
        if holder is None or request.replace or request.edit == name:
            return
        self._stage("plan", started, f"{name}: the name of {holder}")
        raise ToolNameTaken(
            f"the plan names the tool {name!r}, and {holder} has that name: the build stops before it replaces it",
            hint=f"change that tool with `pincer build --edit {name} \"THE CHANGE\"`, replace it with --replace, "
            "or give this one another name with --name",
        )

    def _check(self, request: BuildRequest) -> None:
        if not 1 <= request.max_iterations <= 20:
            raise PincerError("--max-iterations must be between 1 and 20", hint="e.g. --max-iterations 4")

    async def build(self, request: BuildRequest, *, planned: PlannedBuild | None = None) -> BuildReport:
        """Run every stage (from ``planned`` on, when the plan stage ran already); BuildRefused
        for a refused plan, BuildFailed when no iteration passed (the record is written either
        way), the report when the tool is registered."""
        from pincer.builder.runner import ensure_runner, is_runner_built

        began = time.perf_counter()
        self._stages = []
        self._check(request)
        started = time.perf_counter()
        if self.progress is not None and not is_runner_built(self.runner_cache):
            self.progress("runner", 0.0, f"building the shared runner into {self.runner_cache} (once per machine, ~30 s)")
        runner = await anyio.to_thread.run_sync(ensure_runner, self.runner_cache, self.home)
        self._stage("runner", started, runner.name)
        if planned is None:
            planned = await self.plan(request)
        else:  # planned before an approval, by another Builder: its stage is recorded here
            shown = planned.plan
            detail = f"{shown.name}: hosts {', '.join(shown.hosts) or 'none'}; {len(shown.dropped)} dropped; approved"
            self._stages.append(StageTime(stage="plan", seconds=planned.seconds, detail=detail))
        chat = _Conversation(self.provider, self.model, self.max_output_tokens)
        chat.messages, chat.usage = list(planned.messages), planned.usage
        plan, failures = planned.plan, list(planned.failures)
        plan_done = time.perf_counter()
        record = BuildRecord(self.home, plan.name)
        version = f"0.1.{record.sequence}"
        record.write("plan.json", plan.to_json())
        for line in plan.dropped:
            record.log(f"plan: {line}")
        caps = capabilities_for(plan, version)
        caps_bytes = (json.dumps(caps, indent=2, sort_keys=True) + "\n").encode()
        record.write("capabilities.json", caps_bytes.decode())
        bench = TestBench(home=self.home, runner_wasm=runner, limits=self.limits, known_secrets=self._known(plan),
                          workspace=record.folder / "workspace")  # fmt: skip
        try:
            return await self._code_and_register(request, chat, plan, plan_done, record, version, caps_bytes, bench,
                                                 runner, failures, began)  # fmt: skip
        except BuildFailed:
            raise  # no iteration passed: recorded where it was found
        except PincerError as exc:
            # A later stage failed (build, sign, register): recorded too, for `pincer builds show`.
            failed = BuildReport(name=plan.name, ok=False, description=plan.description, hosts=plan.hosts,
                                 effects=plan.effects, dropped=plan.dropped, failures=(*failures, f"{exc.code}: {exc.message}"),
                                 seconds=time.perf_counter() - began, stages=tuple(self._stages), build_dir=str(record.folder),
                                 standalone=request.standalone, tokens=chat.usage.to_dict(), cost_usd=self._cost(chat.usage),
                                 iterations=sum(1 for t in self._stages if t.stage == "generate"))  # fmt: skip
            record.log(f"failed: {exc.code}: {exc.message[:300]}")
            record.write("build.json", {**failed.to_json(), "sequence": record.sequence - 1, "finished_at": time.time()})
            raise
        finally:
            bench.close()

    async def _code_and_register(self, request: BuildRequest, chat: _Conversation, plan: Plan, plan_done: float,
                                 record: BuildRecord, version: str, caps_bytes: bytes, bench: TestBench, runner: Path,
                                 failures: list[str], began: float) -> BuildReport:  # fmt: skip
        passed: tuple[Submission, str, dict[str, Any], list[Any], dict[str, Any]] | None = None
        iterations = 0
        for iteration in range(1, request.max_iterations + 1):
            iterations = iteration
            started = time.perf_counter()
            calls = await chat.turn(SUBMIT_CODE)
            self._stage("generate", started, f"iteration {iteration}")
            call = next((c for c in calls if c.name == "submit_code"), None)
            outcome = await self._iteration(call, plan, bench, caps_bytes, record, iteration)
            if isinstance(outcome, str):
                failures.append(f"iteration {iteration}: {outcome}")
                record.log(f"iteration {iteration}: {outcome.splitlines()[0][:300]}")
                if calls:
                    chat.answer(calls, f"Iteration {iteration} failed:\n{outcome}\nFix it and call submit_code again.", is_error=True)
                else:
                    chat.say(f"Iteration {iteration} failed: {outcome}. Answer with the submit_code tool call.")
                continue
            passed = outcome
            if calls:
                chat.answer(calls, "All tests passed; the tool is being registered.", is_error=False)
            break
        tokens = chat.usage.to_dict()
        cost = self._cost(chat.usage)
        base = {"name": plan.name, "description": plan.description, "hosts": plan.hosts, "secrets": tuple(s.to_json() for s in plan.secrets),
                    "effects": plan.effects, "dropped": plan.dropped, "iterations": iterations, "tokens": tokens, "cost_usd": cost,
                    "build_dir": str(record.folder), "standalone": request.standalone}  # fmt: skip
        if passed is None:
            report = BuildReport(ok=False, failures=tuple(failures), seconds=time.perf_counter() - began,
                                 stages=tuple(self._stages), **base)  # type: ignore[arg-type]  # fmt: skip
            record.write("build.json", {**report.to_json(), "sequence": record.sequence - 1, "finished_at": time.time()})
            raise BuildFailed(
                f"no iteration of {plan.name!r} passed its checks and tests in {iterations}; the last: {failures[-1][:800]}",
                hint=f"every failure is in {record.folder}/build.json; describe the tool more precisely, or allow more iterations",
            )
        submission, description, schema, results, seen = passed
        started = time.perf_counter()
        files = await self._artifact_files(plan, submission, description, schema, caps_bytes, runner, request.standalone)
        self._stage("build", started, "standalone component" if request.standalone else "shared runner (no compile)")
        started = time.perf_counter()
        installed = await anyio.to_thread.run_sync(self._register, plan, version, files, description)
        registered = time.perf_counter()
        self._stage("register", started, f"{installed.key}@{installed.version} signed by {installed.signer or 'nobody'}")
        report = BuildReport(
            ok=True, version=installed.version, key=installed.key, fingerprint=installed.fingerprint, signer=installed.signer,
            tests_passed=sum(1 for r in results if r.ok), tests_total=len(results), seconds=registered - began,
            plan_to_registered_s=registered - plan_done, stages=tuple(self._stages), failures=tuple(failures),
            requests=tuple(seen.get("requests", ())), **{**base, "description": description or plan.description},  # type: ignore[arg-type]
        )  # fmt: skip
        record.write("build.json", {**report.to_json(), "sequence": record.sequence, "finished_at": time.time()})
        return report

    # ------------------------------------------------------------------------------ stages

    async def _iteration(self, call: ToolCall | None, plan: Plan, bench: TestBench, caps_bytes: bytes, record: BuildRecord,
                         iteration: int) -> Any:  # fmt: skip
        """The passing (submission, description, schema, results, seen), or the failure text."""
        folder = f"iterations/{iteration}"
        if call is None:
            return "the model did not call submit_code"
        if call.arguments is None:
            record.write(f"{folder}/raw_arguments.txt", call.raw_arguments[:65536])
            return "submit_code's arguments are not valid JSON; send a JSON object with source, tests and fixtures"
        started = time.perf_counter()
        try:
            submission = parse_submission(call.arguments)
            record.write(f"{folder}/source.py", submission.source)
            record.write(f"{folder}/tests.json", submission.to_json())
            check_source(submission.source)
        except CodeInvalid as exc:
            self._stage("check", started, "failed")
            record.write(f"{folder}/result.json", {"ok": False, "stage": "check", "problem": str(exc)})
            return str(exc)
        try:
            description, schema = await bench.describe(submission.source)
            schema_error = schema_problem(schema)
            if schema_error:
                raise CodeInvalid(schema_error)
        except Exception as exc:  # noqa: BLE001 - the runner's message or the schema's problem: for the model
            self._stage("check", started, "failed in the runner")
            problem = f"the module does not load in the runner: {getattr(exc, 'message', exc)}"
            record.write(f"{folder}/result.json", {"ok": False, "stage": "check", "problem": problem})
            return problem
        problems = description_problems(description, schema, what="the code's")
        if problems:
            self._stage("check", started, "failed: the description speaks to the agent")
            problem = ("the description and the parameters' descriptions go to every run that may call the tool, so they may "
                       "only describe it: " + "; ".join(problems[:5]) + ". Rewrite them without instructions to the agent")  # fmt: skip
            record.write(f"{folder}/result.json", {"ok": False, "stage": "check", "problem": problem})
            return problem
        self._stage("check", started, "parses, imports, exports execute/schema/description")
        started = time.perf_counter()
        results, seen = await bench.run(plan.name, submission, caps_bytes, input_schema=schema,
                                        secret_names=[s.name for s in plan.secrets], generated=self.generated_cases,
                                        output_schema=output_schema_of(plan.output))  # fmt: skip
        failed = [r for r in results if not r.ok]
        self._stage("test", started, f"{len(results) - len(failed)}/{len(results)} passed")
        record.write(f"{folder}/result.json", {"ok": not failed, "stage": "test", "results": [r.to_json() for r in results],
                                               "requests": seen.get("requests", [])})  # fmt: skip
        if failed:
            return f"{len(failed)} of {len(results)} test(s) failed:\n" + "\n".join(r.feedback() for r in failed[:5])
        record.write("source.py", submission.source)
        record.write("tests.json", submission.to_json())
        return submission, description, schema, results, seen

    async def _artifact_files(self, plan: Plan, submission: Submission, description: str, schema: Mapping[str, Any],
                              caps_bytes: bytes, runner: Path, standalone: bool) -> dict[str, bytes]:  # fmt: skip
        name = plan.name
        if standalone:
            wasm = await anyio.to_thread.run_sync(self._standalone, name, submission.source)
            return {f"{name}.wasm": wasm, f"{name}.capabilities.json": caps_bytes}
        manifest = {"runner": RUNNER_PROTOCOL, "source_sha256": source_sha256(submission.source),
                    "description": description or plan.description, "input_schema": dict(schema)}  # fmt: skip
        runner_bytes = await anyio.to_thread.run_sync(runner.read_bytes)
        return {
            f"{name}.wasm": runner_bytes,
            f"{name}.py": submission.source.encode("utf-8"),
            f"{name}{BUILT_SUFFIX}": (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
            f"{name}.capabilities.json": caps_bytes,
        }

    def _standalone(self, name: str, source: str) -> bytes:
        import tempfile

        from pincer.runtimes.wasm import build_component

        with tempfile.TemporaryDirectory(prefix="pincer-build-") as tmp:
            module = Path(tmp) / "tool.py"
            module.write_text(source, encoding="utf-8")
            return build_component(module, Path(tmp) / f"{name}.wasm").read_bytes()

    def _register(self, plan: Plan, version: str, files: dict[str, bytes], description: str) -> Any:
        from pincer.builder.register import register_tool

        return register_tool(self.home, name=plan.name, version=version, files=files, description=description or plan.description,
                             secrets=self.secrets, key_secret=self.key_secret, audit=self.audit)  # fmt: skip

    def _known(self, plan: Plan) -> list[str]:
        values = []
        for secret in plan.secrets:
            try:
                value = self.secrets.get(secret.name)
            except PincerError:
                continue
            if value:
                values.append(str(value))
        return values

    def _cost(self, usage: TokenUsage) -> float | None:
        from pincer.llm.prices import cost_of

        return cost_of(usage, self.price)

    def _brief(self, request: BuildRequest) -> str:
        lines = [f"Build this tool: {request.description}"]
        if request.name:
            lines.append(f"Its name: {request.name}")
        lines.append(f"Hosts the user allows: {', '.join(request.hosts) or 'none (the tool makes no HTTP requests)'}")
        lines.append(f"Secrets the user allows: {', '.join(request.secrets) or 'none'}")
        if request.edit:
            previous = read_build(self.home, request.edit) or {}
            folder = Path(previous.get("build_dir") or self.home / "builds" / request.edit)
            try:
                plan = (folder / "plan.json").read_text(encoding="utf-8")
                source = (folder / "source.py").read_text(encoding="utf-8")
                tests = (folder / "tests.json").read_text(encoding="utf-8")
            except OSError:
                raise PincerError(f"the build of {request.edit!r} has no passing source recorded",
                                  hint=f"see {folder}/build.json; build the tool anew instead of editing it") from None  # fmt: skip
            lines.append(f"This changes the existing tool {request.edit!r}. Its plan:\n{plan}\nIts source:\n{source}\nIts tests:\n{tests}")
        return "\n".join(lines)
