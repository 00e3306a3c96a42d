"""The browser's actions with real Chromium on pages the test serves (one Chromium for the module):
a form filled and submitted by refs, a workspace file uploaded, a dialog accepted, a PNG of the
viewport's size, a PDF, a stale ref, evaluate asking, /etc/passwd refused, sessions not sharing
cookies, a grant host with a port allowing only that port, a secret on a page redacted."""

from __future__ import annotations

import base64
import os
import re
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.values import CallRequest
from pincer.store import Answer
from tests.builtins.browser_pages import Site, serve_site
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

SECRET = "sk-browserTestSecret0123456789abcdef"
DOWNLOAD_LIMIT = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture(scope="module")
async def pincer(tmp_path_factory: pytest.TempPathFactory, site: Site) -> AsyncIterator[Any]:
    home = tmp_path_factory.mktemp("browser-actions")
    config = f"""
[builtins.browser]
enabled = true
base_url = "{site.origin}"
max_download_bytes = {DOWNLOAD_LIMIT}

[[grants]]
tool = "browser"
effects = {{ network = "allow", external_write = "allow" }}

# OpenClaw's sandbox default denies the browser to other sessions; these two are let in.
[sessions.alice]
kind = "main"

[sessions.bob]
kind = "main"
"""
    async with pincer_on(home, config, secrets={"page_token": SECRET}) as opened:
        yield opened


async def call(pincer: Any, session: str = "main", on_approval: Any = None, **args: Any) -> Any:
    return await pincer.call(CallRequest(session=session, tool="browser", args=args), on_approval=on_approval)


def ref_of(snapshot: str, role_and_name: str) -> str:
    match = re.search(re.escape(role_and_name) + r".*?\[ref=(\w+)\]", snapshot)
    assert match, f"{role_and_name!r} not in snapshot:\n{snapshot}"
    return match.group(1)


FORM = """<title>Sign up</title>
<form method="post" action="/signed-up">
  <label>Name <input name="name"></label>
  <label>Plan <select name="plan"><option value="free">Free</option><option value="pro">Pro</option></select></label>
  <button type="submit">Sign up</button>
</form>"""


async def test_a_form_is_filled_and_submitted_by_refs(pincer: Any, site: Site) -> None:
    site.page("/signed-up", "<title>Thanks</title><p>Signed up</p>")
    assert (await call(pincer, action="navigate", url=site.page("/form", FORM))).ok
    snap = (await call(pincer, action="snapshot")).output["snapshot"]
    name, plan, button = (
        ref_of(snap, 'textbox "Name"'),
        ref_of(snap, 'combobox "Plan"'),
        ref_of(snap, 'button "Sign up"'),
    )
    assert (await call(pincer, action="act", kind="fill", ref=name, text="Ada Lovelace")).ok
    assert (await call(pincer, action="act", kind="select", ref=plan, values=["pro"])).ok
    clicked = await call(pincer, action="act", kind="click", ref=button)
    assert clicked.ok, clicked.error
    assert site.posts[-1] == {"name": ["Ada Lovelace"], "plan": ["pro"]}
    assert clicked.output["title"] == "Thanks"


async def test_a_ref_from_before_a_navigation_is_stale(pincer: Any, site: Site) -> None:
    await call(pincer, action="navigate", url=site.page("/form2", FORM))
    snap = (await call(pincer, action="snapshot")).output["snapshot"]
    button = ref_of(snap, 'button "Sign up"')
    await call(pincer, action="navigate", url=site.page("/elsewhere", "<title>x</title><p>other page</p>"))
    stale = await call(pincer, action="act", kind="click", ref=button)
    assert not stale.ok and stale.error["code"] == "stale_ref"
    assert "snapshot again" in stale.error["hint"]


