"""The canvases of one gateway: per session, what the agent drew (an HTML document, A2UI surfaces,
a URL), who drew each part, and what people did on it (events), in memory.

The agent draws through the ``canvas``/``a2ui_push``/``a2ui_reset`` tools (``canvas/tool.py``);
pages (``gateway/canvas_pages.py``) follow a canvas and post people's actions back, each naming
the rendering it came from (``canvas/drawing.py``). The board judges every action by the part it
came from: it goes to the run that drew that part (as an event of the run,
``GET /api/v1/runs/{id}/events``, and, unless a ``canvas wait`` call takes it, as input of the
run's next turn), trusted or not by the rules of ``canvas/drawing.py``: agent HTML speaks for
its authors, a click on a control pincer rendered for a signed-in main person.

Bounds: ``MAX_CANVAS_BYTES`` of content per canvas, ``MAX_PUSHES_PER_MINUTE`` pushes and
``MAX_EVENTS_PER_MINUTE`` events per canvas, ``MAX_EVENT_BYTES`` per event, ``MAX_KEPT_RENDERS``
renderings an event may still name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from pincer.canvas.a2ui import V09, A2uiMessage, check_client_message, parse_messages
from pincer.canvas.catalogs import CatalogSet, default_catalogs
from pincer.canvas.drawing import A2uiRender, Author, Drawing, HtmlRender, Surface, Verdict
from pincer.core.errors import A2uiInvalid, BudgetExceeded, CanvasChanged, Denied, PayloadTooLarge, UsageError
from pincer.core.ids import random_id
from pincer.core.offload import off_loop
from pincer.core.values import Taint

__all__ = [
    "CanvasBoard",
    "Canvas",
    "CanvasEvent",
    "Reporter",
    "EventSink",
    "FRAME_KINDS",
    "MAX_CANVAS_BYTES",
    "MAX_PUSHES_PER_MINUTE",
    "MAX_EVENTS_PER_MINUTE",
    "MAX_EVENT_BYTES",
    "MAX_SURFACES",
    "MAX_KEPT_EVENTS",
    "MAX_KEPT_RENDERS",
]

logger = logging.getLogger(__name__)

MAX_CANVAS_BYTES = 1_000_000  # HTML plus A2UI messages of one canvas
MAX_PUSHES_PER_MINUTE = 120
MAX_EVENTS_PER_MINUTE = 240
MAX_EVENT_BYTES = 16_384
MAX_SURFACES = 32
MAX_KEPT_EVENTS = 200
MAX_EVALS = 16  # scripts kept in one canvas document
MAX_KEPT_RENDERS = 8  # renderings a page may still show and name in an event
FRAME_KINDS = ("html", "a2ui", "view")  # each frame kind has its own token: one never opens another
_RATE_WINDOW_S = 60.0
_SESSION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")


@dataclass(frozen=True, kw_only=True, slots=True)
class CanvasEvent:
    """One thing that happened on a canvas: ``kind`` is ``a2ui_action``, ``html_event``,
    ``csp_violation`` or ``eval_result``; ``run`` the run it is delivered to (the one that drew
    the part it came from); ``trusted`` by the rules of ``canvas/drawing.py``; ``source`` says
    in whose words, for a person, the model and the run's taint."""

    session: str
    kind: str
    name: str
    data: Mapping[str, Any]
    trusted: bool
    source: str
    run: str | None = None
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "canvas": self.session, "event": self.kind, "name": self.name, "data": dict(self.data),
            "trusted": self.trusted, "source": self.source, "run": self.run, "at": round(self.at, 3),
        }  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Reporter:
    """Who relays an action: ``label`` for people and the model; ``person_main`` when a gesture
    it relays is a signed-in main person's (the canvas page of a main sign-in); ``may_trust``
    False for a relay pincer cannot check (an MCP Apps host): nothing it relays is trusted."""

    label: str
    person_main: bool = False
    may_trust: bool = True


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
        self.visible = False
        self.url: str | None = None
        self.html: HtmlRender | None = None
        self.a2ui: A2uiRender | None = None
        self.renders: OrderedDict[str, HtmlRender | A2uiRender] = OrderedDict()  # newest last
        self.events: deque[CanvasEvent] = deque(maxlen=MAX_KEPT_EVENTS)
        self.event_count = 0
        self.changed = anyio.Event()
        self.pushes = _Rate(MAX_PUSHES_PER_MINUTE)
        # A person's clicks and what agent-authored documents send are counted apart: a script
        # sending on a timer cannot use up the person's budget.
        self.event_rates = {"person": _Rate(MAX_EVENTS_PER_MINUTE), "agent": _Rate(MAX_EVENTS_PER_MINUTE)}
        self.waiters: list[Callable[[CanvasEvent], bool]] = []

    @property
    def surfaces(self) -> Mapping[str, Surface]:
        return self.a2ui.surfaces if self.a2ui is not None else {}

    def size(self) -> int:
        html = len(self.html.html.encode()) if self.html and self.html.html else 0
        surfaces = sum(len(json.dumps(m)) for surface in self.surfaces.values() for m in surface.messages)
        evals = sum(len(script) for _, script, _ in self.html.evals) if self.html else 0
        return html + surfaces + evals

    def bump(self) -> None:
        self.revision += 1
        changed, self.changed = self.changed, anyio.Event()
        changed.set()

    def show(self, render: HtmlRender | A2uiRender | None) -> None:
        """Make ``render`` current (None: that part is empty) and keep it nameable for a while."""
        if render is not None:
            self.renders[render.id] = render
            while len(self.renders) > MAX_KEPT_RENDERS:
                self.renders.popitem(last=False)
        self.bump()

    def state(self) -> dict[str, Any]:
        """What a tool answers: no rendering ids (an agent never learns them, so no script it
        writes can name another rendering)."""
        return {
            "session": self.session, "revision": self.revision, "visible": self.visible, "url": self.url,
            "has_html": self.html is not None, "surfaces": sorted(self.surfaces),
            "waiting": bool(self.waiters),  # a `canvas wait` call waits for a person's action
            "events": self.event_count,
        }  # fmt: skip

    def page_state(self) -> dict[str, Any]:
        """What the signed-in page follows: the state and the renderings to load."""
        return {
            **self.state(),
            "html_render": self.html.id if self.html is not None else None,
            "a2ui_render": self.a2ui.id if self.a2ui is not None and self.a2ui.surfaces else None,
        }


