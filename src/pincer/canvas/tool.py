"""The canvas tools: ``canvas`` (present, hide, navigate, push, eval, snapshot, wait),
``a2ui_push``, ``a2ui_reset``, and ``canvas_event`` (callable only by an MCP Apps view).

Each call draws on the canvas of the call's session. Effects are the action's own:
``navigate`` is ``network`` (the URL passes the egress rule of the grant's hosts, like the
``http`` tool's), ``eval`` is ``execute_code`` (asks unless a grant allows it), the others
have none. Pushed content is scanned for secrets before any page can show it.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Literal

from pincer.canvas.board import CanvasBoard, Reporter
from pincer.canvas.drawing import Author
from pincer.canvas.frame import CANVAS_EVENT_TOOL
from pincer.core.effects import EffectKind
from pincer.core.errors import EgressDenied, ToolError, UsageError
from pincer.core.values import CallEffects, HostContext, ToolOutput
from pincer.runtimes.native.decorator import NativeTool, tool
from pincer.runtimes.native.runtime import NativeRuntime

__all__ = ["canvas_tools", "canvas_runtime", "CANVAS_RESOURCE", "MAX_WAIT_S", "EVAL_RESULT_WAIT_S", "RUNTIME_NAME"]

logger = logging.getLogger(__name__)

RUNTIME_NAME = "canvas"
CANVAS_RESOURCE = "ui://pincer/canvas/{session}"
MAX_WAIT_S = 600.0  # the longest a `canvas wait` call waits for a person
EVAL_RESULT_WAIT_S = 10.0  # how long `canvas eval` waits for an open page to report the result
_NONE: frozenset[EffectKind] = frozenset()
CANVAS_EFFECTS = CallEffects(
    arg="action",
    table={
        "present": _NONE,
        "hide": _NONE,
        "push": _NONE,
        "snapshot": _NONE,
        "wait": _NONE,
        "navigate": frozenset({EffectKind.NETWORK}),
        "eval": frozenset({EffectKind.EXECUTE_CODE}),
    },
)
Action = Literal["present", "hide", "navigate", "push", "eval", "snapshot", "wait"]
_UI_META = {"resourceUri": CANVAS_RESOURCE, "visibility": ["model", "app"]}
_APP_ONLY_META = {"resourceUri": CANVAS_RESOURCE, "visibility": ["app"]}


async def _checked_url(url: str, host: HostContext) -> str:
    """The URL if the egress rule lets this call reach it (the grant's hosts; no private or
    metadata address unless ``[network] allow_private``); EgressDenied otherwise."""
    from pincer.safety import egress

    if not host.network_hosts:
        raise EgressDenied(
            f"canvas navigate: no host is allowed for tool {host.tool!r} in this call (rule: default deny)",
            hint='add the host to a grant in config.toml, e.g. [[grants]] tool = "canvas" hosts = ["example.com"]',
        )
    try:
        policy = egress.EgressPolicy.from_hosts(
            host.network_hosts,
            allow_private_network=host.allow_private_network,
            allow_plain_http_loopback=host.allow_private_network,
        )
    except UsageError as exc:
        raise EgressDenied(f"canvas navigate: the grant's host list is unusable: {exc.message}", hint=exc.hint) from None
    target = policy.check("GET", url)
    try:
        await egress.resolve_checked(target, policy)
    except ToolError as exc:
        raise ToolError(f"canvas navigate: {exc.message}", hint=exc.hint) from None
    return str(target.url)


def _author(board: CanvasBoard, host: HostContext) -> Author:
    """Who draws in this call: its run (or none), its session, and what the run had read."""
    return board.author(host.session, host.run_id, host.taint)


def canvas_tools(board: CanvasBoard) -> list[NativeTool]:
    """The canvas tools over ``board``."""

    @tool(name="canvas", effects=(EffectKind.NETWORK, EffectKind.EXECUTE_CODE), call_effects=CANVAS_EFFECTS,
          side_effecting=False, annotations={"pincer/ui": _UI_META})  # fmt: skip
    async def canvas(
        action: Action,
        host: HostContext,
        html: str | None = None,
        url: str | None = None,
        script: str | None = None,
        timeout_s: float = 120.0,
        width: int = 1024,
        height: int = 768,
    ) -> Any:
        """Draw on the canvas a person sees at /ui/canvas/SESSION (also an MCP App), and hear
        what they do there. Pushed HTML runs sandboxed, without network; a script in it sends
        an event with pincer.send(name, data).

        Args:
            action: present shows the canvas; hide hides it; navigate shows a URL; push shows
                HTML (replacing what was pushed before); eval runs JavaScript in the canvas (the
                script is the body of an async function; its return value comes back); snapshot
                returns a PNG of the canvas; wait waits for a person's next action on what this
                run drew.
            html: For push: the HTML to show.
            url: For navigate: the https URL to show (a host the grant allows).
            script: For eval: the JavaScript to run.
            timeout_s: For wait: how many seconds to wait for a person (at most 600).
            width: For snapshot: the viewport width in pixels (200-4096).
            height: For snapshot: the viewport height in pixels (200-4096).
        """
        session, run = host.session, host.run_id
        if action == "present":
            return board.present(session).state()
        if action == "hide":
            return board.hide(session).state()
        if action == "push":
            if html is None:
                raise UsageError("canvas push needs html", hint='call canvas with {"action": "push", "html": "<p>...</p>"}')
            return (await board.push_html(session, html, _author(board, host))).state()
        if action == "navigate":
            if not url:
                raise UsageError("canvas navigate needs a url", hint='call canvas with {"action": "navigate", "url": "https://..."}')
            return board.navigate(session, await _checked_url(url, host)).state()
        if action == "eval":
            if not script:
                raise UsageError("canvas eval needs a script", hint='call canvas with {"action": "eval", "script": "return document.title"}')
            eval_id = await board.add_eval(session, script, _author(board, host))
            result = await board.wait_event(session, EVAL_RESULT_WAIT_S, match=lambda e: e.kind == "eval_result" and e.data.get("id") == eval_id)
            if result is None:
                return {"id": eval_id, "ran": False, "note": f"no open canvas page reported a result within {EVAL_RESULT_WAIT_S:g}s; the script stays in the canvas and runs when a page shows it"}
            return {"id": eval_id, "ran": True, **{k: v for k, v in result.data.items() if k != "id"}}
        if action == "snapshot":
            return await _snapshot(board, session, width, height)
        wait = min(max(timeout_s, 0.0), MAX_WAIT_S)
        # Only what comes from a part this run (or this run-less caller) drew is its to hear.
        event = await board.wait_event(session, wait, match=lambda e: e.run == run and e.kind != "eval_result")
        if event is None:
            return {"event": None, "note": f"nobody acted on the canvas within {wait:g}s"}
        return event.to_dict()

    @tool(name="a2ui_push", side_effecting=False, trusted_output=True, annotations={"pincer/ui": _UI_META})
    async def a2ui_push(messages: list[Any], host: HostContext) -> dict[str, Any]:
        """Show or update A2UI surfaces on the canvas. Each message is A2UI v0.8
        (beginRendering, surfaceUpdate, dataModelUpdate, deleteSurface) or v0.9 ("version":
        "v0.9" with createSurface, updateComponents, updateDataModel, deleteSurface), checked
        against its version's schema; a bad one is refused naming the message, field and rule.
        A person's button presses come back as events (canvas wait, or the next turn).

        Args:
            messages: The A2UI messages, in order.
        """
        parsed = await board.check_a2ui(host.session, messages)
        canvas = await board.push_a2ui(host.session, parsed, _author(board, host))
        return {**canvas.state(), "applied": [{"version": m.version, "action": m.action, "surfaceId": m.surface_id} for m in parsed]}

    @tool(name="a2ui_reset", side_effecting=False, trusted_output=True, annotations={"pincer/ui": _UI_META})
    async def a2ui_reset(host: HostContext) -> dict[str, Any]:
        """Remove every A2UI surface from the canvas (pushed HTML stays)."""
        return board.reset_a2ui(host.session).state()

    @tool(name=CANVAS_EVENT_TOOL, side_effecting=False, annotations={"pincer/ui": _APP_ONLY_META})
    async def canvas_event(session: str, name: str, frame: Literal["html", "a2ui"], render: str, host: HostContext, data: Any = None) -> dict[str, Any]:
        """For the canvas MCP App only: report a person's action on the canvas view (a button
        press, a form submit) to the run that drew the part it came from. The event is marked
        untrusted (pincer cannot check the host), and carries the taint of that part's authors.

        Args:
            session: The canvas's session (the view's own).
            name: The event's name (for A2UI: a2ui_action).
            frame: Where it came from: html (the agent's HTML) or a2ui (pincer's A2UI surfaces).
            render: The id of the rendering it came from (the view names it).
            data: The event's data.
        """
        if session != host.session:
            raise UsageError(
                f"canvas_event: session {session[:60]!r} is not this connection's session",
                hint="an MCP App reports events only for its own session's canvas",
            )
        relay = Reporter(label=f"an MCP App host (session {session})", may_trust=False)
        event = board.act(session, frame=frame, render_id=render, name=name, data=data, reporter=relay)
        return {"recorded": True, "event": event.kind, "name": event.name}

    return [canvas, a2ui_push, a2ui_reset, canvas_event]


async def _snapshot(board: CanvasBoard, session: str, width: int, height: int) -> ToolOutput:
    if board.base_url is None:
        raise ToolError("canvas snapshot: the gateway is not serving yet", hint="snapshots need `pincer serve`")
    if not (200 <= width <= 4096 and 200 <= height <= 4096):
        raise UsageError(f"canvas snapshot: {width}x{height} is outside 200-4096 pixels", hint="pass width and height between 200 and 4096")
    from pincer.canvas.snapshot import snapshot_png

    url = f"{board.base_url}/ui/canvas-frame/{session}/{board.frame_token(session, 'view')}/view"
    png = await snapshot_png(url, width=width, height=height)
    encoded = base64.b64encode(png).decode()
    return ToolOutput(
        value={"session": session, "width": width, "height": height, "bytes": len(png), "mime_type": "image/png"},
        content=(
            {"type": "image", "data": encoded, "mimeType": "image/png"},
            {"type": "text", "text": f"a {width}x{height} PNG of canvas {session!r} ({len(png)} bytes)"},
        ),
    )


def canvas_runtime(board: CanvasBoard) -> NativeRuntime:
    """The canvas tools as a runtime named ``canvas``."""
    return NativeRuntime(canvas_tools(board), name=RUNTIME_NAME)
