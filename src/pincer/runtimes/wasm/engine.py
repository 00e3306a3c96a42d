"""The wasmtime engine pincer runs components on, and the epoch ticker that enforces deadlines.

One engine per runtime: fuel and epoch interruption are on for every store. The epoch ticker is
a daemon thread that increments the engine's epoch every ``tick_ms``; a store's deadline is a
number of ticks from "now", so the deadline resolution is one tick.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import platform
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from pincer.core.extras import require

if TYPE_CHECKING:
    import wasmtime
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    wasmtime = require("wasm", "wasmtime")


__all__ = ["WASMTIME_VERSION", "ENGINE_SETTINGS", "new_engine", "engine_fingerprint", "EpochTicker"]

logger = logging.getLogger(__name__)

WASMTIME_VERSION = importlib.metadata.version("wasmtime")

# Everything that changes compiled code goes here: the compile cache key includes it, so a
# change of any value invalidates every cached artifact instead of failing to deserialize.
ENGINE_SETTINGS: Mapping[str, object] = {
    "consume_fuel": True,
    "epoch_interruption": True,
    "cranelift_opt_level": "speed",
}

TICKER_JOIN_TIMEOUT_S = 1.0


def new_engine() -> wasmtime.Engine:
    """An engine with :data:`ENGINE_SETTINGS`."""
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    config.cranelift_opt_level = "speed"
    return wasmtime.Engine(config)


def engine_fingerprint() -> str:
    """What a serialized component depends on besides its own bytes."""
    settings = ",".join(f"{k}={v}" for k, v in sorted(ENGINE_SETTINGS.items()))
    return f"wasmtime={WASMTIME_VERSION};{platform.machine()};{settings}"


class EpochTicker:
    """Increments ``engine``'s epoch every ``tick_ms`` on a daemon thread while started.

    ``start``/``stop`` nest (a count), so several users of one engine can share the ticker."""

    def __init__(self, engine: wasmtime.Engine, tick_ms: int) -> None:
        self._engine = engine
        self._tick_s = tick_ms / 1000.0
        self._lock = threading.Lock()
        self._users = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._active = 0
        self._wake = threading.Event()

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        with self._lock:
            self._users += 1
            if self._thread is None:
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop,), name="pincer-wasm-epoch", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or self._thread is None:
                return
            thread, self._thread = self._thread, None
            self._stop.set()
            self._wake.set()
        thread.join(TICKER_JOIN_TIMEOUT_S)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Tick only while executions run: an idle ticker thread waking every tick takes the GIL
        from the event loop a hundred times a second and slowed every other call measurably."""
        with self._lock:
            self._active += 1
            self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if not self._active:
                    self._wake.clear()

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._wake.wait()  # parked without waking while nothing executes
            if stop.wait(self._tick_s):
                return
            self._engine.increment_epoch()
