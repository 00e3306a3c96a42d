"""Rendering a skill's body: parameters validated and coerced, then a sandboxed template.

Bodies are Jinja2 templates rendered in an :class:`~jinja2.sandbox.ImmutableSandboxedEnvironment`
(no attribute starting with ``_``, no unsafe callables, no list or dict changed in place), with
only the Tera-compatible filters the seed documents rely on. Declared parameters are
``StrictUndefined``: a body that uses one that has no value fails with a clear error instead of
rendering an empty hole. Loops are bounded (``MAX_LOOP_ITERATIONS``), and so is every value the
template builds on its way and the output (``[skills] max_render_chars``, see
``pincer.skills.bounds``): a template can fail, never hang or fill the memory.

After the template, the placeholders of the other dialects are expanded: ``{baseDir}``
(OpenClaw) and ``${CLAUDE_SKILL_DIR}`` to the skill's folder, and Claude Code's ``$ARGUMENTS``,
``$ARGUMENTS[N]``, ``$N`` and named ``$arg``; when the body uses none of them, the arguments are
appended as ``ARGUMENTS: ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from pincer.core.errors import SkillError
from pincer.skills import bounds
from pincer.skills.bounds import MAX_LOOP_ITERATIONS, MAX_RENDER_CHARS
from pincer.skills.model import Dialect, Skill
from pincer.skills.params import coerce_params

__all__ = [
    "Rendered",
    "render_skill",
    "is_template",
    "render_text",
    "MAX_LOOP_ITERATIONS",
    "MAX_RENDER_CHARS",
]

_TEMPLATE_MARKERS = ("{{", "{%", "{#")
_CLAUDE_PLACEHOLDER = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS\b|\$(\d+)\b|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Rendered:
    name: str
    text: str
    params: Mapping[str, object]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "text": self.text, "params": dict(self.params)}


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's sandbox, refusing (not blanking) what it blocks, with every operation that can grow
    a value sized first (``pincer.skills.bounds``) and lists, dicts and sets immutable."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} value is not allowed")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        bounds.guarded_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        bounds.guarded_call(__obj, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)


# Template features pincer does not offer: a macro can recurse and double a string per call,
# a recursive loop builds its text outside every bound, and imports or includes would read
# other templates.
_REFUSED_NODES: tuple[type[nodes.Node], ...] = (
    nodes.Macro, nodes.CallBlock, nodes.Import, nodes.FromImport, nodes.Include, nodes.Extends,
)  # fmt: skip
_LOOP_GUARD = "pincer_bounded"
_CONCAT = "pincer_concat"


def _guard_tree(tree: nodes.Template) -> None:
    """Refuse what templates may not use; route every loop and every ``~`` through the bounds."""
    for node in tree.find_all(_REFUSED_NODES):
        raise SkillError(
            f"templates cannot use {type(node).__name__.lower()} tags",
            line=node.lineno,
            hint="use {{ }}, filters, {% if %}, {% for %} and {% set %}",
        )
    for loop in tree.find_all(nodes.For):
        if loop.recursive:
            raise SkillError(
                "templates cannot use recursive loops", line=loop.lineno, hint="use nested {% for %} loops"
            )
        loop.iter = nodes.Call(nodes.Name(_LOOP_GUARD, "load"), [loop.iter], [], None, None, lineno=loop.lineno)
    for concat in list(tree.find_all(nodes.Concat)):
        parts = concat.nodes
        call = nodes.Call(nodes.Name(_CONCAT, "load"), parts, [], None, None, lineno=concat.lineno)
        _replace_node(tree, concat, call)


def _replace_node(tree: nodes.Node, old: nodes.Node, new: nodes.Node) -> None:
    for parent in tree.find_all(nodes.Node):
        for name in parent.fields:
            value = getattr(parent, name, None)
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


def _environment() -> SandboxedEnvironment:
    # optimized=False: Jinja would otherwise fold constant expressions at compile time, outside
    # the render's budget.
    env = _Sandbox(
        undefined=jinja2.ChainableUndefined, autoescape=False, keep_trailing_newline=True, auto_reload=False,
        optimized=False, finalize=bounds.finalize,
    )  # fmt: skip
    # Tera-compatible filters and a few harmless ones; not Jinja's attr, map(attribute=), xmlattr...
    keep = {
        "join", "default", "d", "upper", "lower", "length", "count", "first", "last", "trim", "capitalize",
        "title", "replace", "round", "int", "float", "string", "list", "sort", "unique", "reverse",
        "truncate", "wordcount", "abs", "escape", "e", "safe", "min", "max", "sum",
    }  # fmt: skip
    filters = {k: v for k, v in env.filters.items() if k in keep}
    filters["json"] = lambda value: json.dumps(value, ensure_ascii=False, default=str)
    env.filters = bounds.bounded_filters(filters)
    env.globals = {"range": bounds.bounded_range, _LOOP_GUARD: bounds.bounded_iter, _CONCAT: bounds.bounded_concat}
    return env


_ENV = _environment()
_TEMPLATES: dict[tuple[str, str], jinja2.Template] = {}
_MAX_CACHED_TEMPLATES = 512


def _strict(names: Sequence[str]) -> type[jinja2.Undefined]:
    declared = frozenset(names)

    class DeclaredStrict(jinja2.ChainableUndefined):
        """StrictUndefined for declared parameters; other names (prose that happens to look like
        a variable) render empty rather than failing the whole skill."""

        def __str__(self) -> str:
            if self._undefined_name in declared:
                raise SkillError(
                    f"the template uses parameter {self._undefined_name!r}, which has no value",
                    hint=f"pass it: --param {self._undefined_name}=VALUE",
                )
            return ""

        def __iter__(self) -> Any:
            if self._undefined_name in declared:
                str(self)
            return iter(())

    return DeclaredStrict


# -- rendering ---------------------------------------------------------------------------------


def render_skill(
    skill: Skill,
    params: Mapping[str, object] | None = None,
    *,
    arguments: str | None = None,
    max_chars: int = MAX_RENDER_CHARS,
) -> Rendered:
    """The skill's instructions with ``params`` applied. ``arguments`` is the raw argument text
    of a slash command (Claude Code's ``$ARGUMENTS``); without it, it is made of the params.
    ``max_chars`` (``[skills] max_render_chars``) bounds the text and every value the template
    builds on its way (``pincer.skills.bounds``)."""
    values = coerce_params(skill, params or {}, allow_extra=bool(not skill.parameters and params))
    text = skill.body
    if is_template(skill) and any(marker in text for marker in _TEMPLATE_MARKERS):
        text = _render_template(skill, text, values, max_chars=max_chars)
    base = str(skill.base_dir)
    text = text.replace("{baseDir}", base).replace("${CLAUDE_SKILL_DIR}", base)
    if arguments is None:
        shown = (
            [values[p.name] for p in skill.parameters if p.name in values]
            if skill.parameters
            else list(values.values())
        )
        arguments = " ".join(_shown(v) for v in shown)
    if Dialect.CLAUDE in skill.dialects:
        text = _claude_arguments(text, arguments, values)
    elif arguments and not skill.parameters:
        text += f"\n\nARGUMENTS: {arguments}\n"
    if len(text) > max_chars:
        raise SkillError(
            f"skill {skill.name!r} rendered to more than {max_chars:,} characters ([skills] max_render_chars)",
            source=str(skill.path),
            hint="the template or its loops produce too much text; raise [skills] max_render_chars if it must",
        )
    return Rendered(name=skill.name, text=text, params=values)


def is_template(skill: Skill) -> bool:
    """Bodies of the pincer and IronClaw dialects, and of any skill that declares parameters,
    are templates. Other dialects' bodies were not written as templates (a shell snippet's
    ``{{.Name}}`` must survive), so they are used as written."""
    return bool(skill.parameters) or skill.dialect in (Dialect.PINCER, Dialect.IRONCLAW)


def _render_template(skill: Skill, text: str, values: Mapping[str, object], *, max_chars: int) -> str:
    try:
        template = _compiled(skill, text)
        with bounds.rendering(max_chars):
            return _join_bounded(template.generate(**values), max_chars)
    except SkillError as exc:
        raise SkillError(exc.detail, source=str(skill.path), line=exc.line, hint=exc.hint) from None
    except SecurityError as exc:
        raise SkillError(
            f"the template of skill {skill.name!r} tried to reach something outside the sandbox: {exc}",
            source=str(skill.path),
            hint="templates may use parameters, filters and loops; not attributes starting with '_' or Python internals",
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise SkillError(
            f"the template of skill {skill.name!r} has a syntax error: {exc.message}",
            source=str(skill.path),
            line=exc.lineno + skill.body_line - 1 if exc.lineno else None,
            hint="fix the {{ }} / {% %} tags (write {{ '{{' }} for literal braces)",
        ) from None
    except (
        jinja2.TemplateError,
        TypeError,
        ValueError,
        ArithmeticError,
        LookupError,
        RecursionError,
        AttributeError,
    ) as exc:
        # A template is user code: whatever goes wrong inside it is the template's error.
        raise SkillError(
            f"the template of skill {skill.name!r} failed: {type(exc).__name__}: {str(exc)[:200]}",
            source=str(skill.path),
            hint="check the template's expressions against the parameters it gets",
        ) from None


def _compiled(skill: Skill, text: str) -> jinja2.Template:
    declared = tuple(p.name for p in skill.parameters)
    key = (skill.content_hash, ",".join(declared))
    template = _TEMPLATES.get(key)
    if template is not None:
        return template
    env = _ENV.overlay(undefined=_strict(declared))
    tree = env.parse(text)
    try:
        _guard_tree(tree)
    except SkillError as exc:
        raise SkillError(exc.detail, line=(exc.line or 1) + skill.body_line - 1, hint=exc.hint) from None
    tree.set_environment(env)
    template = _flattened(env.from_string(tree))
    if len(_TEMPLATES) >= _MAX_CACHED_TEMPLATES:
        _TEMPLATES.clear()
    _TEMPLATES[key] = template
    return template


_TEXTS: dict[str, jinja2.Template] = {}


def _flattened(template: jinja2.Template) -> jinja2.Template:
    """``template`` with its globals as one dict: Jinja2 keeps them as a ChainMap over the
    environment's, which every render copies key by key (half the cost of rendering a one-line
    message; the environment's globals are set once, at import)."""
    template.globals = dict(template.globals)
    return template


