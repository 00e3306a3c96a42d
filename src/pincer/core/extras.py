"""The optional parts of pincer and the one place their packages are imported.

``pip install pincer`` is the gateway, the call chain and the core tools. Each part below is an
extra (``pip install 'pincer[browser]'``); its packages are imported only through
:func:`require`, so a missing one is a clear :class:`~pincer.core.errors.ExtraMissing` naming the
extra to install, never an ImportError traceback. ``pincer config check`` and ``pincer doctor``
name the extra of every configured part that is missing (:func:`available`).

tests/test_extras.py keeps this table and pyproject.toml's ``[project.optional-dependencies]``
in step, and checks that no module imports one of these packages except through here.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType

from pincer.core.errors import ExtraMissing

__all__ = ["BUILTIN_EXTRAS", "EXTRAS", "Extra", "available", "install_hint", "require", "refuse_if_missing"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Extra:
    """One optional part: its extra's name, what it gives, and the top-level modules it brings."""

    name: str
    feature: str  # what a person reads: "the browser built-in"
    modules: tuple[str, ...]  # import names; the distributions are in pyproject.toml


EXTRAS: dict[str, Extra] = {
    extra.name: extra
    for extra in (
        Extra(name="agent", feature="the agent loop (pincer run, chat, skills run by a model, pincer build)", modules=("openai", "anthropic")),
        Extra(name="browser", feature="the browser built-in ([builtins.browser])", modules=("playwright",)),
        Extra(name="postgres", feature="the PostgreSQL store ([store] url)", modules=("psycopg", "psycopg_pool")),
        Extra(name="redis", feature="the Redis cache ([cache] url)", modules=("redis",)),
        Extra(name="oauth", feature="OAuth logins (pincer auth setup google, slack --oauth, OpenAPI OAuth) and single sign-on ([auth.oidc])",
              modules=("authlib", "joserfc")),
        Extra(name="web", feature="the web_fetch built-in's page extraction ([builtins.web_fetch])", modules=("trafilatura",)),
        Extra(name="wasm", feature="WASM tools (near:agent components, pincer wasm, pincer build)", modules=("wasmtime",)),
        Extra(name="fast", feature="uvloop and httptools under pincer serve", modules=("uvloop", "httptools")),
        Extra(name="telemetry", feature="traces exported over OTLP ([telemetry] traces)",
              modules=("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")),
    )
}  # fmt: skip


# The built-ins (``[builtins.NAME]``) that need an extra besides pincer itself; the rest use the core.
BUILTIN_EXTRAS: dict[str, str] = {"browser": "browser", "web_fetch": "web"} | dict.fromkeys(
    ("gmail", "google_calendar", "google_docs", "google_drive", "google_sheets", "google_slides"), "oauth"
)

_FOUND: set[str] = set()  # extras found once: an installed package does not go away while pincer runs


def install_hint(name: str) -> str:
    """The command that installs extra ``name`` (what every message about a missing one says)."""
    return f"pip install 'pincer[{name}]'"


def available(name: str) -> bool:
    """Whether every package of extra ``name`` can be imported here (found, not imported)."""
    if name in _FOUND:
        return True
    found = all(importlib.util.find_spec(module) is not None for module in EXTRAS[name].modules)
    if found:
        _FOUND.add(name)
    return found


def refuse_if_missing(name: str) -> None:
    """ExtraMissing when extra ``name`` is not installed, without importing it: a call's
    preflight, so that nobody is asked to approve a call that cannot run."""
    if not available(name):
        require(name)


def require(name: str, module: str | None = None) -> ModuleType:
    """Import ``module`` (default: the extra's first package) of extra ``name``; ExtraMissing
    naming the extra when one of its packages is not installed."""
    extra = EXTRAS[name]
    target = module or extra.modules[0]
    if not any(target == m or target.startswith(m + ".") for m in extra.modules):
        raise ValueError(f"{target!r} is not a package of the {name!r} extra")  # a bug in the caller
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        # One of the extra's own dependencies missing is fixed the same way: install the extra.
        missing = (exc.name or target).split(".")[0]
        raise ExtraMissing(
            f"{extra.feature}: not installed here (the {name!r} extra; {missing} is missing)",
            hint=install_hint(name),
        ) from None
