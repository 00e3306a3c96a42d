"""The MCP conformance fixture bundle: the tools, prompts and resources the official suite
(npm ``@modelcontextprotocol/conformance``) expects. Off by default; ``pincer serve
--conformance-fixtures`` or ``[gateway] conformance_fixtures = true`` turns it on.
"""

from __future__ import annotations

from typing import Any

from pincer.gateway.conformance.extension import FixtureExtension
from pincer.gateway.conformance.runtime import FixtureRuntime
from pincer.gateway.conformance.tools import dynamic_tool, fixture_tools

__all__ = ["install_fixtures", "FixtureExtension", "FixtureRuntime"]


async def install_fixtures(pincer: Any) -> FixtureExtension:
    """Register the fixture tools with ``pincer``; returns the extension for the MCP server."""
    extension = FixtureExtension()
    runtime = FixtureRuntime()

    def toggle_tool() -> bool:
        if runtime.has(dynamic_tool.spec.name):
            runtime.remove(dynamic_tool.spec.name)
        else:
            runtime.add(dynamic_tool)
        pincer.registry.refresh(runtime)  # emits the registry event the gateway turns into list_changed
        return runtime.has(dynamic_tool.spec.name)

    for tool in fixture_tools(toggle_tool=toggle_tool, toggle_prompt=extension.toggle_prompt):
        runtime.add(tool)
    await pincer.add_runtime(runtime)
    return extension
