"""``@tool``: a typed Python function (sync or async) becomes a :class:`NativeTool`.

The input schema comes from the type hints (through pydantic), parameter descriptions from the
docstring's ``Args:`` section, the tool description from the text before the first docstring
section. Effects are declared in the decorator; nothing is inferred from the code.

Arguments are validated and coerced to the Python types by a pydantic validator built once per
tool, because ``NativeTool.run`` sits on the hot path of every native call.

A parameter annotated :class:`~pincer.core.values.HostContext` receives the call's host context
and is not part of the schema. Sync functions run in a worker thread unless ``inline=True``
(for trivially cheap functions, where a thread hop would cost more than the work).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired, Required, overload

import anyio.to_thread
import pydantic
import pydantic_core
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from pincer.core.effects import EffectKind, RuntimeKind, parse_effects
from pincer.core.errors import ArgumentsInvalid, ToolError, UsageError
from pincer.core.values import CallEffects, HostContext, RuntimeAsk, ToolOutput, ToolSpec
from pincer.runtimes.native.docstrings import parse_docstring

__all__ = ["NativeTool", "tool", "TOOL_NAME_PATTERN"]

# MCP allows 1-128 characters of [A-Za-z0-9_.-]; we keep to that so every native tool can be served.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

# Effects that change something outside the call: a tool declaring one is side-effecting unless
# the decorator says otherwise (idempotency keys then replay instead of running twice).
_MUTATING_EFFECTS = frozenset(
    {
        EffectKind.WRITE_FILESYSTEM,
        EffectKind.DELETE_FILESYSTEM,
        EffectKind.EXTERNAL_WRITE,
        EffectKind.FINANCIAL,
        EffectKind.MODIFY_EXTENSION,
        EffectKind.MODIFY_APPROVAL,
        EffectKind.MODIFY_BUDGET,
    }
)
_PLAIN_JSON_TYPES = (str, int, float, bool, type(None))


@dataclass(frozen=True, kw_only=True, slots=True)
class NativeTool:
    """A Python function with its ToolSpec and a validator built once.

    Calling the tool object calls the function unchanged (handy in tests); :meth:`run` is what
    the runtime uses: validate, inject the host context, run (thread or await), return the value.
    """

    spec: ToolSpec
    fn: Callable[..., Any]
    is_async: bool
    inline: bool = False
    context_param: str | None = None
    validator: pydantic_core.SchemaValidator | None = field(default=None, repr=False, compare=False)
    # Refuses (raises) what can be refused before anyone is asked; see runtimes.base.Runtime.preflight.
    preflight: Callable[[Mapping[str, Any], HostContext], Awaitable[RuntimeAsk | None]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def name(self) -> str:
        return self.spec.name

    def with_preflight(
        self, check: Callable[[Mapping[str, Any], HostContext], Awaitable[RuntimeAsk | None]]
    ) -> NativeTool:
        """A copy whose ``check(args, host)`` runs in the chain's preflight step."""
        return dataclasses.replace(self, preflight=check)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Coerce ``args`` to the function's types; raises ArgumentsInvalid naming each bad path."""
        if self.validator is None:
            if args:
                extra = ", ".join(sorted(map(str, args)))
                raise ArgumentsInvalid(
                    f"tool {self.spec.name!r} takes no arguments, got: {extra}",
                    hint="call it with an empty object {}",
                )
            return {}
        try:
            # The validator is built from a TypedDict (see _compile): what it returns is a dict.
            validated: dict[str, Any] = self.validator.validate_python(args if type(args) is dict else dict(args))
        except pydantic.ValidationError as exc:
            raise ArgumentsInvalid(
                f"tool {self.spec.name!r}: {_describe_validation_error(exc)}",
                hint=f"see the input schema with `pincer tools show {self.spec.name}`",
            ) from None
        except (TypeError, ValueError) as exc:  # args that are not a mapping of str keys at all
            raise ArgumentsInvalid(
                f"tool {self.spec.name!r}: arguments must be a JSON object: {exc}",
                hint="pass an object whose keys are the parameter names",
            ) from None
        return validated

    async def run(self, args: Mapping[str, Any], host: HostContext) -> Any:
        """Validate, call, and return the function's result converted to JSON-able values."""
        kwargs = self.validate(args)
        if self.context_param is not None:
            kwargs[self.context_param] = host
        if self.is_async:
            result = await self.fn(**kwargs)
        elif self.inline:
            result = self.fn(**kwargs)
        else:
            # abandon_on_cancel: a timeout must be able to end the call even though a thread
            # cannot be killed; the thread finishes in the background and its result is dropped.
            result = await anyio.to_thread.run_sync(functools.partial(self.fn, **kwargs), abandon_on_cancel=True)
        return to_json_value(result, tool=self.spec.name)