def render_text(text: str, values: Mapping[str, object], *, source: str) -> str:
    """A template that is not a skill body (a webhook's ``params`` mapping, a job's message) in
    the same sandbox, with the same loop and size bounds. A name without a value renders empty;
    ``source`` names the template in errors."""
    try:
        template = _TEXTS.get(text)
        if template is None:
            tree = _ENV.parse(text)
            _guard_tree(tree)
            tree.set_environment(_ENV)
            template = _flattened(_ENV.from_string(tree))
            if len(_TEXTS) >= _MAX_CACHED_TEMPLATES:
                _TEXTS.clear()
            _TEXTS[text] = template
        with bounds.rendering(MAX_RENDER_CHARS):
            return _join_bounded(template.generate(**values), MAX_RENDER_CHARS)
    except SkillError as exc:
        raise SkillError(exc.detail, source=source, hint=exc.hint) from None
    except SecurityError as exc:
        raise SkillError(f"the template tried to reach something outside the sandbox: {exc}", source=source,
                         hint="use the values it is given, filters and loops") from None  # fmt: skip
    except jinja2.TemplateSyntaxError as exc:
        raise SkillError(f"template syntax error: {exc.message}", source=source,
                         hint="fix the {{ }} / {% %} tags") from None  # fmt: skip
    except (
        jinja2.TemplateError,
        TypeError,
        ValueError,
        ArithmeticError,
        LookupError,
        RecursionError,
        AttributeError,
    ) as exc:
        raise SkillError(f"the template failed: {type(exc).__name__}: {str(exc)[:200]}", source=source,
                         hint="check the template's expressions against the values it gets") from None  # fmt: skip


