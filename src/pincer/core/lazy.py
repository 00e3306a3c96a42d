"""Package attributes imported on first use (PEP 562), for packages whose members pull in heavy
dependencies (the MCP SDK, wasmtime, the HTTP stack) that most commands never need."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, namespace: dict[str, Any], homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``homes[name]`` (a module path) when ``name`` is
    first read from ``package`` and keeps the value in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return __getattr__
