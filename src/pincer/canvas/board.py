"""The canvases of one gateway: per session, what the agent drew (HTML, A2UI surfaces, a URL) and
what people did on it (events), in memory.

The agent draws through the ``canvas``/``a2ui_push``/``a2ui_reset`` tools (``canvas/tool.py``);
pages (``gateway/ui/canvas.py``) follow a canvas's revision and post people's actions back.
Each action is delivered to the run that last drew on that canvas: as an event of the run
(``GET /api/v1/runs/{id}/events``) and, unless a ``canvas wait`` call takes it, as input of the
run's next turn. Who is trusted is decided by whoever records the event: only a signed-in main
session's actions are; CSP reports and MCP Apps hosts never are.

Bounds: ``MAX_CANVAS_BYTES`` of content per canvas, ``MAX_PUSHES_PER_MINUTE`` pushes and
``MAX_EVENTS_PER_MINUTE`` events per canvas, ``MAX_EVENT_BYTES`` per event.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from pincer.canvas.a2ui import V09, A2uiMessage
from pincer.core.errors import A2uiInvalid, BudgetExceeded, Denied, PayloadTooLarge, UsageError

__all__ = [
    "CanvasBoard",
    "Canvas",
    "CanvasEvent",
    "EventSink",
    "MAX_CANVAS_BYTES",
    "MAX_PUSHES_PER_MINUTE",
    "MAX_EVENTS_PER_MINUTE",
    "MAX_EVENT_BYTES",
    "MAX_SURFACES",
    "MAX_KEPT_EVENTS",
]

logger = logging.getLogger(__name__)

MAX_CANVAS_BYTES = 1_000_000  # HTML plus A2UI messages of one canvas
MAX_PUSHES_PER_MINUTE = 120
MAX_EVENTS_PER_MINUTE = 240
MAX_EVENT_BYTES = 16_384
MAX_SURFACES = 32
MAX_KEPT_EVENTS = 200
MAX_EVALS = 16  # scripts kept in one canvas document
_RATE_WINDOW_S = 60.0
_SESSION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")


@dataclass(frozen=True, kw_only=True, slots=True)
class CanvasEvent:
    """One thing that happened on a canvas: ``kind`` is ``a2ui_action``, ``html_event``,
    ``csp_violation`` or ``eval_result``; ``trusted`` only for a signed-in main session's."""

    session: str
    kind: str
    name: str
    data: Mapping[str, Any]
    trusted: bool
    source: str  # who reported it, for a person and the model: "page (session main)", "csp report"
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "canvas": self.session, "event": self.kind, "name": self.name, "data": dict(self.data),
            "trusted": self.trusted, "source": self.source, "at": round(self.at, 3),
        }  # fmt: skip


# (run id, event, whether it is also the run's next input): wired by the gateway to its runs.
EventSink = Callable[[str, CanvasEvent, bool], None]
# Scans a JSON value for secrets: (scanned value, how many were found).
Scanner = Callable[[Any], tuple[Any, int]]


class _Rate:
    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self.times: deque[float] = deque()

    def take(self) -> float | None:
        """None when one more fits in the window, else the seconds until one does."""
        now = time.monotonic()
        while self.times and now - self.times[0] > _RATE_WINDOW_S:
            self.times.popleft()
        if len(self.times) >= self.per_minute:
            return max(0.0, _RATE_WINDOW_S - (now - self.times[0]))
        self.times.append(now)
        return None


