"""Issue 34, item 6: hard links carried files out of the workspace.

How it broke: the workspace reader refused symlinks and non-regular files, not a second name for a
file that lives elsewhere. ``ln $PINCER_HOME/secret.key workspace/report.txt`` (or ``audit.key``),
then ``read_file report.txt``, a Slack ``upload_workspace_file``, a Telegram
``send_document_file``/``send_photo_file``, the browser's ``upload`` or a WASM tool's
``workspace_read``: the key's bytes reached the model or left the machine. And with a workspace
that holds PINCER_HOME (``[workspace] path`` the user's home, PINCER_HOME ``~/.pincer``), the
keys were plain files of the workspace: ``read_file .pincer/secret.key`` read the key and
``write_file .pincer/secret.key`` replaced it.

Every reader goes through one opener (runtimes/native/workspace.py) that refuses a regular file
with more than one name and any of pincer's own files (same device and inode as a file at the top
of PINCER_HOME), and every path into PINCER_HOME when the workspace holds it. The Slack and
Telegram stand-ins are the local servers tests/builtins uses; the browser is real Chromium.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pincer.core.errors import Denied
from pincer.core.values import CallRequest, HostContext
from pincer.runtimes.script import ScriptRuntime, ScriptSettings
from pincer.secrets.store import SecretStore
from tests.builtins import fakeslack, faketelegram
from tests.builtins.browser_pages import Site, serve_site
from tests.builtins.conftest import pincer_on
from tests.runtimes.script.conftest import public_dir, settings  # noqa: F401
from tests.runtimes.script.helpers import sandbox_owned_dir
from tests.runtimes.wasm.conftest import wasm_compile_cache, wasm_components, wasm_runtime  # noqa: F401

pytestmark = pytest.mark.anyio

KEY = b"the secret store's key, 32 bytes"
KEYS = ("secret.key", "audit.key")
SLACK_TOKEN, TELEGRAM_TOKEN = fakeslack.TOKEN, faketelegram.TOKEN
GRANTS = """
[[grants]]
tool = "slack"
effects = { network = "allow", use_secret = "allow", external_write = "allow", read_filesystem = "allow" }

[[grants]]
tool = "telegram"
effects = { network = "allow", use_secret = "allow", external_write = "allow", read_filesystem = "allow" }

[[grants]]
tool = "browser"
effects = { network = "allow", external_write = "allow", read_filesystem = "allow" }
"""


def _key_file(home: Path) -> None:
    """The secret store's key file, as `pincer init` leaves it."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "secret.key").write_text(base64.b64encode(KEY).decode() + "\n")
    (home / "secret.key").chmod(0o600)


def _hard_link(home: Path, workspace: Path, key: str, name: str) -> bytes:
    """``ln $PINCER_HOME/KEY workspace/NAME``; the key's bytes."""
    workspace.mkdir(parents=True, exist_ok=True)
    os.link(home / key, workspace / name)
    data = (home / key).read_bytes()
    assert data.strip(), key
    return data


def _refused(result: Any, secret: bytes) -> None:
    """Refused as a hard link, saying what to do, and the key's text nowhere in the result."""
    assert not result.ok, result.output
    assert result.error["code"] == "denied", result.error
    assert "hard link" in result.error["message"], result.error
    hint = result.error["hint"] or ""
    assert ("rm" in hint and "PINCER_HOME" in result.error["message"]) or "cp " in hint, result.error
    shown = json.dumps({"output": result.output, "error": result.error})
    assert secret.strip().decode() not in shown


@pytest.mark.parametrize("key", KEYS)
async def test_read_file_refuses_a_second_name_of_a_key(tmp_path: Path, key: str) -> None:
    _key_file(tmp_path)
    async with pincer_on(tmp_path, GRANTS) as pincer:
        secret = _hard_link(tmp_path, tmp_path / "workspace", key, "report.txt")
        result = await pincer.call(CallRequest(tool="read_file", args={"path": "report.txt"}))
        _refused(result, secret)
        records = json.dumps([dataclasses.asdict(r) for r in await pincer.audit.records()], default=str)
    assert secret.strip().decode() not in records