def _join_bounded(chunks: Iterable[str], max_chars: int) -> str:
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_chars:
            raise SkillError(
                f"the template rendered to more than {max_chars:,} characters ([skills] max_render_chars)",
                hint="the template or its loops produce too much text; raise [skills] max_render_chars if it must",
            )
        out.append(chunk)
    return "".join(out)


def _shown(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _claude_arguments(text: str, arguments: str, values: Mapping[str, object]) -> str:
    if "$" not in text:
        return text + (f"\n\nARGUMENTS: {arguments}\n" if arguments else "")
    positional = arguments.split() if arguments else []
    named = {k: _shown(v) for k, v in values.items()}
    used = False

    def replace(match: re.Match[str]) -> str:
        nonlocal used
        index, number, name = match.group(1), match.group(2), match.group(3)
        if index is not None:
            used = True
            i = int(index)
            return positional[i] if i < len(positional) else ""
        if number is not None:
            used = True
            i = int(number)
            # $0 is the first argument in Claude Code's numbering.
            return positional[i] if i < len(positional) else ""
        if name is not None:
            if name in named:
                used = True
                return named[name]
            return match.group(0)  # $HOME and other shell text in the body stays as written
        used = True
        return arguments

    result = _CLAUDE_PLACEHOLDER.sub(replace, text)
    if not used and arguments:
        result += f"\n\nARGUMENTS: {arguments}\n"
    return result