def to_json_value(result: Any, *, tool: str) -> Any:
    """The result as plain JSON values (pydantic models, dataclasses, datetimes converted);
    a ToolOutput passes through for tools that return content blocks or logs."""
    if isinstance(result, (*_PLAIN_JSON_TYPES, ToolOutput)):
        return result
    try:
        return pydantic_core.to_jsonable_python(result)
    except pydantic_core.PydanticSerializationError as exc:
        raise ToolError(
            f"tool {tool!r} returned a {type(result).__name__}, which is not JSON-serialisable",
            hint="return dicts, lists, strings, numbers, pydantic models or dataclasses",
        ) from exc


@overload
def tool(fn: Callable[..., Any], /) -> NativeTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effects: Iterable[EffectKind | str] = (),
    side_effecting: bool | None = None,
    inline: bool = False,
    annotations: Mapping[str, Any] | None = None,
    trusted_output: bool = False,
    call_effects: CallEffects | None = None,
) -> Callable[[Callable[..., Any]], NativeTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effects: Iterable[EffectKind | str] = (),
    side_effecting: bool | None = None,
    inline: bool = False,
    annotations: Mapping[str, Any] | None = None,
    trusted_output: bool = False,
    call_effects: CallEffects | None = None,
) -> NativeTool | Callable[[Callable[..., Any]], NativeTool]:
    """Turn a typed function into a NativeTool; usable bare (``@tool``) or with options.

    ``effects`` lists what the tool may do (EffectKind values or their names; none by default).
    ``side_effecting`` defaults to whether an effect writes, deletes or spends.
    ``trusted_output``: what it returns carries no text from outside (the agent loop's taint
    rule; only for pure tools whose output is made of their own input). ``call_effects``: the
    effects of each call by one argument (``effects`` is then what a call may do at most; see
    ``pincer.core.values.CallEffects``). Raises UsageError
    when the function cannot be described (missing annotations, ``*args``, a bad name).
    """

    def decorate(func: Callable[..., Any]) -> NativeTool:
        return _build(
            func,
            name=name,
            description=description,
            effects=effects,
            side_effecting=side_effecting,
            inline=inline,
            annotations=annotations,
            trusted_output=trusted_output,
            call_effects=call_effects,
        )

    if fn is not None:
        return decorate(fn)
    return decorate