@pytest.mark.parametrize("key", KEYS)
async def test_a_slack_upload_refuses_a_second_name_of_a_key(tmp_path: Path, key: str) -> None:
    _key_file(tmp_path)
    with fakeslack.serve() as fake:
        config = f'[builtins.slack]\nenabled = true\nbase_url = "{fake.origin}"\n{GRANTS}'
        async with pincer_on(tmp_path, config, secrets={"slack_bot_token": SLACK_TOKEN}) as pincer:
            secret = _hard_link(tmp_path, tmp_path / "workspace", key, "report.txt")
            result = await pincer.call(CallRequest(tool="slack", args={
                "action": "upload_workspace_file", "channel": "C0123ABCD", "path": "report.txt"}))  # fmt: skip
    _refused(result, secret)
    assert fake.seen == [] and fake.uploads == {}


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("action", ["send_document_file", "send_photo_file"])
async def test_a_telegram_upload_refuses_a_second_name_of_a_key(tmp_path: Path, key: str, action: str) -> None:
    _key_file(tmp_path)
    with faketelegram.serve() as fake:
        config = f'[builtins.telegram]\nenabled = true\nbase_url = "{fake.origin}"\n{GRANTS}'
        async with pincer_on(tmp_path, config, secrets={"telegram_bot_token": TELEGRAM_TOKEN}) as pincer:
            secret = _hard_link(tmp_path, tmp_path / "workspace", key, "report.png")
            result = await pincer.call(CallRequest(tool="telegram", args={"action": action, "chat_id": 1,
                                                                          "path": "report.png"}))  # fmt: skip
    _refused(result, secret)
    assert fake.seen == []


