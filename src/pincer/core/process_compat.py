"""Every use of anyio's and asyncio's private process internals, in one place.

``close_transport`` closes the asyncio subprocess transport behind an ``anyio`` process. anyio
offers no public way to do that without also waiting for the pipes' EOF (``Process.aclose``
waits for the process, and asyncio's wait for pipe EOF too, which a grandchild holding the
pipes can delay past the process's own exit). Left open, asyncio warns about the transport
when it is garbage-collected, which fails whichever test runs then.

``tests/core/test_process_compat.py`` checks that the internal still exists with the shape used
here, so an anyio or asyncio upgrade that moves it fails that test by name instead of leaking a
transport quietly. When it fails: find the new home of the transport, change it here and
nowhere else.
"""

from __future__ import annotations

from contextlib import suppress

from anyio.abc import Process

__all__ = ["close_transport"]


def close_transport(process: Process) -> bool:
    """Close ``process``'s asyncio subprocess transport; False if there is none to close (the
    trio backend, or internals that moved)."""
    # anyio's asyncio Process wraps an asyncio.subprocess.Process (``_process``), which holds
    # the transport (``_transport``).
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if not callable(close):
        return False
    with suppress(Exception):
        close()
    return True
