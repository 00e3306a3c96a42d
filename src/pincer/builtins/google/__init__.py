"""The Google Workspace built-ins: ``gmail``, ``google_calendar``, ``google_docs``,
``google_drive``, ``google_sheets``, ``google_slides``. One login serves all six (``pincer auth
setup google``; the access token in the secret ``google_oauth_token``, injected host-side as a
bearer token); its scopes are the union of what the enabled tools need (:func:`login_scopes`),
the read-only scope for a tool set ``read_only = true``.

``[builtins.google] base_url`` moves every Google API origin to one place (a proxy, or the local
stand-in of the tests); ``[builtins.NAME] base_url`` moves one tool's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.core.errors import UsageError

__all__ = ["GOOGLE_TOOLS", "SCOPES", "login_scopes"]

GOOGLE_TOOLS = ("gmail", "google_calendar", "google_docs", "google_drive", "google_sheets", "google_slides")

_AUTH = "https://www.googleapis.com/auth/"
# tool -> (scopes for read-only use, scopes for every action): the narrowest Google offers.
SCOPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gmail": ((_AUTH + "gmail.readonly",), (_AUTH + "gmail.modify", _AUTH + "gmail.compose")),
    "google_calendar": ((_AUTH + "calendar.readonly",), (_AUTH + "calendar.events", _AUTH + "calendar.readonly")),
    "google_docs": ((_AUTH + "documents.readonly",), (_AUTH + "documents",)),
    "google_drive": ((_AUTH + "drive.readonly",), (_AUTH + "drive",)),
    "google_sheets": ((_AUTH + "spreadsheets.readonly",), (_AUTH + "spreadsheets",)),
    "google_slides": ((_AUTH + "presentations.readonly",), (_AUTH + "presentations",)),
}


def login_scopes(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The union of the enabled Google tools' scopes, in a stable order."""
    found: dict[str, None] = {}
    for name in GOOGLE_TOOLS:
        item = settings.get(name)
        if item is None or not item.enabled:
            continue
        read, write = SCOPES[name]
        for scope in read if item.read_only else write:
            found[scope] = None
    if not found:
        raise UsageError(
            "no Google tool is enabled, so there is nothing to ask Google for",
            hint="enable them first: `pincer install bundles/google` (or set [builtins.gmail] enabled = true)",
        )
    return tuple(found)