class CanvasBoard:
    """Every canvas of this gateway. ``scan`` is the leak scanner (pushed content holding a
    secret is refused); ``sink`` delivers people's actions to runs; ``is_main`` says whether a
    session is a main session (its untainted runs' words are the operator's); ``catalogs`` gives
    the A2UI catalogs surfaces may name (the built-in ones by default)."""

    def __init__(
        self,
        *,
        scan: Scanner,
        sink: EventSink | None = None,
        is_main: Callable[[str], bool] = lambda _: False,
        catalogs: Callable[[], Awaitable[CatalogSet]] | None = None,
    ) -> None:
        self._scan = scan
        self.sink = sink
        self.is_main = is_main
        self._catalogs = catalogs
        self._canvases: dict[str, Canvas] = {}
        self._key = secrets.token_bytes(32)
        self.base_url: str | None = None  # the gateway's own URL, once it serves

    # -- the frames' capabilities ---------------------------------------------------------------

    def frame_token(self, session: str, kind: str) -> str:
        """The token in a canvas frame's URL (``kind``: html, a2ui or view): a sandboxed document
        sends neither cookie nor bearer token. One per kind, so agent HTML, which can read its
        own URL, holds no token that opens pincer's A2UI document or the snapshot view."""
        if kind not in FRAME_KINDS:
            raise ValueError(kind)
        return hmac.new(self._key, f"canvas-frame\0{kind}\0{session}".encode(), hashlib.sha256).hexdigest()[:40]

    def is_frame_token(self, session: str, kind: str, token: str) -> bool:
        return hmac.compare_digest(self.frame_token(session, kind), token)

    # -- reading ----------------------------------------------------------------------------------

    def get(self, session: str) -> Canvas:
        check_session_name(session)
        found = self._canvases.get(session)
        if found is None:
            found = self._canvases[session] = Canvas(session)
        return found

    def render(self, session: str, render_id: str) -> HtmlRender | A2uiRender | None:
        """A rendering the canvas still keeps (None: never was, or too old)."""
        return self.get(session).renders.get(render_id)

    async def wait_change(self, session: str, after: int, timeout_s: float) -> Canvas:
        """The canvas once its revision is past ``after``, or as it is after ``timeout_s``."""
        canvas = self.get(session)
        with anyio.move_on_after(timeout_s):
            while canvas.revision <= after:
                await canvas.changed.wait()
        return canvas

    # -- the agent draws --------------------------------------------------------------------------

    def author(self, session: str, run_id: str | None, taint: Taint | None) -> Author:
        """Who draws: a run (or a call outside any run) of ``session``, with what it had read."""
        return Author(session=session, run_id=run_id, main=self.is_main(session), taint=taint)

    def _draw(self, session: str) -> Canvas:
        canvas = self.get(session)
        wait = canvas.pushes.take()
        if wait is not None:
            raise BudgetExceeded(
                f"canvas {session!r}: more than {MAX_PUSHES_PER_MINUTE} changes in a minute",
                retry_after_s=wait,
                hint="send fewer, larger updates (one push or one a2ui_push batch holds many changes)",
            )
        return canvas

    async def _clean(self, value: Any, what: str) -> None:
        _, found = await off_loop(self._scan, value, over=value)  # a page of HTML: up to MAX_CANVAS_BYTES
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

    def present(self, session: str) -> Canvas:
        canvas = self._draw(session)
        canvas.visible = True
        canvas.bump()
        return canvas

    def hide(self, session: str) -> Canvas:
        canvas = self._draw(session)
        canvas.visible = False
        canvas.bump()
        return canvas

    async def push_html(self, session: str, html: str, author: Author) -> Canvas:
        """Replace the HTML document (its scripts too): ``author`` alone drew the new one."""
        await self._clean(html, "pushed HTML")
        canvas = self._draw(session)
        old = canvas.html
        self._fits(canvas, len(html.encode()) - (len(old.html.encode()) if old and old.html else 0))
        canvas.html = HtmlRender(html=html, evals=(), drawing=Drawing.by(author)) if html else None
        canvas.url = None
        canvas.visible = True
        canvas.show(canvas.html)
        return canvas

    def navigate(self, session: str, url: str) -> Canvas:
        canvas = self._draw(session)
        canvas.url = url
        canvas.visible = True
        canvas.bump()
        return canvas

    async def add_eval(self, session: str, script: str, author: Author) -> str:
        """Add a script to the HTML document: ``author`` drew on it too (and owns it now)."""
        await self._clean(script, "script")
        canvas = self._draw(session)
        self._fits(canvas, len(script))
        eval_id = random_id()
        old = canvas.html
        evals = (*(old.evals[-(MAX_EVALS - 1) :] if old else ()), (eval_id, script, author))
        drawing = old.drawing.drawn_by(author) if old else Drawing.by(author)
        canvas.html = HtmlRender(html=old.html if old else None, evals=evals, drawing=drawing)
        canvas.show(canvas.html)
        return eval_id

    async def check_a2ui(self, session: str, messages: Any) -> list[A2uiMessage]:
        """``messages`` checked against their version's schema and the catalog each surface
        names, with the surfaces already on ``session``'s canvas (A2uiInvalid otherwise)."""
        catalogs = await self._catalogs() if self._catalogs is not None else default_catalogs()
        prior = {sid: surface.messages for sid, surface in self.get(session).surfaces.items()}
        return await off_loop(_parsed, messages, catalogs, prior, over=messages)

    async def push_a2ui(self, session: str, messages: list[A2uiMessage], author: Author) -> Canvas:
        """Apply a checked batch. A v0.9 update for a surface no ``createSurface`` made is
        refused (the spec requires one first); ``deleteSurface`` drops a surface. Each surface
        the batch touches records ``author`` (its owner now)."""
        bodies = [m.body for m in messages]
        await self._clean(bodies, "A2UI batch")
        canvas = self._draw(session)
        self._fits(canvas, sum(len(json.dumps(b)) for b in bodies))
        surfaces = dict(canvas.surfaces)
        for message in messages:
            sid = message.surface_id
            if message.action == "deleteSurface":
                surfaces.pop(sid, None)
                continue
            known = surfaces.get(sid)
            if message.version == V09 and message.action != "createSurface" and known is None:
                raise A2uiInvalid(
                    f"A2UI message {message.index} ({message.action}): field /{message.action}/surfaceId: "
                    f"no surface {sid[:60]!r} exists (rule: createSurface first)",
                    hint="send createSurface for the surface before its updates",
                )
            if known is not None and known.version != message.version:
                raise A2uiInvalid(
                    f"A2UI message {message.index} ({message.action}): field /{message.action}/surfaceId: surface "
                    f"{sid[:60]!r} speaks {known.version}, this message {message.version} (rule: one version per surface)",
                    hint="delete the surface first, or keep to its version",
                )
            if known is None or message.action == "createSurface":
                surfaces[sid] = Surface(messages=(message.body,), drawing=Drawing.by(author))
            else:
                surfaces[sid] = Surface(messages=(*known.messages, message.body), drawing=known.drawing.drawn_by(author))
            if len(surfaces) > MAX_SURFACES:
                raise PayloadTooLarge(f"canvas {session!r}: more than {MAX_SURFACES} surfaces", hint="delete surfaces you no longer show")
        canvas.a2ui = A2uiRender(surfaces=surfaces)
        canvas.url = None
        canvas.visible = True
        canvas.show(canvas.a2ui)
        return canvas

    def reset_a2ui(self, session: str) -> Canvas:
        canvas = self._draw(session)
        canvas.a2ui = None
        canvas.show(None)
        return canvas

    # -- people act -------------------------------------------------------------------------------

    def act(self, session: str, *, frame: str, render_id: str, name: str, data: Any, reporter: Reporter) -> CanvasEvent:
        """An action a page (or an MCP Apps host) relays from one of the canvas's frames, judged
        by the rendering it came from; CanvasChanged when that rendering is gone or the action is
        not one it could send."""
        render = self.render(session, render_id)
        body = data if isinstance(data, dict) else {"value": data}
        if frame == "html" and isinstance(render, HtmlRender):
            to = render.eval_author(body.get("id")) if name == "eval_result" else None
            kind = "eval_result" if to is not None else "html_event"
            verdict = render.drawing.html_verdict(part=f"HTML on canvas {session}", to=to)
            label = name
        elif frame == "a2ui" and isinstance(render, A2uiRender):
            surface, label = _control(render, name, body)
            kind = "a2ui_action"
            verdict = surface.drawing.gesture_verdict(
                viewer_main=reporter.person_main, viewer=reporter.label, part=f"A2UI surface {body['surfaceId']!r} of canvas {session}"
            )
        else:
            raise CanvasChanged(
                f"canvas {session!r} keeps no {frame} rendering {render_id[:40]!r} (it changed since the page loaded it)",
                hint="reload the canvas page: it shows the canvas as it is now",
            )
        if not reporter.may_trust:
            source = verdict.source if kind == "a2ui_action" else f"{verdict.source}, relayed by {reporter.label}"
            verdict = Verdict(run_id=verdict.run_id, trusted=False, source=source)
        event = CanvasEvent(session=session, kind=kind, name=label[:128], data=body, trusted=verdict.trusted, source=verdict.source, run=verdict.run_id)
        return self.record(event)

    def report(self, session: str, render_id: str, report: Mapping[str, Any]) -> CanvasEvent:
        """A CSP violation the browser reported for an HTML rendering: untrusted, to its owner."""
        render = self.render(session, render_id)
        run = render.drawing.owner.run_id if isinstance(render, HtmlRender) else None
        name = str(report.get("violated-directive") or report.get("effective-directive") or "csp")
        return self.record(
            CanvasEvent(session=session, kind="csp_violation", name=name, data=report, trusted=False, source="the browser's CSP report", run=run)
        )

    def record(self, event: CanvasEvent) -> CanvasEvent:
        """Keep an action and deliver it to its run: to a ``wait`` call if one takes it, else as
        the run's next input; always as an event of the run."""
        canvas = self.get(event.session)
        whose = "person" if event.kind == "a2ui_action" else "agent"
        wait = canvas.event_rates[whose].take()
        if wait is not None:
            raise BudgetExceeded(
                f"canvas {event.session!r}: more than {MAX_EVENTS_PER_MINUTE} {whose} events in a minute",
                retry_after_s=wait,
                hint="wait a minute; a page should send one event per action",
            )
        body = {"name": event.name, "data": dict(event.data)}
        if len(json.dumps(body, default=str)) > MAX_EVENT_BYTES:
            raise PayloadTooLarge(f"a canvas event is larger than {MAX_EVENT_BYTES} bytes", hint="send less data with the action")
        scanned, _ = self._scan(body)  # a secret typed into a form is redacted before any model sees it
        event = CanvasEvent(
            session=event.session, kind=event.kind, name=str(scanned["name"]), data=scanned["data"],
            trusted=event.trusted, source=event.source, run=event.run, at=event.at,
        )  # fmt: skip
        canvas.events.append(event)
        canvas.event_count += 1
        canvas.bump()
        taken = False
        for waiter in list(canvas.waiters):
            if waiter(event):
                taken = True
                break
        if event.run is not None and self.sink is not None:
            try:
                self.sink(event.run, event, not taken)
            except Exception:  # a run that ended must not turn a person's click into an error page
                logger.exception("delivering a canvas event to run %s failed", event.run)
        return event

    async def wait_event(self, session: str, timeout_s: float, *, match: Callable[[CanvasEvent], bool]) -> CanvasEvent | None:
        """The next event on the canvas ``match`` accepts, or None after ``timeout_s``."""
        canvas = self.get(session)
        got: list[CanvasEvent] = []
        arrived = anyio.Event()

        def waiter(event: CanvasEvent) -> bool:
            if got or not match(event):
                return False
            got.append(event)
            arrived.set()
            return True

        canvas.waiters.append(waiter)
        canvas.bump()  # pages show that the agent waits
        try:
            with anyio.move_on_after(timeout_s):
                await arrived.wait()
        finally:
            canvas.waiters.remove(waiter)
            canvas.bump()
        return got[0] if got else None


