"""The secret store against real SQLite files and real key files under tmp_path."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import SecretError, StoreError, UsageError
from pincer.secrets import store as store_module
from pincer.secrets.keys import KEY_FILE_NAME, parse_key
from pincer.secrets.store import SECRETS_DB_NAME, SecretAccess, SecretStore, load_or_create_key, validate_name

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))
TOKEN = "ghp_S3cr3tValueThatMustNeverBePrinted"
SUBPROCESS_TIMEOUT_S = 60


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def store(home: Path):
    with SecretStore.open(home, key=KEY_A) as opened:
        yield opened


def rows(home: Path) -> list[tuple]:
    conn = sqlite3.connect(home / SECRETS_DB_NAME)
    try:
        return conn.execute(
            "SELECT name, nonce, ciphertext, created_at, updated_at FROM secrets ORDER BY name"
        ).fetchall()
    finally:
        conn.close()


def generation(home: Path) -> int:
    conn = sqlite3.connect(home / SECRETS_DB_NAME)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]
    finally:
        conn.close()


# -- round trip --------------------------------------------------------------------------


def test_round_trip_and_listing(store: SecretStore, home: Path) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    store.set("api.key-2", "ünïcødé ✓ value")
    assert store.get("GITHUB_TOKEN") == TOKEN
    assert store.get("api.key-2") == "ünïcødé ✓ value"
    assert store.find("MISSING") is None
    assert sorted(store.values()) == sorted([TOKEN, "ünïcødé ✓ value"])
    infos = store.names()
    assert [i.name for i in infos] == ["GITHUB_TOKEN", "api.key-2"]
    assert all(i.created_at <= i.updated_at <= time.time() for i in infos)
    # at rest: ciphertext, never the value
    raw = (home / SECRETS_DB_NAME).read_bytes()
    assert TOKEN.encode() not in raw
    assert all(TOKEN.encode() not in bytes(r[2]) and len(r[1]) == 12 for r in rows(home))


def test_update_keeps_created_at_and_fresh_nonce(store: SecretStore, home: Path) -> None:
    store.set("T", "first value")
    (_, nonce1, ct1, created1, updated1) = rows(home)[0]
    store.set("T", "first value")
    (_, nonce2, ct2, created2, updated2) = rows(home)[0]
    assert created2 == created1 and updated2 >= updated1
    assert nonce1 != nonce2 and ct1 != ct2  # same value, new nonce: no equality leak
    assert store.get("T") == "first value"


def test_reopen_reads_back(home: Path) -> None:
    with SecretStore.open(home, key=KEY_A) as s:
        s.set("A", "value-a")
    with SecretStore.open(home, key=KEY_A) as s:
        assert s.get("A") == "value-a"


def test_delete(store: SecretStore) -> None:
    store.set("A", "x")
    store.delete("A")
    assert store.names() == []
    with pytest.raises(SecretError, match="no secret named 'A'"):
        store.delete("A")


def test_missing_secret_names_it(store: SecretStore) -> None:
    with pytest.raises(SecretError) as info:
        store.get("NOPE")
    assert "NOPE" in str(info.value) and info.value.hint


def test_files_are_private(store: SecretStore, home: Path) -> None:
    store.set("A", "x")
    assert stat.S_IMODE((home / SECRETS_DB_NAME).stat().st_mode) == 0o600


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(min_size=1, max_size=200))
def test_any_text_round_trips(store: SecretStore, value: str) -> None:
    store.set("V", value)
    assert store.get("V") == value


# -- key handling ------------------------------------------------------------------------


def test_key_file_created_once_with_mode_0600(home: Path) -> None:
    key = load_or_create_key(home, None)
    path = home / KEY_FILE_NAME
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    content = path.read_bytes()
    assert load_or_create_key(home, None) == key
    assert path.read_bytes() == content
    assert [p.name for p in home.iterdir()] == [KEY_FILE_NAME]  # no temp file left behind


def test_racing_processes_agree_on_one_key(home: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from pincer.secrets.keys import load_or_create_key; "
        "print(load_or_create_key(Path(sys.argv[1]), None).hex())"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(home)], stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    keys = {p.communicate(timeout=SUBPROCESS_TIMEOUT_S)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(keys) == 1 and len(keys.pop()) == 64
    assert [p.name for p in home.iterdir()] == [KEY_FILE_NAME]


def test_store_without_key_uses_key_file(home: Path) -> None:
    with SecretStore.open(home) as s:
        s.set("A", "value-a")
    assert (home / KEY_FILE_NAME).exists()
    with SecretStore.open(home, key=load_or_create_key(home, None)) as s:
        assert s.get("A") == "value-a"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_key_file_readable_by_others_is_refused(home: Path, mode: int) -> None:
    load_or_create_key(home, None)
    path = home / KEY_FILE_NAME
    path.chmod(mode)
    with pytest.raises(SecretError) as info:
        load_or_create_key(home, None)
    assert "group or others" in str(info.value) and "chmod 600" in str(info.value)


def test_key_file_symlink_is_refused(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.key"
    real.write_text(base64.b64encode(KEY_A).decode())
    real.chmod(0o600)
    (home / KEY_FILE_NAME).symlink_to(real)
    with pytest.raises(SecretError, match="symlink"):
        load_or_create_key(home, None)


def test_malformed_key_file_is_refused_without_echo(home: Path) -> None:
    path = home / KEY_FILE_NAME
    path.write_text("not-a-key-at-all-but-secretish\n")
    path.chmod(0o600)
    with pytest.raises(SecretError) as info:
        load_or_create_key(home, None)
    assert str(path) in str(info.value) and "not-a-key" not in str(info.value)


def test_key_file_that_is_a_directory_gives_clear_error(home: Path) -> None:
    (home / KEY_FILE_NAME).mkdir()
    with pytest.raises(SecretError, match="not a regular file|cannot open"):
        load_or_create_key(home, None)


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(KEY_A).decode(),
        base64.b64encode(KEY_A).decode().rstrip("="),
        base64.urlsafe_b64encode(KEY_A).decode(),
        base64.urlsafe_b64encode(KEY_A).decode().rstrip("="),
        KEY_A.hex(),
        KEY_A.hex().upper(),
        "  " + KEY_A.hex() + "\n",
    ],
)
def test_env_key_forms(home: Path, text: str) -> None:
    assert load_or_create_key(home, text) == KEY_A
    assert not (home / KEY_FILE_NAME).exists()  # an env key never writes a file


@pytest.mark.parametrize(
    "text",
    [
        "hunter2",
        base64.b64encode(b"x" * 31).decode(),
        base64.b64encode(b"x" * 33).decode(),
        "zz" * 32,
        "a" * 1000,
        "é" * 44,
    ],
)
def test_malformed_env_key_is_a_clear_error(home: Path, text: str) -> None:
    with pytest.raises(SecretError) as info:
        load_or_create_key(home, text)
    message = str(info.value)
    assert "PINCER_SECRET_KEY" in message and "32-byte" in message and info.value.hint
    assert text.strip() not in message


@given(st.text(max_size=300))
def test_parse_key_only_raises_secret_error(text: str) -> None:
    try:
        key = parse_key(text, source="K")
    except SecretError as exc:
        assert len(text.strip()) < 8 or text.strip() not in str(exc)  # short ones may occur in the hint by chance
    else:
        assert len(key) == 32


def test_env_key_opens_the_store(home: Path) -> None:
    env = base64.b64encode(KEY_B).decode()
    with SecretStore.open(home, key=load_or_create_key(home, env)) as s:
        s.set("A", "value-a")
    with SecretStore.open(home, key=KEY_B) as s:
        assert s.get("A") == "value-a"


def test_wrong_key_is_named_as_such(home: Path) -> None:
    with SecretStore.open(home, key=KEY_A) as s:
        s.set("A", TOKEN)
    before = rows(home)
    with SecretStore.open(home, key=KEY_B) as s:
        assert [i.name for i in s.names()] == ["A"]  # names need no key
        for action in (lambda: s.get("A"), s.values, lambda: s.set("B", "other")):
            with pytest.raises(SecretError) as info:
                action()
            assert "key is wrong" in str(info.value) and TOKEN not in str(info.value)
    assert rows(home) == before  # the refused set wrote nothing


def test_bad_key_length_is_refused(home: Path) -> None:
    with pytest.raises(SecretError, match="32 bytes"):
        SecretStore.open(home, key=b"short")


# -- tampering ---------------------------------------------------------------------------


def test_tampered_ciphertext_is_detected(store: SecretStore, home: Path) -> None:
    store.set("A", TOKEN)
    store.set("B", "bee-value")
    conn = sqlite3.connect(home / SECRETS_DB_NAME)
    (ct,) = conn.execute("SELECT ciphertext FROM secrets WHERE name = 'A'").fetchone()
    flipped = bytes([ct[0] ^ 1]) + ct[1:]
    with conn:
        conn.execute("UPDATE secrets SET ciphertext = ? WHERE name = 'A'", (flipped,))
    conn.close()
    with pytest.raises(SecretError) as info:
        store.get("A")
    assert "'A'" in str(info.value) and "altered" in str(info.value) and TOKEN not in str(info.value)
    assert store.get("B") == "bee-value"


def test_swapped_rows_are_detected(store: SecretStore, home: Path) -> None:
    store.set("A", "value-of-a")
    store.set("B", "value-of-b")
    conn = sqlite3.connect(home / SECRETS_DB_NAME)
    a = conn.execute("SELECT nonce, ciphertext FROM secrets WHERE name = 'A'").fetchone()
    b = conn.execute("SELECT nonce, ciphertext FROM secrets WHERE name = 'B'").fetchone()
    with conn:
        conn.execute("UPDATE secrets SET nonce = ?, ciphertext = ? WHERE name = 'A'", b)
        conn.execute("UPDATE secrets SET nonce = ?, ciphertext = ? WHERE name = 'B'", a)
    conn.close()
    for name in ("A", "B"):
        with pytest.raises(SecretError, match="copied from another name"):
            store.get(name)
    with pytest.raises(SecretError):
        store.values()


def test_renamed_row_is_detected(store: SecretStore, home: Path) -> None:
    store.set("A", "value-of-a")
    conn = sqlite3.connect(home / SECRETS_DB_NAME)
    with conn:
        conn.execute("UPDATE secrets SET name = 'Z' WHERE name = 'A'")
    conn.close()
    with pytest.raises(SecretError, match="'Z'"):
        store.get("Z")


# -- names and half-written state ---------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a b", "a/b", "x" * 129, "naïve", "a\nb", "$HOME", None, 5])
def test_invalid_names_are_refused(store: SecretStore, home: Path, name: object) -> None:
    for action in (lambda: store.set(name, "v"), lambda: store.get(name), lambda: store.delete(name)):  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="invalid secret name"):
            action()
    assert rows(home) == []


@given(st.text(max_size=140))
def test_name_validation_is_exactly_the_documented_rule(name: str) -> None:
    import re

    expected = re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", name) is not None
    try:
        validate_name(name)
    except UsageError:
        assert not expected
    else:
        assert expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "non-empty"),
        (None, "non-empty"),
        ("x" * (store_module.MAX_SECRET_BYTES + 1), "longer than"),
        ("a\ud800", "not valid Unicode"),
    ],
)
def test_bad_values_write_nothing(store: SecretStore, home: Path, value: object, message: str) -> None:
    store.set("KEEP", "kept")
    before, gen = rows(home), generation(home)
    with pytest.raises(UsageError, match=message):
        store.set("NEW", value)  # type: ignore[arg-type]
    assert rows(home) == before and generation(home) == gen


def test_locked_database_fails_cleanly_and_writes_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.05)
    with SecretStore.open(home, key=KEY_A) as s:
        s.set("KEEP", "kept")
        version = s.version()
        blocker = sqlite3.connect(home / SECRETS_DB_NAME, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="cannot write the secret store"):
                s.set("NEW", "value")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert [i.name for i in s.names()] == ["KEEP"]
        assert s.version() == version
        s.set("NEW", "value")  # the store is usable again
        assert s.get("NEW") == "value"


def test_corrupt_database_is_a_store_error(home: Path) -> None:
    (home / SECRETS_DB_NAME).write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="unreadable"):
        SecretStore.open(home, key=KEY_A)


# -- change tracking ---------------------------------------------------------------------


def test_version_and_subscribers_follow_changes(store: SecretStore) -> None:
    seen: list[int] = []
    unsubscribe = store.subscribe(lambda: seen.append(store.version()))
    v0 = store.version()
    store.set("A", "1")
    store.set("A", "2")
    store.delete("A")
    assert seen == [v0 + 1, v0 + 2, v0 + 3]
    unsubscribe()
    store.set("B", "3")
    assert len(seen) == 3 and store.version() == v0 + 4


def test_version_sees_other_connections(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "VERSION_POLL_INTERVAL_S", 0.0)
    with SecretStore.open(home, key=KEY_A) as reader, SecretStore.open(home, key=KEY_A) as writer:
        before = reader.version()
        writer.set("A", "x")
        assert reader.version() == before + 1
        assert reader.values() == ["x"]


# -- per-call access ---------------------------------------------------------------------


def test_secret_access_allows_records_and_refuses(store: SecretStore) -> None:
    store.set("GITHUB_TOKEN", TOKEN)
    store.set("OTHER", "other-value")
    access = SecretAccess(store, lambda name: name.startswith("GITHUB"))
    assert access.injected == ()
    assert access.get("GITHUB_TOKEN") == TOKEN
    assert access.find("GITHUB_MISSING") is None
    access.record("Basic " + base64.b64encode(f"me:{TOKEN}".encode()).decode())
    access.get("GITHUB_TOKEN")
    assert access.injected == (TOKEN, "Basic " + base64.b64encode(f"me:{TOKEN}".encode()).decode())
    with pytest.raises(SecretError, match="'OTHER' is not allowed") as info:
        access.get("OTHER")
    assert "other-value" not in str(info.value)
    with pytest.raises(SecretError, match="not allowed"):
        access.find("OTHER")
    with pytest.raises(SecretError, match="no secret named 'GITHUB_GONE'"):
        access.get("GITHUB_GONE")
    assert TOKEN not in repr(access) and TOKEN not in repr(store)


# -- through the CLI ---------------------------------------------------------------------


def test_cli_set_list_rm(tmp_path: Path) -> None:
    home = tmp_path / "cli-home"
    env = {k: v for k, v in os.environ.items() if k != "PINCER_SECRET_KEY"} | {"PINCER_HOME": str(home)}
    pincer = [str(Path(sys.executable).with_name("pincer"))]

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*pincer, *args], input=stdin, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S
        )

    done = run("secrets", "set", "GITHUB_TOKEN", "--json", stdin=TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    listed = run("secrets", "list", "--json")
    assert listed.returncode == 0 and [i["name"] for i in json.loads(listed.stdout)] == ["GITHUB_TOKEN"]
    assert stat.S_IMODE((home / KEY_FILE_NAME).stat().st_mode) == 0o600
    for proc in (done, listed):
        assert TOKEN not in proc.stdout + proc.stderr
    with SecretStore.open(home) as s:
        assert s.get("GITHUB_TOKEN") == TOKEN
    assert run("secrets", "rm", "GITHUB_TOKEN").returncode == 0
    assert run("secrets", "rm", "GITHUB_TOKEN").returncode != 0