async def test_a_workspace_file_is_uploaded_and_etc_passwd_is_refused(pincer: Any, site: Site) -> None:
    page = """<title>Upload</title><form method="post" action="/uploaded" enctype="multipart/form-data">
    <label>Report <input type="file" name="report"></label><button type="submit">Send</button></form>"""
    site.page("/uploaded", "<title>Got it</title>")
    await call(pincer, action="navigate", url=site.page("/upload", page))
    (Path(pincer.config.workspace) / "report.txt").write_text("quarterly numbers\n")
    snap = (await call(pincer, action="snapshot")).output["snapshot"]
    field_ref = ref_of(snap, 'button "Report"') if 'button "Report"' in snap else ref_of(snap, "Report")
    refused = await call(pincer, action="upload", ref=field_ref, paths=["/etc/passwd"])
    assert not refused.ok and refused.error["code"] == "denied" and "workspace" in refused.error["message"]
    sneaky = await call(pincer, action="upload", ref=field_ref, paths=["../../../../etc/passwd"])
    assert not sneaky.ok and sneaky.error["code"] == "denied"
    uploaded = await call(pincer, action="upload", ref=field_ref, paths=["report.txt"])
    assert uploaded.ok, uploaded.error
    send = ref_of((await call(pincer, action="snapshot")).output["snapshot"], 'button "Send"')
    assert (await call(pincer, action="act", kind="click", ref=send)).ok
    body = site.posts[-1]["_raw"][0]
    assert 'filename="report.txt"' in body and "quarterly numbers" in body and "root:" not in body


async def test_a_dialog_is_accepted(pincer: Any, site: Site) -> None:
    page = """<title>Dialog</title><button onclick="document.getElementById('out').textContent =
    confirm('Really?') ? 'confirmed' : 'cancelled'">Ask</button><p id="out">nothing yet</p>"""
    await call(pincer, action="navigate", url=site.page("/dialog", page))
    ask = ref_of((await call(pincer, action="snapshot")).output["snapshot"], 'button "Ask"')
    await call(pincer, action="act", kind="click", ref=ask)  # not armed: dismissed
    assert "cancelled" in (await call(pincer, action="snapshot")).output["snapshot"]
    assert (await call(pincer, action="dialog", accept=True)).ok
    await call(pincer, action="act", kind="click", ref=ask)
    assert "confirmed" in (await call(pincer, action="snapshot")).output["snapshot"]
    console = (await call(pincer, action="console")).output["text"]
    assert "'Really?' dismissed" in console and "'Really?' accepted" in console


async def test_a_screenshot_is_a_png_of_the_viewport_and_a_pdf_is_produced(pincer: Any, site: Site) -> None:
    await call(pincer, action="navigate", url=site.page("/shot", "<title>shot</title><h1>Picture me</h1>"))
    shot = await call(pincer, action="screenshot")
    assert shot.ok, shot.error
    image = next(b for b in shot.content if b["type"] == "image")
    png = base64.b64decode(image["data"])
    assert image["mimeType"] == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1280, 720)
    pdf = await call(pincer, action="pdf")
    assert pdf.ok, pdf.error
    blob = base64.b64decode(pdf.content[0]["resource"]["blob"])
    assert blob.startswith(b"%PDF-") and pdf.output["bytes"] == len(blob)


async def test_evaluate_asks_by_default(pincer: Any, site: Site) -> None:
    await call(pincer, action="navigate", url=site.page("/eval", "<title>eval</title>"))
    asked: list[Any] = []

    async def person(approval: Any) -> None:
        asked.append(approval)
        await pincer.dispatcher.answer(approval.id, Answer.DENY, by="test")

    result = await call(pincer, on_approval=person, action="evaluate", expression="document.title")
    assert [a.tool for a in asked] == ["browser"] and "execute_code" in asked[0].reason
    assert not result.ok and result.error["code"] == "approval_denied"

    async def yes(approval: Any) -> None:
        await pincer.dispatcher.answer(approval.id, Answer.ALLOW_ONCE, by="test")

    allowed = await call(pincer, on_approval=yes, action="evaluate", expression="document.title")
    assert allowed.ok and allowed.output["result"] == "eval"


async def test_a_secret_shown_by_a_page_is_redacted(pincer: Any, site: Site) -> None:
    await call(pincer, action="navigate", url=site.page("/leak", f"<title>leak</title><p>token: {SECRET}</p>"))
    snap = await call(pincer, action="snapshot")
    assert SECRET not in str(snap.output) and snap.usage.redactions >= 1


