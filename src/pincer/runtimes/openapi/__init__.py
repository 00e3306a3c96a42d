"""OpenAPI 3.0 / 3.1 services as pincer tools: one tool per operation (docs/openapi.md).

:mod:`.document` loads a document and follows its ``$ref``s, :mod:`.operations` turns operations
into tool definitions (:mod:`.bodies` their request bodies, :mod:`.security` the security
schemes, :mod:`.naming` their names), :mod:`.importing` makes a service of a document,
:mod:`.config` stores services in ``$PINCER_HOME/openapi/services.json`` and :mod:`.runtime`
makes the calls (:mod:`.serialize` the parameters) through the shared egress rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.core.lazy import lazy_attributes

if TYPE_CHECKING:
    from pincer.runtimes.openapi.config import ServiceConfig, ServiceStore, parse_auth
    from pincer.runtimes.openapi.document import Resolver, load_document
    from pincer.runtimes.openapi.importing import Imported, read_service
    from pincer.runtimes.openapi.operations import Operation, Parameter, extract_operations, server_urls
    from pincer.runtimes.openapi.runtime import OpenApiRuntime

__all__ = [
    "OpenApiRuntime",
    "Operation",
    "Parameter",
    "Resolver",
    "ServiceConfig",
    "ServiceStore",
    "extract_operations",
    "Imported",
    "read_service",
    "load_document",
    "parse_auth",
    "server_urls",
]

# Imported on first use: the runtime pulls in the HTTP stack, which listing services does not need.
_EXPORTS = {
    "ServiceConfig": "pincer.runtimes.openapi.config",
    "ServiceStore": "pincer.runtimes.openapi.config",
    "parse_auth": "pincer.runtimes.openapi.config",
    "Resolver": "pincer.runtimes.openapi.document",
    "load_document": "pincer.runtimes.openapi.document",
    "Imported": "pincer.runtimes.openapi.importing",
    "read_service": "pincer.runtimes.openapi.importing",
    "Operation": "pincer.runtimes.openapi.operations",
    "Parameter": "pincer.runtimes.openapi.operations",
    "extract_operations": "pincer.runtimes.openapi.operations",
    "server_urls": "pincer.runtimes.openapi.operations",
    "OpenApiRuntime": "pincer.runtimes.openapi.runtime",
}


__getattr__ = lazy_attributes(__name__, globals(), _EXPORTS)
