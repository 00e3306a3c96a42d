"""The page a browser flow that leaves the dashboard (single sign-on, connecting one's own
credential) ends on when it is refused: a status, what was wrong, and the way back."""

from __future__ import annotations

from html import escape

from starlette.responses import HTMLResponse

from pincer.gateway.ui.auth import UI_PREFIX

__all__ = ["refusal_page"]


def refusal_page(status: int, message: str, *, title: str, back: str, back_text: str) -> HTMLResponse:
    """A self-contained page (no template: it must render whatever state the sign-in is in).
    ``back``: a path under the dashboard."""
    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<link rel="stylesheet" href="{UI_PREFIX}/static/dashboard.css"></head><body><main>'
        f'<h1>{escape(title)}</h1><p class="error" role="alert">{escape(message)}</p>'
        f'<p><a href="{UI_PREFIX}{escape(back)}">{escape(back_text)}</a></p></main></body></html>'
    )
    return HTMLResponse(body, status_code=status)
