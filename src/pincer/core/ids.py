"""Ids that name something a caller may act on: 128 random bits each.

An id that reaches a client (an approval, a run, a firing, a canvas eval) is also a handle:
whoever holds it can ask about the thing, answer it or cancel it, within what their session
may do. 128 bits from the OS's generator mean two ids never collide and none can be guessed,
whatever else guards the handle.
"""

from __future__ import annotations

import secrets

__all__ = ["ID_BYTES", "random_id"]

ID_BYTES = 16


def random_id(prefix: str = "") -> str:
    """``prefix`` followed by 32 hex digits (128 random bits)."""
    return prefix + secrets.token_hex(ID_BYTES)