async def test_a_hard_link_to_any_file_outside_is_refused_and_a_copy_is_read(tmp_path: Path) -> None:
    """Not only pincer's keys: a second name of ``~/.ssh/id_ed25519`` is the same leak. A copy
    (one name) reads as before."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519").write_text("deploy notes: b3BlbnNzaC1rZXktdjEA\n")
    async with pincer_on(tmp_path / "home", GRANTS) as pincer:
        workspace = Path(pincer.config.workspace)
        workspace.mkdir(parents=True, exist_ok=True)
        os.link(outside / "id_ed25519", workspace / "notes.txt")
        (workspace / "copy.txt").write_bytes((outside / "id_ed25519").read_bytes())
        linked = await pincer.call(CallRequest(tool="read_file", args={"path": "notes.txt"}))
        copied = await pincer.call(CallRequest(tool="read_file", args={"path": "copy.txt"}))
    _refused(linked, b"b3BlbnNzaC1rZXktdjEA")
    assert copied.ok and "b3BlbnNzaC1rZXktdjEA" in copied.output["content"], copied.error


async def test_writing_over_a_second_name_replaces_the_workspace_name_only(tmp_path: Path) -> None:
    """write_file over a file with another name replaces the workspace's name atomically (a new file
    renamed over it): the other name keeps its bytes (this held before the fix too; it is the rule
    the docs promise). Over a second name of one of pincer's own files it is refused, and says so."""
    _key_file(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    outside = tmp_path / "elsewhere" / "outside.txt"
    outside.write_text("the other name's bytes")
    async with pincer_on(tmp_path, GRANTS + '\n[[grants]]\ntool = "write_file"\ndefault = "allow"\n') as pincer:
        workspace = tmp_path / "workspace"
        workspace.mkdir(exist_ok=True)
        os.link(outside, workspace / "notes.txt")
        written = await pincer.call(CallRequest(tool="write_file", args={"path": "notes.txt", "content": "mine"}))
        secret = _hard_link(tmp_path, workspace, "audit.key", "report.txt")
        over_key = await pincer.call(CallRequest(tool="write_file", args={"path": "report.txt", "content": "mine"}))
    assert written.ok, written.error
    assert outside.read_text() == "the other name's bytes"
    assert (workspace / "notes.txt").read_text() == "mine" and os.stat(workspace / "notes.txt").st_nlink == 1
    assert not over_key.ok and over_key.error["code"] == "denied", over_key.error
    assert "audit.key" in over_key.error["message"] and "rm" in over_key.error["hint"], over_key.error
    assert (tmp_path / "audit.key").read_bytes() == secret


@pytest.fixture
def user_home(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace that holds PINCER_HOME: ``[workspace] path`` the user's home, PINCER_HOME in it."""
    user = tmp_path / "user"
    home = user / ".pincer"
    _key_file(home)
    (user / "notes.txt").write_text("my notes\n")
    return user, home


@pytest.mark.parametrize("path", [".pincer/secret.key", ".pincer/audit.key", ".pincer/config.toml"])
async def test_a_workspace_that_holds_pincer_home_does_not_read_pincers_files(user_home: tuple[Path, Path], path: str) -> None:
    user, home = user_home
    config = f'[workspace]\npath = "{user}"\n{GRANTS}'
    async with pincer_on(home, config) as pincer:
        (home / "config.toml").write_text(config)
        secret = (user / path).read_bytes()
        read = await pincer.call(CallRequest(tool="read_file", args={"path": path}))
        listed = await pincer.call(CallRequest(tool="list_dir", args={"path": ".pincer"}))
        notes = await pincer.call(CallRequest(tool="read_file", args={"path": "notes.txt"}))
    assert not read.ok and read.error["code"] == "denied", read.error
    assert "PINCER_HOME" in read.error["message"] and "[workspace] path" in read.error["hint"], read.error
    assert secret.strip().decode()[:20] not in json.dumps(read.error)
    assert not listed.ok and listed.error["code"] == "denied", listed.error
    assert notes.ok and notes.output["content"] == "my notes\n", notes.error


@pytest.mark.parametrize("path", [".pincer/secret.key", ".pincer/tools/script/shout.toml"])
async def test_a_workspace_that_holds_pincer_home_does_not_write_into_it(user_home: tuple[Path, Path], path: str) -> None:
    """``write_file .pincer/secret.key`` replaced the secret store's key (every secret lost); a
    manifest written into ``.pincer/tools/script`` is a tool installed behind the operator's back."""
    user, home = user_home
    config = f'[workspace]\npath = "{user}"\n{GRANTS}\n[[grants]]\ntool = "write_file"\ndefault = "allow"\n'
    before = (home / "secret.key").read_bytes()
    async with pincer_on(home, config) as pincer:
        written = await pincer.call(CallRequest(tool="write_file", args={"path": path, "content": "AAAA"}))
    assert not written.ok and written.error["code"] == "denied", written.error
    assert (home / "secret.key").read_bytes() == before
    assert not (home / "tools" / "script" / "shout.toml").exists()


async def test_pincers_own_file_with_one_name_is_refused_by_its_inode(tmp_path: Path) -> None:
    """PINCER_HOME's secret.key is a link to a vault folder, and the workspace is that folder: the
    key's one name is a plain file of the workspace (st_nlink 1, not in PINCER_HOME), found by its
    device and inode."""
    vault, home = tmp_path / "vault", tmp_path / "home"
    _key_file(vault)
    home.mkdir()
    (home / "secret.key").symlink_to(vault / "secret.key")
    config = f'[workspace]\npath = "{vault}"\n{GRANTS}\n[[grants]]\ntool = "write_file"\ndefault = "allow"\n'
    before = (vault / "secret.key").read_bytes()
    async with pincer_on(home, config) as pincer:
        read = await pincer.call(CallRequest(tool="read_file", args={"path": "secret.key"}))
        written = await pincer.call(CallRequest(tool="write_file", args={"path": "secret.key", "content": "AAAA"}))
    _refused(read, before)
    assert "PINCER_HOME's secret.key" in read.error["message"], read.error
    assert not written.ok and written.error["code"] == "denied", written.error
    assert (vault / "secret.key").read_bytes() == before


# -- the browser's upload, in real Chromium ------------------------------------------------------


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def browser_pincer(tmp_path_factory: pytest.TempPathFactory, site: Site) -> AsyncIterator[Any]:
    home = tmp_path_factory.mktemp("hard-links-browser")
    _key_file(home)
    config = f'[builtins.browser]\nenabled = true\nbase_url = "{site.origin}"\n{GRANTS}'
    async with pincer_on(home, config) as opened:
        yield opened


@pytest.mark.parametrize("key", KEYS)
async def test_the_browser_upload_refuses_a_second_name_of_a_key(browser_pincer: Any, site: Site, key: str) -> None:
    home = Path(browser_pincer.config.home)
    page = """<title>Upload</title><form method="post" action="/uploaded" enctype="multipart/form-data">
    <label>Report <input type="file" name="report"></label><button type="submit">Send</button></form>"""
    site.page("/uploaded", "<title>Got it</title>")

    async def browse(**args: Any) -> Any:
        return await browser_pincer.call(CallRequest(tool="browser", args=args))

    assert (await browse(action="navigate", url=site.page("/upload", page))).ok
    name = f"{key}.txt"
    secret = _hard_link(home, Path(browser_pincer.config.workspace), key, name)
    snapshot = (await browse(action="snapshot")).output["snapshot"]
    field = re.search(r'Report.*?\[ref=(\w+)\]', snapshot)
    assert field, snapshot
    uploaded = await browse(action="upload", ref=field.group(1), paths=[name])
    _refused(uploaded, secret)
    send = re.search(r'button "Send".*?\[ref=(\w+)\]', (await browse(action="snapshot")).output["snapshot"])
    assert send
    await browse(action="act", kind="click", ref=send.group(1))
    assert all(secret.strip().decode() not in json.dumps(post) for post in site.posts)


# -- a WASM tool's workspace_read ------------------------------------------------------------------


async def test_a_wasm_tools_workspace_read_gets_nothing_for_a_second_name(
    wasm_runtime: Any, tmp_path: Path  # noqa: F811
) -> None:
    home = tmp_path / "home"
    _key_file(home)
    (home / "audit.key").write_text(base64.b64encode(b"the audit key: 32 bytes, no more").decode() + "\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "plain.txt").write_text("plain words")
    keys = {key: _hard_link(home, workspace, key, f"{key}.txt") for key in KEYS}
    runtime = await wasm_runtime({"secret_echo": {"workspace": {"allowed_prefixes": []}}})
    spec = next(s for s in runtime.tools() if s.name == "secret_echo")
    store = SecretStore.open(tmp_path / "secrets", key=os.urandom(32))
    try:
        host = HostContext(session="main", tool="secret_echo", workspace=workspace, home=home,
                           capabilities=spec.capabilities, timeout_s=60.0)  # fmt: skip
        out = await runtime.invoke(spec, {"paths": ["plain.txt", *(f"{key}.txt" for key in KEYS)]}, host)
    finally:
        store.close()
    files: Mapping[str, Any] = out.value["files"]
    assert files["plain.txt"] == "plain words"
    for key, secret in keys.items():
        assert files[f"{key}.txt"] is None, key
        assert secret.strip().decode() not in json.dumps([out.value, out.logs])


# -- a sandbox that mounts the workspace (script tools and exec with [sandbox] use_workspace) ------


@pytest.mark.parametrize("layout", ["hard link", "home inside"])
async def test_a_sandbox_does_not_mount_a_workspace_where_a_key_can_be_read(
    settings: ScriptSettings, public_dir: Path, layout: str  # noqa: F811
) -> None:
    """A sandbox is not asked per file: with a second name of the key in the workspace, or
    PINCER_HOME inside it, ``exec cat`` printed the key. Pincer not running as root runs the sandbox
    as its own uid, which reads the 0600 key; here (root, sandbox uid 65534) the key is made
    readable by others to stand for that."""
    workspace = sandbox_owned_dir(public_dir / "ws")
    home = public_dir / "home" if layout == "hard link" else workspace / ".pincer"
    _key_file(home)
    os.chmod(home, 0o755)
    (home / "secret.key").chmod(0o644)
    secret = (home / "secret.key").read_bytes()
    seen = "report.txt" if layout == "hard link" else ".pincer/secret.key"
    if layout == "hard link":
        os.link(home / "secret.key", workspace / "report.txt")
    runtime = ScriptRuntime([], dataclasses.replace(settings, use_workspace=True))
    spec = next(s for s in runtime.tools() if s.name == "exec")
    host = HostContext(session="agent", tool="exec", workspace=workspace, home=home, timeout_s=60.0)
    with pytest.raises(Denied) as caught:  # before the sandbox starts (on main: it ran and printed the key)
        await runtime.invoke(spec, {"command": f"cat /work/{seen}"}, host)
    refused = caught.value
    assert secret.strip().decode() not in str(refused)
    assert ("report.txt is PINCER_HOME's secret.key" if layout == "hard link" else "holds PINCER_HOME") in refused.message
    assert "rm" in (refused.hint or "") and "[workspace] path" in (refused.hint or "")
    (workspace / "plain.txt").write_text("plain words\n")
    if layout == "hard link":  # once the second name is gone the workspace is mounted again
        os.unlink(workspace / "report.txt")
        out = await runtime.invoke(spec, {"command": "cat /work/plain.txt"}, host)
        assert out.value["stdout"] == "plain words\n", out.value