def _control(render: A2uiRender, name: str, body: Mapping[str, Any]) -> tuple[Surface, str]:
    """The surface a click came from and its action's name, if the rendering has that control
    with that action; CanvasChanged otherwise (nothing but a rendered control sends a click)."""
    sid = body.get("surfaceId")
    surface = render.surfaces.get(sid) if isinstance(sid, str) else None
    message = body.get("message")
    inner = (message.get("userAction") or message.get("action")) if isinstance(message, Mapping) else None
    inner = inner if isinstance(inner, Mapping) else {}
    action = surface.action_of(inner.get("sourceComponentId")) if surface is not None else None
    if name != "a2ui_action" or surface is None or action is None or body.get("name") != action or inner.get("name") != action:
        raise CanvasChanged(
            f"no control of that rendering sends this action (surface {str(body.get('surfaceId'))[:60]!r}, name {str(body.get('name'))[:60]!r})",
            hint="reload the canvas page; a click counts only on a control pincer rendered",
        )
    check_client_message(message)  # the action in its version's client-to-server shape, as published
    return surface, action


def check_session_name(session: str) -> str:
    """A session name as it may appear in a canvas URL; UsageError otherwise."""
    if not session or len(session) > 128 or not set(session) <= _SESSION_CHARS:
        raise UsageError(
            f"not a canvas session name: {session[:60]!r}",
            hint="a session name is 1-128 letters, digits, '_', '.', ':' or '-'",
        )
    return session


def _parsed(messages: Any, catalogs: CatalogSet, prior: Mapping[str, Any]) -> list[A2uiMessage]:
    return parse_messages(messages, catalogs=catalogs, prior=prior)
