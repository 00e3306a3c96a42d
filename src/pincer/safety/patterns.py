"""Well-known credential shapes, redacted even when no store holds them.

Each shape has literal *anchors* (found together with the secret forms in one Aho-Corasick
pass) and a pattern matched at an anchor's start to confirm it. A pattern with a ``secret``
group redacts only that group (``Bearer [REDACTED:bearer_token]``); otherwise the whole match.
The shapes lean towards redacting: a false positive costs a word of output, a miss costs a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CredentialShape", "SHAPES"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CredentialShape:
    kind: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str]

    def span_at(self, text: str, start: int) -> tuple[int, int] | None:
        """The span to redact when the shape matches at ``start`` (an anchor's position)."""
        match = self.pattern.match(text, start)
        if match is None:
            return None
        return match.span("secret") if "secret" in self.pattern.groupindex else match.span()


def _shape(kind: str, anchors: tuple[str, ...], pattern: str, flags: int = 0) -> CredentialShape:
    return CredentialShape(kind=kind, anchors=anchors, pattern=re.compile(pattern, flags))


_PEM_LABEL = r"-----{0}[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----"

SHAPES: tuple[CredentialShape, ...] = (
    _shape("anthropic_key", ("sk-ant-",), r"sk-ant-[A-Za-z0-9_-]{20,}"),
    _shape(
        "openai_key",
        ("sk-",),
        r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    ),
    _shape("aws_access_key", ("AKIA", "ASIA"), r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
    _shape(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}",
    ),
    _shape(
        "stripe_key",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    _shape("slack_token", ("xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"), r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    _shape("google_api_key", ("AIza",), r"AIza[0-9A-Za-z_-]{35}"),
    # An unterminated block (cut output) is redacted to the end of the text.
    _shape(
        "private_key",
        ("-----BEGIN",),
        _PEM_LABEL.format("BEGIN") + r"(?:.*?" + _PEM_LABEL.format("END") + r"|.*)",
        re.DOTALL,
    ),
    _shape(
        "bearer_token",
        ("Bearer", "bearer", "BEARER"),
        r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
    ),
)
