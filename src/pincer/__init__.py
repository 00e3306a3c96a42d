"""pincer: a runtime that gives AI agents tools safely.

The names a Python program embedding pincer needs (docs/embedding.md): the service, the values of
a call and of an agent run, the tool decorator and its runtime, and the error tree. Each is
imported on first use (PEP 562), so ``import pincer`` costs about a millisecond and loads none of
pincer's parts: the CLI and every module that reads ``pincer.__version__`` import this package
first. ``__init__.pyi`` states the same names with their types for type checkers;
tests/test_public_api.py keeps the two and ``__all__`` the same.
"""

import importlib as _importlib

__version__ = "0.1.0"

# name -> the module that defines it. Deep imports keep working; these are the stable spellings.
_EXPORTS: dict[str, str] = {
    # the service and its configuration
    "Pincer": "pincer.service",
    "Config": "pincer.config",
    "load_config": "pincer.config",
    "parse_config": "pincer.config",
    # a call of one tool, an agent run, and what they give back
    "CallRequest": "pincer.core.values",
    "ToolResult": "pincer.core.values",
    "HostContext": "pincer.core.values",
    "RunRequest": "pincer.llm.run",
    # tools written in Python
    "tool": "pincer.runtimes.native.decorator",
    "NativeTool": "pincer.runtimes.native.decorator",
    "NativeRuntime": "pincer.runtimes.native.runtime",
    "EffectKind": "pincer.core.effects",
    # the error tree (core/errors.py): the root, its branches, the leaves a caller tells apart
    "PincerError": "pincer.core.errors",
    "UsageError": "pincer.core.errors",
    "ToolNotFound": "pincer.core.errors",
    "ArgumentsInvalid": "pincer.core.errors",
    "ConfigError": "pincer.core.errors",
    "ManifestError": "pincer.core.errors",
    "PolicyError": "pincer.core.errors",
    "Denied": "pincer.core.errors",
    "ApprovalDenied": "pincer.core.errors",
    "ApprovalTimeout": "pincer.core.errors",
    "BudgetExceeded": "pincer.core.errors",
    "EgressDenied": "pincer.core.errors",
    "SecretError": "pincer.core.errors",
    "ToolError": "pincer.core.errors",
    "ToolTimeout": "pincer.core.errors",
    "ProviderError": "pincer.core.errors",
    "RuntimeUnavailable": "pincer.core.errors",
    "ExtraMissing": "pincer.core.errors",
    "StoreError": "pincer.core.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pincer' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
