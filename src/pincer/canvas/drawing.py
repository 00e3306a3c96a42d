"""Who drew what on a canvas, and whose words its events are.

Every part of a canvas remembers its authors: the agent HTML document (pushed HTML plus the
scripts ``canvas eval`` added) and each A2UI surface. An :class:`Author` is a run (or a call
outside any run) of a session, with the taint that run had when it drew. The rules, one place:

- **Agent HTML speaks for its authors, never for the viewer.** Its events are trusted only when
  every author was a main session's and had read nothing untrusted; otherwise they are untrusted
  and say why (the author's taint, or its session), so the run that reads them is tainted by the
  same text that tainted the author.
- **An A2UI gesture is the viewer's** (pincer's renderer drew it, in a document no agent script
  shares), but its words (action name, labels, literals) are the surface's authors': it is
  trusted only for a signed-in main viewer, and only when no *other* run that drew the surface had
  read untrusted text. The receiving run's own words cannot raise its own trust.
- **An event goes to the run that drew the part it came from** (the part's last author): the
  document's for HTML events, the surface's for a click, the eval's caller for its result.

A rendering (:class:`HtmlRender`, :class:`A2uiRender`) is one immutable state of a part, with a
random id. The page loads frames by rendering id and tells the gateway which rendering an event
came from, so an event sent just before a change is still judged by the rendering that sent it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pincer.core.values import Taint

__all__ = ["Author", "Drawing", "HtmlRender", "A2uiRender", "Surface", "Verdict", "MAX_NAMED_AUTHORS", "new_render_id"]

MAX_NAMED_AUTHORS = 8  # tainted authors a drawing names; past it, it is doubted whole


def new_render_id() -> str:
    return secrets.token_urlsafe(12)


@dataclass(frozen=True, kw_only=True, slots=True)
class Author:
    """A run of ``session`` (``run_id`` None: a client's call outside any run), ``main`` when
    that session is a main session, and what the run had read when it drew (``taint``)."""

    session: str
    run_id: str | None
    main: bool
    taint: Taint | None = None

    @property
    def trusted(self) -> bool:
        return self.main and self.taint is None

    def describe(self) -> str:
        who = f"run {self.run_id}" if self.run_id else "a call outside any run"
        if self.taint is not None:
            return f"{who}, which had read {self.taint.describe()}"
        if not self.main:
            return f"{who} of session {self.session} (not the operator's)"
        return who


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """Whom an event is delivered to, whether it is trusted, and in whose words (``source``,
    which the run's taint then names)."""

    run_id: str | None
    trusted: bool
    source: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Drawing:
    """The authors of one part: ``owner`` drew it last (its events go to ``owner.run_id``);
    ``tainted`` are the authors that had read untrusted text when they drew (deduplicated by
    run, at most ``MAX_NAMED_AUTHORS``; ``overflow`` says more were dropped)."""

    owner: Author
    tainted: tuple[Author, ...] = ()
    overflow: bool = False

    @classmethod
    def by(cls, author: Author) -> Drawing:
        return cls(owner=author, tainted=(author,) if author.taint is not None else ())

    def drawn_by(self, author: Author) -> Drawing:
        """This part after ``author`` drew on it too: its owner, and one more author to doubt."""
        tainted, overflow = self.tainted, self.overflow
        if author.taint is not None and all(a.run_id != author.run_id or a.run_id is None for a in tainted):
            if len(tainted) < MAX_NAMED_AUTHORS:
                tainted = (*tainted, author)
            else:
                overflow = True
        return replace(self, owner=author, tainted=tainted, overflow=overflow)

    def html_verdict(self, *, part: str, to: Author | None = None) -> Verdict:
        """An event agent HTML sent (a script, a form in it): the authors' trust, whoever views.
        It goes to ``to`` (an eval's result to the eval's caller), else to the owner."""
        run_id = (to or self.owner).run_id
        doubt = self.tainted[0] if self.tainted else (None if self.owner.main else self.owner)
        if doubt is None and not self.overflow:
            return Verdict(run_id=run_id, trusted=True, source=f"{part} drawn by {self.owner.describe()}")
        why = doubt.describe() if doubt is not None else "more runs than pincer names, some of which had read untrusted text"
        return Verdict(run_id=run_id, trusted=False, source=f"{part}, agent-authored, drawn by {why}")

    def gesture_verdict(self, *, viewer_main: bool, viewer: str, part: str) -> Verdict:
        """A person's gesture on a control pincer rendered: the viewer's, unless another run that
        drew the surface had read untrusted text (its words are in the event)."""
        owner = self.owner.run_id
        others = [a for a in self.tainted if a.run_id is None or a.run_id != owner]
        where = f"a click on {part} by {viewer}"
        if others or self.overflow:
            why = others[0].describe() if others else "more runs than pincer names"
            return Verdict(run_id=owner, trusted=False, source=f"{where}; the surface was drawn also by {why}")
        return Verdict(run_id=owner, trusted=viewer_main, source=where)


@dataclass(frozen=True, kw_only=True, slots=True)
class HtmlRender:
    """One state of the agent HTML document: pushed ``html`` and ``evals`` (id, script, author)."""

    html: str | None
    evals: tuple[tuple[str, str, Author], ...]
    drawing: Drawing
    id: str = field(default_factory=new_render_id)

    def eval_author(self, eval_id: Any) -> Author | None:
        return next((author for known, _, author in self.evals if known == eval_id), None)


@dataclass(frozen=True, kw_only=True, slots=True)
class Surface:
    """One A2UI surface: its messages in order (each a whole message as sent) and its authors."""

    messages: tuple[Mapping[str, Any], ...]
    drawing: Drawing

    @property
    def version(self) -> str:
        return "v0.9" if self.messages and "version" in self.messages[0] else "v0.8"

    def action_of(self, component_id: Any) -> str | None:
        """The action name of the control ``component_id`` as the surface defines it last (None:
        no such control, or it has no action): only a control pincer rendered can send one."""
        found: str | None = None
        for message in self.messages:
            body = message.get("surfaceUpdate") or message.get("updateComponents")
            if not isinstance(body, Mapping):
                continue
            for component in body.get("components") or ():
                if isinstance(component, Mapping) and component.get("id") == component_id:
                    found = _action_name(component, v09="version" in message)
        return found


@dataclass(frozen=True, kw_only=True, slots=True)
class A2uiRender:
    """One state of every A2UI surface of a canvas."""

    surfaces: Mapping[str, Surface]
    id: str = field(default_factory=new_render_id)


def _action_name(component: Mapping[str, Any], *, v09: bool) -> str | None:
    if v09:
        props: Any = component
        event = props.get("action", {}).get("event") if isinstance(props.get("action"), Mapping) else None
        name = event.get("name") if isinstance(event, Mapping) else None
    else:
        wrapped = component.get("component")
        props = next(iter(wrapped.values()), None) if isinstance(wrapped, Mapping) and wrapped else None
        action = props.get("action") if isinstance(props, Mapping) else None
        name = action.get("name") if isinstance(action, Mapping) else None
    return name if isinstance(name, str) else None