def _build(
    func: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    effects: Iterable[EffectKind | str],
    side_effecting: bool | None,
    inline: bool,
    annotations: Mapping[str, Any] | None,
    trusted_output: bool = False,
    call_effects: CallEffects | None = None,
) -> NativeTool:
    if isinstance(func, NativeTool):
        raise UsageError(f"{func.name!r} is already a tool", hint="apply @tool once")
    if not callable(func):
        raise UsageError(f"@tool needs a function, got {type(func).__name__}")
    tool_name = name if name is not None else getattr(func, "__name__", "")
    if not isinstance(tool_name, str) or not TOOL_NAME_PATTERN.match(tool_name):
        raise UsageError(
            f"invalid tool name {tool_name!r}",
            hint="use 1-128 characters of letters, digits, '_', '.', '-' (pass name=... to @tool)",
        )
    effect_set = parse_effects(list(effects), source=f"@tool {tool_name}: effects")
    doc = parse_docstring(inspect.getdoc(func))
    try:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError, ValueError) as exc:
        raise UsageError(
            f"@tool {tool_name}: cannot read the signature or type hints: {exc}",
            hint="annotate every parameter with a type importable where the function is defined",
        ) from exc

    context_param: str | None = None
    fields: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise UsageError(
                f"@tool {tool_name}: parameter {param.name!r} is {param.kind.description}",
                hint="tools take named parameters only; drop *args/**kwargs and '/'",
            )
        if param.name not in hints:
            raise UsageError(
                f"@tool {tool_name}: parameter {param.name!r} has no type annotation",
                hint="annotate it (use typing.Any to accept any JSON value)",
            )
        hint = hints[param.name]
        if _is_host_context(hint):
            context_param = param.name
            continue
        fields[param.name] = _field_type(hint, doc.params.get(param.name), required=param.default is param.empty)
        if param.default is not param.empty:
            defaults[param.name] = param.default

    validator, input_schema = _compile(tool_name, fields, defaults)
    if side_effecting is None:
        side_effecting = bool(effect_set & _MUTATING_EFFECTS)
    spec = ToolSpec(
        name=tool_name,
        description=(description if description is not None else doc.description) or tool_name,
        input_schema=input_schema,
        effects=effect_set,
        runtime=RuntimeKind.NATIVE,
        side_effecting=side_effecting,
        source=f"native:{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', tool_name)}",
        output_schema=_output_schema(hints.get("return")),
        annotations=dict(annotations or {}),
        output_trusted=trusted_output,
        call_effects=call_effects,
    )
    return NativeTool(
        spec=spec,
        fn=func,
        is_async=_is_async(func),
        inline=inline,
        context_param=context_param,
        validator=validator,
    )


def _is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _is_host_context(hint: Any) -> bool:
    if hint is HostContext:
        return True
    if typing.get_origin(hint) is Annotated:
        return _is_host_context(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(members) == 1 and members[0] is HostContext
    return False


def _field_type(hint: Any, doc_description: str | None, *, required: bool) -> Any:
    """The TypedDict entry for one parameter; the docstring text unless the hint has its own."""
    annotated = hint
    if doc_description and not _has_description(hint):
        annotated = Annotated[hint, pydantic.Field(description=doc_description)]
    return Required[annotated] if required else NotRequired[annotated]


def _has_description(hint: Any) -> bool:
    if typing.get_origin(hint) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in typing.get_args(hint)[1:])


def _compile(
    tool_name: str, fields: dict[str, Any], defaults: dict[str, Any]
) -> tuple[pydantic_core.SchemaValidator | None, dict[str, Any]]:
    if not fields:
        return None, {"type": "object", "properties": {}, "additionalProperties": False}
    name = f"{tool_name.replace('.', '_').replace('-', '_')}_arguments"
    # The one dynamic class here: mypy checks the functional TypedDict only for a literal name and
    # fixed fields; these come from the decorated function, and pydantic reads them at runtime.
    made: type[Any] = TypedDict(name, fields)  # type: ignore[misc]
    arguments = pydantic.with_config(pydantic.ConfigDict(extra="forbid"))(made)
    try:
        adapter = pydantic.TypeAdapter(arguments)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise UsageError(
            f"@tool {tool_name}: a parameter type cannot be described as JSON Schema: {exc}",
            hint="use JSON-shaped types: str, int, float, bool, lists, dicts, Literal, enums, pydantic models",
        ) from exc
    schema.pop("title", None)
    for prop_name, prop in schema.get("properties", {}).items():
        prop.pop("title", None)
        if prop_name in defaults:
            try:
                prop["default"] = pydantic_core.to_jsonable_python(defaults[prop_name])
            except pydantic_core.PydanticSerializationError:
                pass  # a default that is not JSON stays out of the schema; the function keeps it
    schema["additionalProperties"] = False
    return adapter.validator, schema  # type: ignore[return-value]


def _output_schema(hint: Any) -> dict[str, Any] | None:
    """An object schema for the return type, when there is one (MCP wants objects only)."""
    if hint is None or hint is Any or hint is type(None):
        return None
    try:
        schema = pydantic.TypeAdapter(hint).json_schema(mode="serialization")
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError):
        return None
    return schema if schema.get("type") == "object" else None


def _describe_validation_error(exc: pydantic.ValidationError) -> str:
    """Each failing path and rule, without echoing the input values (they may be secrets)."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        path = ".".join(str(p) for p in error["loc"]) or "(arguments)"
        parts.append(f"{path}: {error['msg']}")
    more = exc.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
