"""OpenAPI 3.0 / 3.1 services as pincer tools: one tool per operation.

:mod:`.document` loads a document and follows its ``$ref``s, :mod:`.operations` turns operations
into tool definitions, :mod:`.config` stores services in ``$PINCER_HOME/openapi/services.json``
and :mod:`.runtime` makes the calls through the shared egress rules.
"""

from pincer.runtimes.openapi.config import ServiceConfig, ServiceStore
from pincer.runtimes.openapi.document import Resolver, load_document
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
    "load_document",
    "server_urls",
]