class Canvas:
    """One session's canvas. Changed only through :class:`CanvasBoard`."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.revision = 0  # any change, waiting included: what pages follow
        self.content = 0  # changes of what the frame shows: when pages reload it
        self.visible = False
        self.html: str | None = None
        self.url: str | None = None
        self.surfaces: dict[str, list[Mapping[str, Any]]] = {}
        self.evals: list[tuple[str, str]] = []  # (id, script)
        self.owner_run: str | None = None
        self.events: deque[CanvasEvent] = deque(maxlen=MAX_KEPT_EVENTS)
        self.event_count = 0
        self.changed = anyio.Event()
        self.pushes = _Rate(MAX_PUSHES_PER_MINUTE)
        self.event_rate = _Rate(MAX_EVENTS_PER_MINUTE)
        self.waiters: list[Callable[[CanvasEvent], bool]] = []

    def size(self) -> int:
        html = len(self.html.encode()) if self.html else 0
        surfaces = sum(len(json.dumps(m)) for batch in self.surfaces.values() for m in batch)
        evals = sum(len(script) for _, script in self.evals)
        return html + surfaces + evals

    def bump(self, *, content: bool = True) -> None:
        self.revision += 1
        if content:
            self.content += 1
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def state(self) -> dict[str, Any]:
        return {
            "session": self.session, "revision": self.revision, "content": self.content, "visible": self.visible, "url": self.url,
            "has_html": self.html is not None, "surfaces": sorted(self.surfaces), "run": self.owner_run,
            "waiting": bool(self.waiters),  # a `canvas wait` call waits for a person's action
            "events": self.event_count,
        }  # fmt: skip


class CanvasBoard:
    """Every canvas of this gateway. ``scan`` is the leak scanner (pushed content holding a
    secret is refused); ``sink`` delivers people's actions to runs."""

    def __init__(self, *, scan: Scanner, sink: EventSink | None = None) -> None:
        self._scan = scan
        self.sink = sink
        self._canvases: dict[str, Canvas] = {}
        self._key = secrets.token_bytes(32)
        self.base_url: str | None = None  # the gateway's own URL, once it serves

    # -- the frame's capability -----------------------------------------------------------------

    def frame_token(self, session: str) -> str:
        """The token in a canvas frame's URL (and its CSP report URL): the frame and the report
        authenticate with it, since a sandboxed document sends neither cookie nor bearer token."""
        return hmac.new(self._key, f"canvas-frame\0{session}".encode(), hashlib.sha256).hexdigest()[:40]

    def is_frame_token(self, session: str, token: str) -> bool:
        return hmac.compare_digest(self.frame_token(session), token)

    # -- reading ----------------------------------------------------------------------------------

    def get(self, session: str) -> Canvas:
        check_session_name(session)
        found = self._canvases.get(session)
        if found is None:
            found = self._canvases[session] = Canvas(session)
        return found

    async def wait_change(self, session: str, after: int, timeout_s: float) -> Canvas:
        """The canvas once its revision is past ``after``, or as it is after ``timeout_s``."""
        canvas = self.get(session)
        with anyio.move_on_after(timeout_s):
            while canvas.revision <= after:
                await canvas.changed.wait()
        return canvas

    # -- the agent draws --------------------------------------------------------------------------

    def _draw(self, session: str, run_id: str | None) -> Canvas:
        canvas = self.get(session)
        wait = canvas.pushes.take()
        if wait is not None:
            raise BudgetExceeded(
                f"canvas {session!r}: more than {MAX_PUSHES_PER_MINUTE} changes in a minute",
                retry_after_s=wait,
                hint="send fewer, larger updates (one push or one a2ui_push batch holds many changes)",
            )
        if run_id is not None:
            canvas.owner_run = run_id
        return canvas

    def _clean(self, value: Any, what: str) -> None:
        _, found = self._scan(value)
        if found:
            raise Denied(
                f"the {what} holds {found} secret value(s) or credential pattern(s); a canvas never shows one",
                hint="leave secrets out of what a person sees; refer to a secret by its name",
            )

    def _fits(self, canvas: Canvas, extra: int) -> None:
        if canvas.size() + extra > MAX_CANVAS_BYTES:
            raise PayloadTooLarge(
                f"canvas {canvas.session!r} would hold more than {MAX_CANVAS_BYTES} bytes",
                hint="push less, or clear the canvas first (canvas push with empty html, or a2ui_reset)",
            )

    def present(self, session: str, run_id: str | None) -> Canvas:
        canvas = self._draw(session, run_id)
        canvas.visible = True
        canvas.bump(content=False)
        return canvas

    def hide(self, session: str, run_id: str | None) -> Canvas:
        canvas = self._draw(session, run_id)
        canvas.visible = False
        canvas.bump(content=False)
        return canvas

    def push_html(self, session: str, html: str, run_id: str | None) -> Canvas:
        self._clean(html, "pushed HTML")
        canvas = self._draw(session, run_id)
        self._fits(canvas, len(html.encode()) - (len(canvas.html.encode()) if canvas.html else 0))
        canvas.html = html or None
        canvas.url = None
        canvas.evals = []
        canvas.visible = True
        canvas.bump()
        return canvas

    def navigate(self, session: str, url: str, run_id: str | None) -> Canvas:
        canvas = self._draw(session, run_id)
        canvas.url = url
        canvas.visible = True
        canvas.bump()
        return canvas

    def add_eval(self, session: str, script: str, run_id: str | None) -> str:
        self._clean(script, "script")
        canvas = self._draw(session, run_id)
        self._fits(canvas, len(script))
        eval_id = secrets.token_hex(6)
        canvas.evals = [*canvas.evals[-(MAX_EVALS - 1) :], (eval_id, script)]
        canvas.bump()
        return eval_id

    def push_a2ui(self, session: str, messages: list[A2uiMessage], run_id: str | None) -> Canvas:
        """Apply a checked batch. A v0.9 update for a surface no ``createSurface`` made is
        refused (the spec requires one first); ``deleteSurface`` drops a surface."""
        bodies = [m.body for m in messages]
        self._clean(bodies, "A2UI batch")
        canvas = self._draw(session, run_id)
        self._fits(canvas, sum(len(json.dumps(b)) for b in bodies))
        surfaces = {k: list(v) for k, v in canvas.surfaces.items()}
        versions = {k: ("v0.9" if v and "version" in v[0] else "v0.8") for k, v in surfaces.items()}
        for message in messages:
            sid = message.surface_id
            if message.action == "deleteSurface":
                surfaces.pop(sid, None)
                continue
            if message.version == V09 and message.action != "createSurface" and sid not in surfaces:
                raise A2uiInvalid(
                    f"A2UI message {message.index} ({message.action}): field /{message.action}/surfaceId: "
                    f"no surface {sid[:60]!r} exists (rule: createSurface first)",
                    hint="send createSurface for the surface before its updates",
                )
            if sid in versions and versions[sid] != message.version:
                raise A2uiInvalid(
                    f"A2UI message {message.index} ({message.action}): field /{message.action}/surfaceId: surface "
                    f"{sid[:60]!r} speaks {versions[sid]}, this message {message.version} (rule: one version per surface)",
                    hint="delete the surface first, or keep to its version",
                )
            if message.action == "createSurface":
                surfaces[sid] = []
            surfaces.setdefault(sid, []).append(message.body)
            versions[sid] = message.version
            if len(surfaces) > MAX_SURFACES:
                raise PayloadTooLarge(f"canvas {session!r}: more than {MAX_SURFACES} surfaces", hint="delete surfaces you no longer show")
        canvas.surfaces = surfaces
        canvas.url = None
        canvas.visible = True
        canvas.bump()
        return canvas

    def reset_a2ui(self, session: str, run_id: str | None) -> Canvas:
        canvas = self._draw(session, run_id)
        canvas.surfaces = {}
        canvas.bump()
        return canvas

    # -- people act -------------------------------------------------------------------------------

    def record(self, event: CanvasEvent) -> CanvasEvent:
        """Keep a person's action and deliver it to the canvas's run: to a ``wait`` call if one
        waits, else as the run's next input; always as an event of the run."""
        canvas = self.get(event.session)
        wait = canvas.event_rate.take()
        if wait is not None:
            raise BudgetExceeded(
                f"canvas {event.session!r}: more than {MAX_EVENTS_PER_MINUTE} events in a minute",
                retry_after_s=wait,
                hint="wait a minute; a page should send one event per action",
            )
        body = {"name": event.name, "data": dict(event.data)}
        if len(json.dumps(body, default=str)) > MAX_EVENT_BYTES:
            raise PayloadTooLarge(f"a canvas event is larger than {MAX_EVENT_BYTES} bytes", hint="send less data with the action")
        scanned, _ = self._scan(body)  # a secret typed into a form is redacted before any model sees it
        event = CanvasEvent(
            session=event.session, kind=event.kind, name=str(scanned["name"]), data=scanned["data"],
            trusted=event.trusted, source=event.source, at=event.at,
        )  # fmt: skip
        canvas.events.append(event)
        canvas.event_count += 1
        canvas.bump(content=False)
        taken = False
        for waiter in list(canvas.waiters):
            if waiter(event):
                taken = True
                break
        if canvas.owner_run is not None and self.sink is not None:
            try:
                self.sink(canvas.owner_run, event, not taken)
            except Exception:  # a run that ended must not turn a person's click into an error page
                logger.exception("delivering a canvas event to run %s failed", canvas.owner_run)
        return event

    async def wait_event(
        self, session: str, timeout_s: float, *, match: Callable[[CanvasEvent], bool] | None = None
    ) -> CanvasEvent | None:
        """The next event on the canvas (one ``match`` accepts, when given), or None after ``timeout_s``."""
        canvas = self.get(session)
        got: list[CanvasEvent] = []
        arrived = anyio.Event()

        def waiter(event: CanvasEvent) -> bool:
            if got or (match is not None and not match(event)):
                return False
            got.append(event)
            arrived.set()
            return True

        canvas.waiters.append(waiter)
        canvas.bump(content=False)  # pages show that the agent waits
        try:
            with anyio.move_on_after(timeout_s):
                await arrived.wait()
        finally:
            canvas.waiters.remove(waiter)
            canvas.bump(content=False)
        return got[0] if got else None


def check_session_name(session: str) -> str:
    """A session name as it may appear in a canvas URL; UsageError otherwise."""
    if not session or len(session) > 128 or not set(session) <= _SESSION_CHARS:
        raise UsageError(
            f"not a canvas session name: {session[:60]!r}",
            hint="a session name is 1-128 letters, digits, '_', '.', ':' or '-'",
        )
    return session
