"""Folding (``safety.folding``): the fast and the mapped fold agree, and the map points home."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.safety.folding import fold, fold_mapped, folded_forms
from pincer.safety.scanner import LeakScanner

SECRET = "tr0ub4dor-Horse-8-battery"
_PIECE = st.text(alphabet=st.characters(codec="utf-8"), max_size=4) | st.sampled_from(
    ["\\u0041", "\\x41", "\\xc3\\xa9", "\\U0001f600", " ", "\u200b", "\\"]
)
_TEXT = st.lists(_PIECE, max_size=12).map("".join)


@given(_TEXT)
@settings(max_examples=300, deadline=None)
def test_the_mapped_fold_spans_lie_inside_the_text_in_order(text: str) -> None:
    folded, starts, ends = fold_mapped(text)
    assert len(folded) == len(starts) == len(ends)
    assert all(0 <= s < e <= len(text) for s, e in zip(starts, ends, strict=True))
    assert starts == sorted(starts)


@given(st.text(alphabet=st.characters(codec="ascii")))
@settings(max_examples=300, deadline=None)
def test_both_folds_agree_on_ascii_text(text: str) -> None:
    assert fold(text) == fold_mapped(text)[0]


@given(_TEXT, _TEXT, st.sampled_from(["upper", "spaced", "reversed", "escaped"]))
@settings(max_examples=200, deadline=None)
def test_a_transformed_secret_inside_any_text_is_redacted(before: str, after: str, how: str) -> None:
    sent = {
        "upper": SECRET.upper(),
        "spaced": " ".join(SECRET),
        "reversed": SECRET[::-1],
        "escaped": "".join(f"\\u{ord(c):04x}" for c in SECRET),
    }[how]
    output, count = LeakScanner([SECRET]).scan_text(before + sent + after)
    assert count >= 1
    assert fold(SECRET) not in fold(output) and fold(SECRET[::-1]) not in fold(output)


def test_short_values_have_no_folded_forms() -> None:
    assert folded_forms("x" * 11) == {}
    assert folded_forms("a b c d e f g h i j k") == {}  # 11 characters once spaces are dropped
