"""Issue 34 item 3, the browser's part: a page that shows a stored secret ``\\u``-escaped.

How it broke: Playwright's snapshot writes text that holds a ``"`` as a quoted YAML string and
doubles every backslash in it (``builtins/browser/snapshot.py`` passes ``aria_snapshot``'s text on
as it is), so the page's ``\\u0070\\u006b...`` reached the dispatcher's scan step as
``\\\\u0070\\\\u006b...``. The scanner decoded ``\\u0070`` after the first backslash and searched
``\\p\\k\\-...``: the secret went to the model. Real Chromium, the real browser built-in, the
real call chain.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pincer.core.values import CallRequest
from tests.builtins.browser_pages import Site, serve_site
from tests.builtins.conftest import pincer_on
from tests.safety.disguises import DISGUISES, revealed

pytestmark = pytest.mark.anyio

SECRET = "pk-Live-Vault-9f3Qz7Wx"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


@pytest.fixture(scope="module")
async def pincer(tmp_path_factory: pytest.TempPathFactory, site: Site) -> AsyncIterator[Any]:
    home = tmp_path_factory.mktemp("browser-disguises")
    config = f"""
[builtins.browser]
enabled = true
base_url = "{site.origin}"

[[grants]]
tool = "browser"
effects = {{ network = "allow" }}
"""
    async with pincer_on(home, config, secrets={"vault_key": SECRET}) as opened:
        yield opened


async def _snapshot_of(pincer: Any, site: Site, path: str, body: str) -> Any:
    navigated = await pincer.call(CallRequest(tool="browser", args={"action": "navigate", "url": site.page(path, body)}))
    assert navigated.ok, navigated.error
    snap = await pincer.call(CallRequest(tool="browser", args={"action": "snapshot"}))
    assert snap.ok, snap.error
    return snap


@pytest.mark.parametrize("how", ["u-escaped", "x-escaped", "octal-escaped"])
async def test_an_escaped_secret_in_a_quoted_snapshot_line_is_redacted(pincer: Any, site: Site, how: str) -> None:
    """Failed on main for ``\\u`` (the snapshot doubled its backslashes), ``\\x`` (likewise) and octal
    (never decoded): the snapshot held the escaped secret and the scan counted 0 redactions."""
    escaped = DISGUISES[how](SECRET)
    snap = await _snapshot_of(pincer, site, f"/quoted-{how}", f'<title>t</title><p>token: "{escaped}"</p>')
    text = snap.output["snapshot"]
    # The attack as it happens: the doubled form is what the scanner is handed.
    assert "[REDACTED:" in text and snap.usage.redactions >= 1, text
    assert escaped.replace("\\", "\\\\") not in text and not revealed(text, SECRET), text
    assert 'token: \\"' in text, "the rest of the line is kept"


@pytest.mark.parametrize("how", ["dash-joined", "fullwidth", "html-decimal", "json-list"])
async def test_a_disguised_secret_on_a_page_is_redacted_from_the_snapshot(pincer: Any, site: Site, how: str) -> None:
    """Failed on main: dash-joined, fullwidth, as HTML references shown as text (``&amp;#112;`` in
    the source) and as a JSON list (quoted, so its quotes escaped), the secret reached the model
    through the snapshot with 0 redactions."""
    leaked = DISGUISES[how](SECRET).replace("&", "&amp;") if how == "html-decimal" else DISGUISES[how](SECRET)
    snap = await _snapshot_of(pincer, site, f"/shown-{how}", f"<title>t</title><p>token: {leaked}</p>")
    assert snap.usage.redactions >= 1 and not revealed(snap.output["snapshot"], SECRET), snap.output


async def test_an_escaped_secret_read_by_evaluate_is_redacted(pincer: Any, site: Site, tmp_path: Path) -> None:
    """The other path out of a page: evaluate's JSON text doubles backslashes as the snapshot does.
    Failed on main as the snapshot did."""
    from pincer.store import Answer

    escaped = DISGUISES["u-escaped"](SECRET)
    await _snapshot_of(pincer, site, "/evaluate", f"<title>t</title><p id=t>{escaped}</p>")

    async def yes(approval: Any) -> None:
        await pincer.dispatcher.answer(approval.id, Answer.ALLOW_ONCE, by="test")

    args = {"action": "evaluate", "expression": "JSON.stringify([document.getElementById('t').textContent])"}
    result = await pincer.call(CallRequest(tool="browser", args=args), on_approval=yes)
    assert result.ok, result.error
    assert result.usage.redactions >= 1 and not revealed(str(result.output), SECRET), result.output
