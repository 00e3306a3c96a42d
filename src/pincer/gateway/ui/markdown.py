"""Messages of a run as Markdown, made safe on the server.

markdown-it-py (the CommonMark reference port, kept by the Executable Books project) parses with
raw HTML turned off: every ``<`` of a message is text, and the only tags in the output are the
ones its renderer writes for Markdown syntax. On top of that, images are not rendered (a remote
image would be a beacon; the CSP would block it anyway), links keep only ``http``, ``https`` and
``mailto`` targets and open nothing in this page's name (``rel="nofollow noopener noreferrer"``),
headings start at ``<h3>`` so a message never outranks the page's own outline, and table
alignment (an inline style the CSP would refuse) is dropped. No second
sanitiser (nh3, bleach) is added: with HTML off there is no markup from the message to clean,
and ``tests/gateway/ui/test_markdown.py`` checks, for any text, that the output holds only the
tags and attributes listed here.

The text is redacted (the leak scanner) and made honest (invisible characters shown) before it is
parsed, by the caller (``runs.py``).
"""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

__all__ = ["ALLOWED_TAGS", "LINK_SCHEMES", "MAX_MARKDOWN_CHARS", "render_markdown"]

MAX_MARKDOWN_CHARS = 100_000  # past this a message is shown as plain text (parsing cost stays bounded)
LINK_SCHEMES = ("http://", "https://", "mailto:")
ALLOWED_TAGS = frozenset(
    {"p", "br", "hr", "em", "strong", "s", "code", "pre", "blockquote", "ul", "ol", "li", "a",
     "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"}
)  # fmt: skip
_HEADING_SHIFT = 2  # a message's "# Title" is an <h3>, under the page's <h2> "Conversation"


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(LINK_SCHEMES)


def _tidy(state: Any) -> None:
    """Headings shifted under the page's; a table column's alignment dropped (markdown-it writes
    it as an inline style, which the CSP refuses)."""
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            level = int(token.tag[1:])
            token.tag = f"h{min(6, level + _HEADING_SHIFT)}"
        for child in [token, *(token.children or ())]:
            if child.attrs and "style" in child.attrs:
                del child.attrs["style"]


def _link_open(renderer: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    token.attrSet("rel", "nofollow noopener noreferrer")
    rendered: str = renderer.renderToken(tokens, idx, options, env)
    return rendered


def _parser() -> MarkdownIt:
    md = MarkdownIt("js-default", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.core.ruler.push("pincer_tidy", _tidy)
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _parser()


def render_markdown(text: str) -> Markup:
    """``text`` (already redacted and made honest) as safe HTML."""
    if len(text) > MAX_MARKDOWN_CHARS:
        return Markup('<pre class="plain">{}</pre>').format(text)
    return Markup(_MD.render(text))
