"""Issue 20 item 6: template resource bombs. A skill body (and a webhook's params mapping) is a
Jinja2 template rendered in the sandbox; on main only the final text was bounded, so every
intermediate value could grow without limit: ``{{ 'a'.center(999999999)|length }}`` allocated
1 GB and printed ``999999999``, ``zfill``/``ljust``/``rjust``/``expandtabs``/``format``/``%``
padding the same, ``(['a' * 1000000] * 900)|join`` built 900 MB (the ``*`` check counted list
items, not their size), ``{% for i in range(28) %}{{ a.extend(a) }}{% endfor %}`` doubled a list
to 2 GB, ``a ~ a ~ a ...`` and ``a + a`` concatenated past any limit, ``x*x`` squared an integer
to gigabytes, ``|json|json|...`` doubled backslashes, ``|replace('', big)`` multiplied a string
and a ``{% set %}`` block captured any amount of output.

Each bomb here uses sizes of about 10**8 (on main each rendered, allocating ~100 MB to several
GB before the final-size check, or printed its length), and is now refused before the value is
built, with an error naming ``[skills] max_render_chars`` (or the loop, range, exponent limits).
``tracemalloc`` checks that the refused render never held more than a few megabytes.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import SkillError
from pincer.skills import parse_skill, render_skill
from pincer.skills.render import render_text

HEAD = "---\nname: bomb\ndescription: d\nparameters:\n  - {name: p, type: string, default: x}\n---\n"
# Peak Python allocation allowed while a bomb is refused: the limit is 1,000,000 characters per
# value, so a few legitimate 1 MB strings may exist; a bomb that got through would need >= 100 MB.
MAX_PEAK_BYTES = 40_000_000
BIG = str(10**8)
A = "{% set a = 'x' * 900000 %}"

BOMBS = [
    ("center", "{{ 'a'.center(BIG)|length }}".replace("BIG", BIG), "max_render_chars"),
    ("zfill", "{{ 'a'.zfill(BIG)|length }}".replace("BIG", BIG), "max_render_chars"),
    ("ljust", "{{ 'a'.ljust(BIG)|length }}".replace("BIG", BIG), "max_render_chars"),
    ("rjust", "{{ 'a'.rjust(BIG)|length }}".replace("BIG", BIG), "max_render_chars"),
    ("expandtabs", "{{ ('\\t' * 1000).expandtabs(100000)|length }}", "max_render_chars"),
    ("repeat-str", "{{ ('x' * 1000000 * 100)|length }}", "max_render_chars"),
    ("join-repeated-list", "{{ (['a' * 1000000] * 100)|join|length }}", "max_render_chars"),
    ("str-join", "{{ ','.join(['a' * 1000000] * 100)|length }}", "max_render_chars"),
    ("join-of-list-literal", A + "{{ [a, a, a, a, a]|join|length }}", "max_render_chars"),
    (
        "extend-doubling",
        "{% set a = ['x'] %}{% for i in range(27) %}{{ a.extend(a) }}{% endfor %}{{ a|length }}",
        "not allowed",
    ),
    ("append", "{% set a = [] %}{% for i in range(100) %}{{ a.append('x' * 900000) }}{% endfor %}", "not allowed"),
    ("dict-update", "{% set d = {} %}{{ d.update({'a': 1}) }}", "not allowed"),
    ("range-loop", "{% for i in range(10**8) %}x{% endfor %}", "past the limit of 100,000"),
    (
        "nested-loops",
        "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}",
        "past 10,000 iterations",
    ),
    ("list-of-range", "{{ (range(100000)|list * 1000)|length }}", "max_render_chars"),
    ("replace-growth", "{{ ('a' * 1000000)|replace('a', 'aaaaaaaaaa')|length }}", "max_render_chars"),
    ("replace-empty", "{{ ('a' * 1000)|replace('', 'b' * 100000)|length }}", "max_render_chars"),
    ("str-replace", "{{ ('a' * 1000000).replace('a', 'bbbbbbbbbb')|length }}", "max_render_chars"),
    ("format-padding", "{{ '{:>BIG}'.format('a')|length }}".replace("BIG", BIG), "max_render_chars"),
    ("format-precision", "{{ '{:.BIGf}'.format(1.0)|length }}".replace("BIG", BIG), "max_render_chars"),
    (
        "format-nested-width",
        "{{ '{:{}}'.format('a', BIG)|length }}".replace("BIG", BIG),
        "width comes from another field",
    ),
    ("percent-width", "{{ ('%BIGs' % 'a')|length }}".replace("BIG", BIG), "max_render_chars"),
    ("percent-precision", "{{ ('%.BIGf' % 1.0)|length }}".replace("BIG", BIG), "max_render_chars"),
    ("percent-star", "{{ ('%*s' % (BIG, 'a'))|length }}".replace("BIG", BIG), "max_render_chars"),
    ("indent-filter", "{{ 'x'|indent(BIG) }}".replace("BIG", BIG), "No filter named 'indent'"),
    ("wordwrap-filter", "{{ ('x ' * 400000)|wordwrap(1) }}", "No filter named 'wordwrap'"),
    ("center-filter", "{{ 'x'|center(BIG) }}".replace("BIG", BIG), "No filter named 'center'"),
    ("tilde-chain", A + "{{ (a ~ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a ~ a)|length }}", "max_render_chars"),
    ("plus-chain", A + "{{ (a + a + a)|length }}", "max_render_chars"),
    ("list-plus", "{% set l = ['x'] * 900000 %}{{ (l + l + l)|length }}", "max_render_chars"),
    (
        "string-of-shared-list",
        A + "{% set b = [a, a, a, a, a, a, a, a, a, a] %}{{ b|string|length }}",
        "max_render_chars",
    ),
    ("output-of-shared-list", A + "{% set b = [a, a, a, a, a, a, a, a, a, a] %}{{ b }}", "max_render_chars"),
    ("set-block-capture", A + "{% set b %}" + "{{ a }}" * 30 + "{% endset %}{{ b|length }}", "max_render_chars"),
    ("loop-of-outputs", A + "{% for i in range(200) %}{{ a }}{% endfor %}", "max_render_chars"),
    ("int-squaring", "{% set x = 2**64 %}" + "{% set x = x * x %}" * 30 + "{{ x > 1 }}", "65,536 bits"),
    ("int-power", "{{ ((9**64)**64)**64 > 1 }}", "65,536 bits"),
    ("json-doubling", "{{ ('\\\\' * 1000)" + "|json" * 20 + "|length }}", "max_render_chars"),
    ("escape-growth", "{{ ('&' * 900000)|e|length }}", "max_render_chars"),
    ("upper-growth", "{{ ('\u0390' * 900000)|upper|length }}", "max_render_chars"),
    ("translate", "{{ 'aaaa'.translate({97: 'x' * 1000000}) }}", "str.translate"),
    (
        "recursive-loop",
        "{% for x in [1] recursive %}{{ loop([1, 1]) }}{{ loop([1, 1]) }}{% endfor %}",
        "recursive loops",
    ),
    ("sum-of-lists", "{% set l = [['x'] * 900000] * 1 %}{{ ([l[0], l[0]]|sum(start=[]))|length }}", "max_render_chars"),
]


def _skill(body: str):
    return parse_skill((HEAD + body).encode(), path=Path("/skills/bomb/SKILL.md"))


@pytest.mark.parametrize(("body", "needle"), [(b, n) for _, b, n in BOMBS], ids=[i for i, _, _ in BOMBS])
def test_a_template_bomb_is_refused_before_it_allocates(body: str, needle: str) -> None:
    skill = _skill(body)
    tracemalloc.start()
    try:
        with pytest.raises(SkillError) as caught:
            render_skill(skill)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert needle in caught.value.message, caught.value.message
    assert peak < MAX_PEAK_BYTES, f"the refused render held {peak:,} bytes"


@pytest.mark.parametrize(("body", "needle"), [(b, n) for _, b, n in BOMBS[:8]], ids=[i for i, _, _ in BOMBS[:8]])
def test_the_same_bombs_in_a_webhook_mapping_are_refused(body: str, needle: str) -> None:
    """render_text (webhook ``params`` and ``message`` templates) shares the sandbox and bounds."""
    with pytest.raises(SkillError) as caught:
        render_text(body, {}, source="[[hooks]] gh params.x")
    assert needle in caught.value.message and "[[hooks]] gh params.x" in caught.value.message


def test_the_limit_is_the_config_key() -> None:
    """``[skills] max_render_chars`` moves the bound: 2 MB of padding passes at 4,000,000."""
    skill = _skill("{{ 'a'.center(2000000)|length }}")
    with pytest.raises(SkillError, match=r"max_render_chars"):
        render_skill(skill)
    assert render_skill(skill, max_chars=4_000_000).text == "2000000"


def test_ordinary_templates_still_render() -> None:
    body = (
        "{{ p|upper }} {{ 'ab'.center(6, '*') }} {{ '%05d' % 42 }} {{ '{:>4}'.format('x') }} "
        "{{ ['a', 'b']|join(', ') }} {{ (['x'] * 3)|join }} {{ 'a' ~ 'b' }} {{ [1] + [2] }} {{ 2 ** 10 }} "
        "{% for i in range(3) %}{{ i }}{% endfor %} {{ range(5)|list|sum }} {{ 'a.b'.split('.')|last }}"
    )
    assert render_skill(_skill(body)).text == "X **ab** 00042    x a, b xxx ab [1, 2] 1024 012 10 b"


_PIECES = st.sampled_from(
    [
        "{{ ", " }}", "{% for i in ", " %}", "{% endfor %}", "{% set a = ", "{% set b %}", "{% endset %}",
        "{% if ", "{% endif %}", "'x'", "'\\t'", "a", "b", "p", "i", "range(", ")", "(", "[", "]", ", ", "*", "**",
        "+", "~", "%", "|join", "|list", "|string", "|json", "|replace('x', 'yy')", "|upper", "|e", "|sum",
        ".center(", ".zfill(", ".ljust(", ".format(", ".replace(", ".join(", ".expandtabs(", ".extend(",
        "'{:>9}'", "'%9s'", "9", "99", "999", "99999", "999999999", "10**8", "2**64", "[a, a, a]", " ",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=24).map("".join))
def test_arbitrary_templates_render_bounded_or_raise_our_error(body: str) -> None:
    """Any mix of the growing operations renders within the limit or raises SkillError, never a
    MemoryError, another exception, or a text past ``max_render_chars``."""
    tracemalloc.start()
    try:
        try:
            text = render_skill(_skill(body)).text
        except SkillError:
            text = ""
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(text) <= 1_000_000
    assert peak < 200_000_000, f"{body!r} held {peak:,} bytes"


def test_measuring_a_big_list_again_and_again_is_work_too() -> None:
    """``l * 0`` builds nothing but had its operand measured for free: 10,000 loop iterations
    over a 500,000-item list walked 5 * 10**9 items (minutes of CPU) on this branch before the
    measuring was charged to the render's work budget."""
    body = "{% set l = ['x'] * 500000 %}{% for i in range(10000) %}{{ (l * 0)|length }}{% endfor %}"
    with pytest.raises(SkillError, match="max_render_chars"):
        render_skill(_skill(body))
