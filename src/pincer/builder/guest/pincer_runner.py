"""pincer_runner: the one shared component every runner-built tool runs in (inside WASM only).

It exports world ``sandboxed-tool`` like any tool. Per call the host hands it the tool's source
as data, in the request's ``context`` field::

    {"pincer_runner": {"source": "...", "sha256": "<hex of the source's UTF-8>", "op": "execute"}}

(``op`` ``describe`` returns ``{"description", "schema"}`` instead of running the tool). The
runner checks the hash, ``exec``s the source in a fresh module namespace (``pincer_guest`` is
importable, as in a standalone build), and calls its ``@tool`` function with the params. Every
call is a fresh instance, so nothing one call's source defines survives into the next.

A failure comes back as the response's error; its traceback goes to the log (``log``), which
the builder hands back to the model.
"""

import hashlib
import json
import sys
import traceback
import types
from typing import Any

import pincer_guest
from pincer_guest import Tool as _Unused  # noqa: F401  (keeps the helper's export bound)
from pincer_guest import ToolFailed, log
from wit_world.exports import tool as _tool_types

RUNNER_PROTOCOL = 1
_TRACEBACK_CHARS = 3000


def _traceback(exc: BaseException, source: str) -> str:
    """The traceback without linecache: WASI is stubbed, so reading a file (as the standard
    formatter does for each frame's line) would trap. Lines of tool.py come from the source."""
    lines = source.splitlines()
    out = ["Traceback (most recent call last):"]
    frames = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=False)
    for frame in frames:
        out.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.filename == "tool.py" and frame.lineno and 0 < frame.lineno <= len(lines):
            out.append("    " + lines[frame.lineno - 1].strip())
    out.append(f"{type(exc).__name__}: {exc}")
    return "\n".join(out)[-_TRACEBACK_CHARS:]


def _response(output: str | None = None, error: str | None = None) -> Any:
    return _tool_types.Response(output=output, error=error)


def _load(source: str) -> tuple[dict[str, Any] | None, str | None]:
    """Exec ``source`` as module ``tool``; returns the registered tool or an error string."""
    pincer_guest._TOOL.clear()
    module = types.ModuleType("tool")
    module.__file__ = "tool.py"
    sys.modules["tool"] = module
    try:
        code = compile(source, "tool.py", "exec")
        exec(code, module.__dict__)  # inside the WASM sandbox only: this module never runs on the host
    except BaseException as exc:  # noqa: BLE001 - a broken source is the tool's error, not a trap
        log("error", _traceback(exc, source))
        return None, f"loading the tool failed: {type(exc).__name__}: {exc}"
    if "fn" not in pincer_guest._TOOL:
        return None, "the source defines no @tool function (decorate one function with @tool from pincer_guest)"
    return dict(pincer_guest._TOOL), None


class Tool:
    def execute(self, req: Any) -> Any:
        try:
            context = json.loads(req.context) if req.context else None
        except ValueError:
            context = None
        job = context.get("pincer_runner") if isinstance(context, dict) else None
        if not isinstance(job, dict) or not isinstance(job.get("source"), str):
            return _response(error="pincer runner: no tool source in the request context (the host passes it)")
        source = job["source"]
        if hashlib.sha256(source.encode("utf-8")).hexdigest() != job.get("sha256"):
            return _response(error="pincer runner: the source does not match its sha256; refusing to run it")
        found, error = _load(source)
        if found is None:
            return _response(error=error)
        if job.get("op") == "describe":
            try:
                schema = json.loads(found["schema"])
            except ValueError:
                schema = None
            return _response(output=json.dumps({"description": found["description"], "schema": schema}))
        try:
            params = json.loads(req.params) if req.params else {}
            result = found["fn"](params)
            return _response(output=json.dumps(result))
        except ToolFailed as exc:
            return _response(error=str(exc))
        except BaseException as exc:  # noqa: BLE001 - the tool's own bug: its error, with a traceback in the log
            log("error", _traceback(exc, source))
            return _response(error=f"{type(exc).__name__}: {exc}")

    def schema(self) -> str:
        return json.dumps({"type": "object"})

    def description(self) -> str:
        return f"pincer's shared runner component (protocol {RUNNER_PROTOCOL}); runs built tools' sources"
