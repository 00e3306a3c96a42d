"""Native Python tools: the ``@tool`` decorator, NativeRuntime, and the built-in tools.

The built-ins live in :mod:`pincer.runtimes.native.builtins` (imported on demand: they pull in
the egress client).
"""

from pincer.runtimes.native.decorator import NativeTool, tool
from pincer.runtimes.native.runtime import NativeRuntime

__all__ = ["NativeRuntime", "NativeTool", "tool"]
