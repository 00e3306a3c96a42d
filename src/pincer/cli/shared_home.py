"""Every command syncs the registry's files with the other machines' homes first and last.

With ``[store] url`` the files ``pincer tools install``, ``pincer mcp add``/``trust``, ``pincer
install`` and the rest write under PINCER_HOME are shared through PostgreSQL (store/home_share.py):
before a command runs, what other machines changed is brought into this home (so ``pincer mcp
remove`` edits the newest server list); after it, what the command changed is published. Without
``[store] url`` nothing is opened and nothing happens. A sync that fails never fails the command:
it says so on stderr and the next sync (any command, or a running gateway) catches up.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

__all__ = ["synced_home", "UNSYNCED_COMMANDS"]

# serve syncs itself (store/home_share.py), db must work on a store not yet upgraded, the rest
# never touch the registry of PINCER_HOME: secrets and auth write this machine's secret store
# (never shared), and syncing first would make `pincer secrets set pg_password` warn that the
# store's password is missing, telling the person to run the command they are running.
UNSYNCED_COMMANDS = frozenset({"serve", "db", "init", "completion", "demo", "token", "secrets", "auth"})


def _say(text: str) -> None:
    sys.stderr.write(text.rstrip("\n") + "\n")
    sys.stderr.flush()


@contextmanager
def synced_home(argv: Sequence[str]) -> Iterator[None]:
    """Sync around the command ``argv`` names (``sys.argv[1:]``)."""
    command = argv[0] if argv else ""
    if not command or command.startswith("-") or command in UNSYNCED_COMMANDS or "--help" in argv:
        yield
        return
    with ExitStack() as stack:
        sync = _open(stack)
        if sync is None:
            yield
            return
        from pincer.store.home_share import share, unshare

        try:
            _sync(sync, "before the command")
            share(sync)
            yield
        finally:
            unshare(sync)
            _sync(sync, "after the command")


def _open(stack: ExitStack) -> Any:
    """The home's sync over the configured store (its connection closed with ``stack``); None
    without ``[store] url``, and whenever the store cannot be used (the command itself reports a
    bad config.toml or store)."""
    raw = os.environ.get("PINCER_HOME")
    home = Path(raw).expanduser() if raw else Path.home() / ".pincer"
    if not (home / "config.toml").is_file():
        return None
    from pincer.config import load_config
    from pincer.core.errors import PincerError

    try:
        config = load_config(home)
    except PincerError:
        return None
    settings = config.store
    if settings.url is None:
        return None
    from pincer.store.home_files import shared_home_files
    from pincer.store.home_share import HomeSync

    try:
        password = None
        if settings.password_secret is not None:
            from pincer.cli.common import secret_key
            from pincer.secrets.store import SecretStore

            with SecretStore.open(home, key=secret_key(home)) as secrets:
                password = secrets.get(settings.password_secret)
        files = stack.enter_context(shared_home_files(settings.url, password=password))
    except PincerError as exc:
        _say(f"warning: the registry files of {home} were not synced with the store: {exc}")
        return None
    if files is None:  # not upgraded yet: the command (or a gateway) names `pincer db upgrade`
        return None
    return HomeSync(config.home, files)


def _sync(sync: Any, when: str) -> None:
    try:
        report = sync.sync()
    except Exception as exc:  # noqa: BLE001 - psycopg's errors too; a sync never fails the command
        _say(f"warning: the registry files of {sync.home} were not synced with the store {when}: {exc}; the "
             "next sync (any pincer command, or a running gateway) retries; `pincer db status` checks the store")  # fmt: skip
        return
    for refusal in report.refused:
        _say(f"error: {refusal}")
    for path in report.overridden:
        _say(f"warning: {path} changed here and on another machine since the last sync; this home's change is "
             "the one shared now")  # fmt: skip
