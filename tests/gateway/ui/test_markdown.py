"""Run messages as Markdown (``gateway/ui/markdown.py``): whatever a model or a page it read
writes, the HTML holds only the tags and attributes Markdown syntax makes, links go only to
http(s) and mailto, and nothing runs (no raw HTML, no event handler, no javascript: URL)."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.gateway.ui.markdown import ALLOWED_TAGS, LINK_SCHEMES, MAX_MARKDOWN_CHARS, render_markdown

_ATTRIBUTES = {"a": {"href", "title", "rel"}, "code": {"class"}, "ol": {"start"}}
_PIECES = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "[y](JaVaScRiPt:1)",
    "[z](data:text/html,<b>)", "![i](https://tracker.example/p.png)", "<https://example.com>", "`code`", "```js\nx<1\n```",
    "# h1", "###### h6", "| a | b |\n|--:|:-:|\n| 1 | 2 |", "> quote", "- item", "3. three", "**b** _i_ ~~s~~",
    '<a href="https://evil.example" onclick="x()">a</a>', "<style>body{}</style>", "&lt;script&gt;", "\n\n", " ",
    "[link](https://example.com \"title\")", "[m](mailto:a@example.com)", "<!-- c -->", "<svg onload=alert(1)>",
]  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


def _tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.found


@settings(max_examples=300)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=40)), max_size=12).map("".join))
def test_any_message_renders_only_markdowns_own_tags(text: str) -> None:
    html = str(render_markdown(text))
    for tag, attrs in _tags(html):
        assert tag in ALLOWED_TAGS, (tag, text)
        for name, value in attrs:
            assert name in _ATTRIBUTES.get(tag, set()), (tag, name, text)
            if name == "href":
                assert (value or "").lower().startswith(LINK_SCHEMES), (value, text)
            if name == "rel":
                assert value == "nofollow noopener noreferrer"
            if name == "class":
                assert (value or "").startswith("language-")  # a fence's info string, escaped in the attribute


def test_what_a_model_writes_is_shown_not_run() -> None:
    html = str(render_markdown("**hi** <script>alert(1)</script> [x](javascript:alert(1)) ![p](https://t.example/p.png)"))
    assert "<strong>hi</strong>" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "javascript:" not in html.split("[x]")[0] and "<a" not in html.split("[x]")[1].split("!")[0]
    assert "<img" not in html and '<a href="https://t.example/p.png" rel="nofollow noopener noreferrer">p</a>' in html


def test_headings_sit_under_the_page_and_tables_carry_no_inline_style() -> None:
    html = str(render_markdown("# Title\n\n| a |\n|--:|\n| 1 |"))
    assert "<h3>Title</h3>" in html and "style=" not in html and "<th>a</th>" in html


def test_a_huge_message_is_shown_as_text() -> None:
    text = "*" * (MAX_MARKDOWN_CHARS + 1) + "<b>"
    html = str(render_markdown(text))
    assert html.startswith('<pre class="plain">') and "&lt;b&gt;" in html
