"""The WIT records the host hands to a component, as typed values.

``wasmtime.component.Record`` is an empty class filled in by ``setattr``, so nothing checks the
fields a host function builds. wasmtime lowers a record by reading each WIT field name as an
attribute (``getattr(value, "headers-json")``) and picks the case of an untagged ``result`` by
``isinstance(value, Record)``; these frozen dataclasses subclass ``Record`` for that and give each
field its type. Records coming back from a component are plain ``Record`` objects, read with
``getattr`` and checked with ``isinstance`` where they are used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pincer.core.extras import require

if TYPE_CHECKING:
    from wasmtime.component import Record
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    Record = require("wasm", "wasmtime.component").Record

__all__ = ["HttpResponseRecord", "ToolRequest"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolRequest(Record):
    """``record request`` of the tool interface, the argument of ``execute``."""

    params: str
    context: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpResponseRecord(Record):
    """``record http-response`` of the host interface, the ``ok`` payload of ``http-request``."""

    status: int
    headers_json: str
    body: bytes

    def __getattr__(self, name: str) -> str:
        # Reached only for names the dataclass does not define: the WIT spelling no attribute can have.
        if name == "headers-json":
            return self.headers_json
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
