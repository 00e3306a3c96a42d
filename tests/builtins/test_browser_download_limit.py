"""A download the page never ends is cut at ``[builtins.browser] max_download_bytes`` while it
runs, not after it finishes (which it never does): before the fix the size was read only from
the finished file, so an endless or lying response filled the disk under the browser's profile.
Real Chromium, a real local server streaming for ever."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.values import CallRequest
from tests.builtins.browser_pages import Site, serve_site
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

LIMIT = 2 * 1024 * 1024
WAIT_S = 60.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture(scope="module")
async def pincer(tmp_path_factory: pytest.TempPathFactory, site: Site) -> AsyncIterator[Any]:
    home = tmp_path_factory.mktemp("browser-downloads")
    config = f"""
[builtins.browser]
enabled = true
base_url = "{site.origin}"
max_download_bytes = {LIMIT}

[[grants]]
tool = "browser"
effects = {{ network = "allow", external_write = "allow" }}
"""
    async with pincer_on(home, config) as opened:
        yield opened


async def _call(pincer: Any, **args: Any) -> Any:
    result = await pincer.call(CallRequest(tool="browser", args=args))
    assert result.ok, result.error
    return result


def _bytes_under(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


async def test_an_endless_download_is_cancelled_at_the_limit(pincer: Any, site: Site) -> None:
    site.endless["/forever.bin"] = {"Content-Type": "application/octet-stream",
                                    "Content-Disposition": 'attachment; filename="forever.bin"'}  # fmt: skip
    page = '<title>dl</title><a id="get" href="/forever.bin">Get it</a>'
    site.page("/dl", page)
    await _call(pincer, action="navigate", url=f"{site.origin}/dl")
    snapshot = (await _call(pincer, action="snapshot")).output["snapshot"]
    ref = next(line.split("[ref=")[1].split("]")[0] for line in snapshot.splitlines() if 'link "Get it"' in line)
    await _call(pincer, action="act", kind="click", ref=ref)
    console = ""
    with anyio.fail_after(WAIT_S):
        while "forever.bin" not in console or "[blocked]" not in console:
            await anyio.sleep(0.2)
            console = (await _call(pincer, action="console")).output["text"]
    assert "max_download_bytes" in console, console
    with anyio.fail_after(WAIT_S):  # the browser hung up on the server: the stream stopped
        while "/forever.bin" not in site.hung_up:
            await anyio.sleep(0.2)
    workspace = Path(pincer.config.workspace)
    assert not list(workspace.rglob("*forever*"))
    # Nothing of it is left anywhere under the home (the profile's download folder included).
    with anyio.fail_after(WAIT_S):  # Chromium removes a cancelled download's file soon after
        while (held := _bytes_under(Path(pincer.home) / "browser")) > LIMIT:
            await anyio.sleep(0.2)
    assert held <= LIMIT
