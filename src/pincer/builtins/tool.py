"""A built-in as a :class:`~pincer.runtimes.native.decorator.NativeTool`: the action-tagged
schema, the capabilities manifest on its spec (the dispatcher hands it to the call as
``HostContext.capabilities``, and the secret access follows its ``secrets.allowed_names``), effects
per action, and an output that is always untrusted (the agent loop's taint rule reads
``output_trusted``) and scanned by the chain's leak scanner like every output.

The input checks of each action (path segments, git refs) run in the preflight too, so a call
with a bad ref is refused before anyone is asked to approve it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import pydantic_core
from pydantic_core import core_schema

from pincer.builtins.actions import ActionSet
from pincer.core.capabilities import Capabilities
from pincer.core.effects import RuntimeKind
from pincer.core.values import CallEffects, HostContext, RuntimeAsk, ToolSpec
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["make_tool", "bundled_manifest", "HOST_PARAM"]

# The name the host context travels under to the tool's function; no schema has this field.
HOST_PARAM = "_pincer_host"

ApiFactory = Callable[[HostContext], Any]
Checker = Callable[[str, Mapping[str, Any]], None]

_PASS_THROUGH = pydantic_core.SchemaValidator(core_schema.dict_schema(keys_schema=core_schema.str_schema()))


def make_tool(
    *,
    name: str,
    description: str,
    actions: ActionSet,
    capabilities: Capabilities,
    api: ApiFactory,
    check: Checker | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> NativeTool:
    """The NativeTool for ``actions``; ``api(host)`` makes the per-call client handed to each
    action's handler; ``check(action, args)`` raises for bad input (run in preflight and call)."""

    async def run(**kwargs: Any) -> Any:
        host: HostContext = kwargs.pop(HOST_PARAM)
        action, args = actions.resolve(kwargs)
        if check is not None:
            check(action.name, args)
        return await action.handler(api(host), args)

    async def preflight(args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        action, own = actions.resolve(args)
        if check is not None:
            check(action.name, own)
        return None

    read_only_hint = not actions.writes
    spec = ToolSpec(
        name=name,
        description=description,
        input_schema=actions.input_schema(),
        effects=actions.effects,
        runtime=RuntimeKind.NATIVE,
        side_effecting=actions.writes,
        source=f"builtin:{name}",
        capabilities=capabilities,
        annotations={"readOnlyHint": read_only_hint, "openWorldHint": True, **dict(annotations or {})},
        output_trusted=False,
        call_effects=CallEffects(
            arg="action",
            table=actions.effects_table,
            # A one-action tool's calls may leave ``action`` out (its schema default).
            default=actions.actions[0].name if len(actions.actions) == 1 else None,
        ),
    )
    return NativeTool(
        spec=spec,
        fn=run,
        is_async=True,
        context_param=HOST_PARAM,
        validator=_PASS_THROUGH,
        preflight=preflight,
    )


def bundled_manifest(name: str) -> Capabilities:
    """The capabilities manifest shipped for the built-in ``name`` (``manifests/NAME.capabilities.json``)."""
    text = resources.files("pincer.builtins").joinpath(f"manifests/{name}.capabilities.json").read_text("utf-8")
    return Capabilities.from_json(text, source=f"pincer:builtins/{name}.capabilities.json")