async def test_two_sessions_do_not_share_cookies(pincer: Any, site: Site) -> None:
    set_cookie = site.page("/login", "<title>in</title>", headers={"Set-Cookie": "sid=alice-session; Path=/"})
    for session, url in (
        ("alice", set_cookie),
        ("alice", site.page("/whoami-a", "<title>a</title>")),
        ("bob", site.page("/whoami-b", "<title>b</title>")),
    ):
        result = await call(pincer, session=session, action="navigate", url=url)
        assert result.ok, result.error
    seen = dict(zip(site.hits, site.cookies, strict=True))
    assert "sid=alice-session" in seen["/whoami-a"]
    assert "sid=" not in seen["/whoami-b"]
    status = (await call(pincer, action="status")).output
    assert status["running"] and status["sessions"] >= 3
    if os.geteuid() == 0:  # Chromium refuses its sandbox for root: said, not hidden
        assert status["sandbox"] is False and "root" in status["sandbox_note"]
    else:
        assert status["sandbox"] is True


async def test_a_download_lands_in_the_workspace_and_a_link_opens_a_tab(pincer: Any, site: Site) -> None:
    site.routes["/file.csv"] = (
        200,
        {"Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="../../evil.csv"'},
        b"a,b\n1,2\n",
    )
    site.page("/popped", "<title>Popped</title>")
    page = '<title>dl</title><a href="/file.csv">Get the data</a> <a href="/popped" target="_blank">New tab</a>'
    await call(pincer, action="navigate", url=site.page("/dl", page))
    snap = (await call(pincer, action="snapshot")).output["snapshot"]
    assert (await call(pincer, action="act", kind="click", ref=ref_of(snap, 'link "Get the data"'))).ok
    workspace = Path(pincer.config.workspace)
    console = ""
    with anyio.fail_after(30):  # the download finishes after the click returns; console says when
        while "[download] saved" not in console:
            await anyio.sleep(0.1)
            console = (await call(pincer, action="console")).output["text"]
    [saved] = (workspace / "downloads").glob("*evil.csv")
    assert saved.read_bytes() == b"a,b\n1,2\n" and saved.parent == workspace / "downloads"
    assert not (workspace.parent / "evil.csv").exists()
    assert f"as downloads/{saved.name} (8 bytes)" in console
    before = len((await call(pincer, action="tabs")).output["tabs"])
    assert (await call(pincer, action="act", kind="click", ref=ref_of(snap, 'link "New tab"'))).ok
    tabs: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        while not any(t["url"].endswith("/popped") for t in tabs):
            tabs = (await call(pincer, action="tabs")).output["tabs"]
            await anyio.sleep(0.1)
    assert len(tabs) == before + 1
    popped = next(t for t in tabs if t["url"].endswith("/popped"))
    assert (await call(pincer, action="close", target_id=popped["id"])).ok


def _bytes_under(root: Path) -> int:
    return sum(f.stat().st_size for f in root.iterdir() if f.is_file())


async def test_an_endless_download_is_cancelled_at_the_limit(pincer: Any, site: Site) -> None:
    """A download the page never ends is cut at ``max_download_bytes`` while it runs: before the
    fix the size was read only from the finished file, so an endless (or lying) body filled the
    disk under the browser's profile."""
    site.endless["/forever.bin"] = {"Content-Type": "application/octet-stream",
                                    "Content-Disposition": 'attachment; filename="forever.bin"'}  # fmt: skip
    await call(pincer, action="navigate", url=site.page("/dl-forever", '<title>dl</title><a href="/forever.bin">Get it</a>'))
    snapshot = (await call(pincer, action="snapshot")).output["snapshot"]
    assert (await call(pincer, action="act", kind="click", ref=ref_of(snapshot, 'link "Get it"'))).ok
    console = ""
    with anyio.fail_after(30):
        while "forever.bin" not in console or "[blocked]" not in console:
            await anyio.sleep(0.2)
            console = (await call(pincer, action="console")).output["text"]
    assert "max_download_bytes" in console, console
    with anyio.fail_after(30):  # the browser hung up on the server: the stream stopped
        while "/forever.bin" not in site.hung_up:
            await anyio.sleep(0.2)
    workspace = Path(pincer.config.workspace)
    assert not list(workspace.rglob("*forever*"))
    # The folder Chromium wrote it to (in the launch's profile) holds no more than the limit.
    [running] = Path(pincer.home).glob("browser/*/downloads")
    # Chromium removes the cancelled file's bytes a moment after the cancel (later on a busy
    # machine); an uncut download would keep growing past the limit instead.
    with anyio.fail_after(30):
        while _bytes_under(running) > DOWNLOAD_LIMIT:
            await anyio.sleep(0.2)
