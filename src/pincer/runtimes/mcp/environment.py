"""The environment a stdio MCP server starts with: a whitelist, never pincer's own environment.

A server gets the few variables a program needs to run (PATH, HOME, locale, ...), the values its
configuration sets, and secrets only where the configuration maps them explicitly with
``${secret:NAME}``. Variables that change how a loader or interpreter behaves (``LD_*``,
``DYLD_*``, ``PYTHON*``, ``NODE_OPTIONS``) never pass, from either side: they would let whoever
controls pincer's environment or a server entry run code inside every server.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping

from pincer.core.errors import SecretError, UsageError

logger = logging.getLogger(__name__)

__all__ = [
    "INHERITED_VARIABLES",
    "child_environment",
    "is_forbidden_variable",
    "resolve_secret_refs",
    "secret_refs",
    "SECRET_REF",
]

INHERITED_VARIABLES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
)
_FORBIDDEN_PREFIXES = ("LD_", "DYLD_", "PYTHON")
_FORBIDDEN_NAMES = frozenset({"NODE_OPTIONS"})
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SECRET_REF = re.compile(r"\$\{secret:([A-Za-z0-9_.-]{1,128})\}")

SecretLookup = Callable[[str], str | None]


def is_forbidden_variable(name: str) -> bool:
    upper = name.upper()
    return upper in _FORBIDDEN_NAMES or upper.startswith(_FORBIDDEN_PREFIXES)


def check_variable_name(name: str, *, source: str) -> None:
    if not _VARIABLE_NAME.match(name):
        raise UsageError(
            f"{source}: {name!r} is not a valid environment variable name",
            hint="use letters, digits and '_', not starting with a digit",
        )
    if is_forbidden_variable(name):
        raise UsageError(
            f"{source}: {name} may not be set for an MCP server (LD_*, DYLD_*, PYTHON* and NODE_OPTIONS "
            "change how the program loads)",
            hint="drop it; pincer never passes these to a server",
        )


def secret_refs(value: str) -> list[str]:
    """The secret names a value refers to with ``${secret:NAME}``."""
    return SECRET_REF.findall(value)


def resolve_secret_refs(value: str, lookup: SecretLookup | None, *, where: str) -> str:
    """Replace each ``${secret:NAME}`` with the secret's value; a missing secret is an error
    naming the secret (never a value)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        secret = lookup(name) if lookup is not None else None
        if not secret:
            raise SecretError(
                f"{where} needs secret {name!r}, which is not set",
                hint=f"set it with `pincer secrets set {name}`",
            )
        return secret

    return SECRET_REF.sub(replace, value)


def child_environment(
    configured: Mapping[str, str],
    *,
    lookup: SecretLookup | None,
    server: str,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of one server process: the whitelist from ``base`` (default
    ``os.environ``), then the configured values with secret references resolved."""
    source = os.environ if base is None else base
    env: dict[str, str] = {}
    for name in INHERITED_VARIABLES:
        value = source.get(name)
        if value is not None and not value.startswith("()"):  # exported shell functions
            env[name] = value
    for name, value in configured.items():
        if is_forbidden_variable(name):
            logger.warning("MCP server %s: dropped %s from its environment", server, name)
            continue
        env[name] = resolve_secret_refs(value, lookup, where=f"MCP server {server!r} env {name}")
    return env
