"""The resource bounds of a template render: every intermediate value, not only the final text.

A template is code from whoever wrote the skill (or the webhook mapping). Bounding the output
alone let ``{{ 'a'.center(999999999)|length }}`` allocate a gigabyte and print ``999999999``.
So each operation that can make a value larger than its inputs estimates the size of its result
*before* it runs and refuses past ``[skills] max_render_chars``; the estimates are charged to a
work budget shared by the whole render (``RENDER_WORK_FACTOR`` times the limit), so a loop of
individually small growths cannot add up either. What is guarded:

- string methods that grow text: ``center ljust rjust zfill expandtabs replace join format
  format_map``; ``translate`` and ``encode`` are refused (no skill needs them);
- operators: ``*`` and ``+`` on text and lists, ``%`` formatting, ``~`` concatenation, ``**``
  and ``*`` on integers (by bit length);
- filters that build text or lists (``join replace string list sort unique reverse sum json
  escape``, the case filters);
- every ``{{ }}`` output (``finalize``), which also bounds ``{% set %}`` blocks that capture text;
- lists, dicts and sets cannot be changed in place (Jinja's ``ImmutableSandboxedEnvironment``),
  so ``a.extend(a)`` in a loop cannot double a list; loops share one iteration budget and
  ``range`` refuses more than ``MAX_RANGE_ITEMS`` items; recursive loops are refused.

Sizes are counted in characters of the value's text form (lists count their items' sizes plus
one per item; an integer its decimal digits), an upper-bound estimate made without building the
value. Errors are :class:`~pincer.core.errors.SkillError` naming the limit.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from string import Formatter
from typing import Any

from markupsafe import Markup

from pincer.config import SkillsSettings
from pincer.core.errors import SkillError

__all__ = [
    "RenderBudget",
    "MAX_LOOP_ITERATIONS",
    "MAX_RENDER_CHARS",
    "MAX_RANGE_ITEMS",
    "MAX_INT_BITS",
    "RENDER_WORK_FACTOR",
    "budget",
    "rendering",
    "check_size",
    "weight",
    "guarded_call",
    "guarded_binop",
    "bounded_iter",
    "bounded_range",
    "bounded_concat",
    "bounded_filters",
    "finalize",
]

MAX_LOOP_ITERATIONS = 10_000
MAX_RENDER_CHARS = SkillsSettings().max_render_chars  # [skills] max_render_chars's default
MAX_RANGE_ITEMS = 100_000  # Jinja's own sandbox limit
# 65,536 bits is ~20,000 decimal digits: more than any skill needs, far below what squaring a
# number thirty times would reach.
MAX_INT_BITS = 65_536
RENDER_WORK_FACTOR = 16
_LIMIT_HINT = "the template builds too much text; if the skill really needs it, raise [skills] max_render_chars"
_GROWING_STR_METHODS = frozenset(
    {"center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "format", "format_map"}
)
_REFUSED_STR_METHODS = frozenset({"translate", "maketrans", "encode"})
_DIGITS = re.compile(r"\d+")


@dataclass(kw_only=True, slots=True)
class RenderBudget:
    """What one render may still spend (mutable on purpose: the render's running account)."""

    max_chars: int = MAX_RENDER_CHARS
    loops_left: int = MAX_LOOP_ITERATIONS
    work_left: int = field(default=MAX_RENDER_CHARS * RENDER_WORK_FACTOR)


_BUDGET: contextvars.ContextVar[RenderBudget] = contextvars.ContextVar("pincer_render_budget")


def budget() -> RenderBudget:
    """The running render's budget (a fresh default one outside a render, e.g. at compile time)."""
    current = _BUDGET.get(None)
    return current if current is not None else RenderBudget()


@contextlib.contextmanager
def rendering(max_chars: int = MAX_RENDER_CHARS) -> Iterator[RenderBudget]:
    """``with rendering(max_chars):`` gives the render inside it a fresh budget."""
    token = _BUDGET.set(RenderBudget(max_chars=max_chars, work_left=max_chars * RENDER_WORK_FACTOR))
    try:
        yield _BUDGET.get()
    finally:
        _BUDGET.reset(token)


def _refuse(what: str, size: int, limit: int) -> SkillError:
    return SkillError(
        f"{what} would make a value of about {size:,} characters, past the limit of {limit:,} ([skills] max_render_chars)",
        hint=_LIMIT_HINT,
    )


def check_size(size: int, what: str) -> None:
    """Refuse ``size`` past the per-value limit, and charge it to the render's work budget."""
    b = budget()
    if size > b.max_chars:
        raise _refuse(what, size, b.max_chars)
    b.work_left -= size
    if b.work_left < 0:
        total = b.max_chars * RENDER_WORK_FACTOR
        raise SkillError(
            f"the template built more than {total:,} characters in all ({RENDER_WORK_FACTOR} x [skills] max_render_chars)",
            hint=_LIMIT_HINT,
        )


def weight(value: object, limit: int | None = None) -> int:
    """An upper-bound estimate of the characters of ``value``'s text form, without building it.
    Stops counting once past ``limit`` (the per-value limit by default), so it costs at most
    that many steps however the value shares its parts; the steps are charged to the render's
    work budget (``[x] * 0`` in a loop must not walk a big list for free)."""
    b = budget()
    total, steps = _walk(value, b.max_chars if limit is None else limit)
    b.work_left -= steps
    if b.work_left < 0:
        raise SkillError(
            f"the template built or measured more than {b.max_chars * RENDER_WORK_FACTOR:,} characters in all "
            f"({RENDER_WORK_FACTOR} x [skills] max_render_chars)",
            hint=_LIMIT_HINT,
        )
    return total


def _walk(value: object, cap: int) -> tuple[int, int]:
    total = steps = 0
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        steps += 1
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        elif isinstance(item, float):
            total += 24
        elif isinstance(item, range):
            total += len(item) * (len(str(max(abs(item.start), abs(item.stop)))) + 3)
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2 + len(item)
            if total > cap:
                return total, steps
            stack.extend(item)
        elif isinstance(item, dict):
            total += 2 + 2 * len(item)
            if total > cap:
                return total, steps
            stack.extend(item.keys())
            stack.extend(item.values())
        else:
            total += 32
        if total > cap:
            return total, steps
    return total, steps


def _length(value: object) -> int:
    return len(value) if isinstance(value, str) else weight(value)


def _int_bits(value: object) -> int:
    return value.bit_length() if isinstance(value, int) and not isinstance(value, bool) else 64


def _format_size(fmt: str, args: Iterable[object]) -> int:
    """Upper bound of ``fmt.format(*args)``: every field may hold the widest argument, padded to
    every width or precision written in its spec. Nested fields (``{:{w}}``) are refused."""
    widest = max((weight(a) for a in args), default=0) + 32
    size = 0
    try:
        parsed = list(Formatter().parse(fmt))
    except ValueError:
        return len(fmt)  # str.format raises the same error itself
    for literal, name, spec, _conversion in parsed:
        size += len(literal)
        if name is None:
            continue
        if spec and "{" in spec:
            raise SkillError("a format field whose width comes from another field", hint="write the width as a number")
        size += widest + sum(int(d) for d in _DIGITS.findall(spec or ""))
    return size


def _percent_size(fmt: str, right: object) -> int:
    items = right if isinstance(right, tuple) else (right,)
    widest = max((weight(a) for a in items), default=0) + 32
    stars = sum(abs(a) for a in items if isinstance(a, int)) if "*" in fmt else 0
    return len(fmt) + sum(int(d) for d in _DIGITS.findall(fmt)) + (fmt.count("%") + 1) * widest + stars


def _str_method_size(text: str, name: str, args: tuple[object, ...], kwargs: dict[str, object]) -> int:
    if name in ("center", "ljust", "rjust", "zfill"):
        width = args[0] if args else kwargs.get("width", 0)
        return max(len(text), width if isinstance(width, int) else 0)
    if name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        return len(text) + text.count("\t") * max(tabsize if isinstance(tabsize, int) else 8, 1)
    if name == "replace":
        old, new = (args + (None, None))[:2]
        if not isinstance(old, str) or not isinstance(new, str):
            return len(text)
        hits = text.count(old) if old else len(text) + 1
        count = args[2] if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0 else hits
        return len(text) + min(hits, count) * len(new)
    if name == "join":
        items = args[0] if args else ()
        if not isinstance(items, (list, tuple, str, range, dict, set, frozenset)):
            return len(text)
        return weight(items) + len(text) * max(len(items) - 1, 0)
    if name == "format":
        return _format_size(text, (*args, *kwargs.values()))
    if name == "format_map":
        mapping = args[0] if args else {}
        return _format_size(text, mapping.values() if isinstance(mapping, dict) else ())
    return len(text)


def guarded_call(obj: object, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    """Before the sandbox calls ``obj``: a string method that grows text is sized first."""
    target = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format in its own function
    owner = getattr(target, "__self__", None)
    if not isinstance(owner, str):
        return
    name = getattr(target, "__name__", "")
    if name in _REFUSED_STR_METHODS:
        raise SkillError(
            f"templates cannot use str.{name}()", hint="use the replace filter or string methods like upper()"
        )
    if name in _GROWING_STR_METHODS:
        check_size(_str_method_size(owner, name, args, kwargs), f"str.{name}()")


def guarded_binop(operator: str, left: object, right: object) -> None:
    """Before ``left OPERATOR right``: sequences and integers sized, so neither can blow up."""
    sequences = (str, list, tuple)
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, sequences) and isinstance(times, int):
                unit = len(seq) if isinstance(seq, str) else weight(seq)
                check_size(unit * max(times, 0), "a repetition (*)")
                return
        if isinstance(left, int) and isinstance(right, int) and _int_bits(left) + _int_bits(right) > MAX_INT_BITS:
            raise SkillError(f"a product of more than {MAX_INT_BITS:,} bits", hint="use smaller numbers")
    elif operator == "**":
        if isinstance(right, (int, float)) and abs(right) > 64:
            raise SkillError("an exponent above 64", hint="use smaller numbers")
        if isinstance(left, int) and isinstance(right, int) and _int_bits(left) * max(right, 0) > MAX_INT_BITS:
            raise SkillError(f"a power of more than {MAX_INT_BITS:,} bits", hint="use smaller numbers")
    elif operator == "+":
        if isinstance(left, sequences) and isinstance(right, sequences):
            check_size(_length(left) + _length(right), "a concatenation (+)")
    elif operator == "%" and isinstance(left, str):
        check_size(_percent_size(left, right), "%-formatting")


def bounded_iter(value: Iterable[object]) -> Iterator[object]:
    """Every ``{% for %}`` iterates through this: all loops of one render share one budget."""
    b = budget()
    for item in value:
        b.loops_left -= 1
        if b.loops_left < 0:
            raise SkillError(
                f"the template's loops ran past {MAX_LOOP_ITERATIONS:,} iterations", hint="loop over fewer items"
            )
        yield item


def bounded_range(*args: int) -> range:
    """``range`` for templates: at most ``MAX_RANGE_ITEMS`` items."""
    items = range(*args)
    if len(items) > MAX_RANGE_ITEMS:
        raise SkillError(
            f"range() of {len(items):,} items, past the limit of {MAX_RANGE_ITEMS:,}", hint="loop over fewer items"
        )
    return items


def bounded_concat(*parts: object) -> str:
    """The ``~`` operator, sized before it joins (Jinja's own ``str_join`` would not be)."""
    check_size(sum(_length(p) for p in parts), "a concatenation (~)")
    if any(isinstance(p, Markup) for p in parts):
        return Markup("").join(Markup.escape(p) if not isinstance(p, Markup) else p for p in parts)
    return "".join(str(p) for p in parts)


def finalize(value: object) -> object:
    """Every ``{{ }}`` output, also inside a ``{% set %}`` block that captures text."""
    check_size(_length(value), "an output {{ }}")
    return value


def _sized(name: str, estimate: Callable[..., int], inner: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        check_size(estimate(*args, **kwargs), f"the {name} filter")
        return inner(*args, **kwargs)

    wrapper.__name__ = getattr(inner, "__name__", name)
    for marker in ("jinja_pass_arg",):  # pass_eval_context and friends must survive the wrapper
        if hasattr(inner, marker):
            setattr(wrapper, marker, getattr(inner, marker))
    return wrapper


def _value_of(args: tuple[object, ...], passes_context: bool) -> object:
    return args[1] if passes_context else args[0]


def bounded_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """``filters`` with every filter that builds text or a list sized before it runs."""
    out = dict(filters)
    for name, inner in filters.items():
        takes_context = hasattr(inner, "jinja_pass_arg")
        if name == "join":

            def join_size(*args: Any, _c: bool = takes_context, **kwargs: Any) -> int:
                rest = args[2:] if _c else args[1:]
                sep = rest[0] if rest else kwargs.get("d", "")
                items = _value_of(args, _c)
                count = len(items) if hasattr(items, "__len__") else 0
                return weight(items) + (len(sep) if isinstance(sep, str) else 32) * count

            out[name] = _sized(name, join_size, inner)
        elif name == "replace":

            def replace_size(*args: Any, _c: bool = takes_context, **kwargs: Any) -> int:
                rest = args[1:] if _c else args
                value = rest[0] if rest else ""
                if not isinstance(value, str):
                    check_size(weight(value), "the replace filter")
                    value = str(value)
                return _str_method_size(value, "replace", tuple(rest[1:]), kwargs)

            out[name] = _sized(name, replace_size, inner)
        elif name in ("escape", "e", "json"):
            # escaping grows a character to at most six (&#34; or \u0000)
            out[name] = _sized(name, lambda *a, _c=takes_context, **k: weight(_value_of(a, _c)) * 6, inner)
        elif name in ("upper", "lower", "title", "capitalize", "string"):
            # Unicode case mapping can triple a character (U+0390); a list's text form escapes
            out[name] = _sized(name, lambda *a, _c=takes_context, **k: weight(_value_of(a, _c)) * 3, inner)
        elif name in ("trim", "truncate", "list", "sort", "unique", "reverse", "sum"):
            out[name] = _sized(name, lambda *a, _c=takes_context, **k: weight(_value_of(a, _c)), inner)
    return out
