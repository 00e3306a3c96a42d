"""``pincer serve`` with the recording starter standing in for the agent loop.

    PINCER_TEST_RUNS_DB=runs.db python tests/triggers/serve_recording.py --port 0 --json

Everything else is the real ``pincer serve`` (the CLI, the gateway, the trigger engine, the
store); only ``pincer.triggers.starter.default_starter`` is swapped, the one place the agent
loop is wired in. Every run it is asked for is written to the SQLite file named by
``PINCER_TEST_RUNS_DB`` before ``start`` returns; ``PINCER_TEST_START_DELAY_S`` makes each
start take that long (so that a queue builds up).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    # Run as a script: the repository root makes ``tests.triggers.recording`` importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import pincer.triggers.starter as starter_module
    from tests.triggers.recording import RecordingStarter

    recording = RecordingStarter(
        path=Path(os.environ["PINCER_TEST_RUNS_DB"]), start_delay_s=float(os.environ.get("PINCER_TEST_START_DELAY_S", "0"))
    )
    starter_module.default_starter = lambda services: recording  # type: ignore[assignment]
    from pincer.cli.main import main as cli

    sys.argv = ["pincer", "serve", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
