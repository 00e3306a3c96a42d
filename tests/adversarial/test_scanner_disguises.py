"""Issue 34 item 3: the leak scanner missed simple disguises of a stored secret.

How it broke: a stored secret reached the model dash-joined, and ``\\u``-escaped through the
browser snapshot (Playwright's snapshot quotes text holding a ``"`` and doubles every backslash in
it, so ``\\u0070`` arrived as ``\\\\u0070`` and the scanner's escape decoder read a stray
backslash before each character). Called directly, the scanner also missed ``.``, ``_``, ``,``-joined
forms, fullwidth letters, HTML character references (``&#112;``), octal escapes, a JSON list of
the characters, and base64 of the reversed value. Every test here failed on main (the docstring
of each says how); ``tests/safety/disguises.py`` holds the disguises and an oracle written
independently of the scanner.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.values import CallRequest, ToolOutput
from pincer.safety.scanner import LeakScanner
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime, RecordingClient
from tests.safety.disguises import DISGUISES, normal, revealed

SECRET = "pk-Live-Vault-9f3Qz7Wx"  # 22 characters, 19 letters and digits; no well-known shape
ENCODINGS = ("base64", "base32", "hex", "percent", "rot13")


def _leak(how: str) -> str:
    return DISGUISES[how](SECRET)


@pytest.mark.parametrize("how", sorted(DISGUISES))
def test_a_disguised_secret_is_redacted_where_it_stands(how: str) -> None:
    """Failed on main for dash-, dot-, underscore-, comma-, comma-space- and control-joined,
    fullwidth, the three HTML references, octal (single and doubled), doubled ``\\u`` and ``\\x``,
    and the JSON list: the output came back unchanged with 0 redactions."""
    text = f"out: {_leak(how)} end"
    output, count = LeakScanner([SECRET]).scan_text(text)
    assert count >= 1 and not revealed(output, SECRET), output
    # Redacted where it stands, not the whole output replaced.
    assert output.startswith("out: ") and output.endswith(" end"), output


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("form", ["reversed", "normalised"])
def test_encodings_of_the_normalised_and_reversed_secret_are_redacted(form: str, encoding: str) -> None:
    """Failed on main for base64, base32, hex and rot13 of the reversed value and for base64, base32
    and hex of the normalised one (lower case, punctuation gone): the scanner knew the encodings of
    the value as stored only."""
    value = SECRET[::-1] if form == "reversed" else normal(SECRET)
    text = f"out: {DISGUISES[encoding](value)} end"
    output, count = LeakScanner([SECRET]).scan_text(text)
    assert count >= 1 and not revealed(output, SECRET), output
    assert output.startswith("out: ") and output.endswith(" end"), output


# A named reference is read only whole: names are not canonical (``&popf;``, ``&Popf;``, ``&pfr;``
# and ``&pscr;`` are all a p), so taken apart, listed, reversed or rot13 its letters say nothing.
TAKES_APART = {name for name in DISGUISES if name.endswith(("-joined", "-separated"))} | {"json-list", "reversed", "rot13"}


def test_every_composition_of_two_disguises_is_redacted() -> None:
    """Failed on main for 608 of the 676 ordered pairs (base64 of the dash-joined value, the
    fullwidth form \\u-escaped, octal escapes reversed, ...); 11 named-reference pairs are out of
    scope (``TAKES_APART``)."""
    scanner = LeakScanner([SECRET])
    leaked = []
    for outer, wrap in DISGUISES.items():
        for inner, first in DISGUISES.items():
            if inner == "html-named" and outer in TAKES_APART:
                continue
            output, count = scanner.scan_text(f"out: {wrap(first(SECRET))} end")
            if not count or revealed(output, SECRET):
                leaked.append(f"{outer}({inner})")
    assert leaked == []


def test_the_oracle_sees_every_disguise_and_nothing_else() -> None:
    """The checks above mean something only if ``revealed`` finds every leak they plant."""
    for wrap in DISGUISES.values():
        for first in DISGUISES.values():
            assert revealed(f"out: {wrap(first(SECRET))} end", SECRET), wrap(first(SECRET))
    assert not revealed("out: [REDACTED:secret] end pk Live Va d Vault 9f3 e", SECRET)


def test_a_json_list_of_the_characters_is_redacted_as_a_value() -> None:
    """Failed on main: each one-character string was scanned alone, so ``["p", "k", "-", ...]`` as a
    tool's JSON value (not text) passed whole."""
    value = {"chars": list(SECRET), "note": "kept"}
    output, count = LeakScanner([SECRET]).scan(value)
    assert count >= 1 and output["note"] == "kept"
    assert not revealed(json.dumps(output), SECRET), output
    assert not revealed("".join(output["chars"]), SECRET), output


def test_the_disguise_reaches_no_other_secret_of_the_store() -> None:
    """A store of several secrets: each disguise is redacted, and text that only looks alike is not."""
    other = "an-Other-Secret-Value-42"
    scanner = LeakScanner([SECRET, other])
    text = f"a {'-'.join(SECRET)} b {codecs.encode(other[::-1], 'rot13')} c pk Live Va d Vault 9f3 e"
    output, count = scanner.scan_text(text)
    assert count == 2 and not revealed(output, SECRET) and not revealed(output, other), output
    # Pieces shorter than half the secret's 19 letters and digits, apart: ordinary words.
    assert output.endswith(" c pk Live Va d Vault 9f3 e"), output


# -- every path the scanner runs on --------------------------------------------------------------

DISGUISED = "-".join(SECRET)


async def _value(args: dict[str, Any], host: Any) -> Any:
    return {"dashed": DISGUISED, "list": list(SECRET), "escaped": DISGUISES["u-escaped-doubled"](SECRET)}


async def _content(args: dict[str, Any], host: Any) -> Any:
    return ToolOutput(value="see content", content=({"type": "text", "text": f"token {DISGUISES['fullwidth'](SECRET)}"},))


async def _chatty(args: dict[str, Any], host: Any) -> Any:
    await host.client.progress(0.5, 1.0, f"token={DISGUISES['html-decimal'](SECRET)}")
    await host.client.log("info", f"using {DISGUISES['dot-joined'](SECRET)}")
    return "done"


async def _failing(args: dict[str, Any], host: Any) -> Any:
    return ToolOutput(value=f"auth failed for {DISGUISES['octal-escaped'](SECRET)}", is_error=True)


@pytest.fixture
async def pincer(tmp_path: Path) -> AsyncIterator[Pincer]:
    runtime = FuncRuntime()
    runtime.add("value", _value)
    runtime.add("content", _content)
    runtime.add("chatty", _chatty)
    runtime.add("failing", _failing)
    async with Pincer.open(tmp_path, secret_key=b"d" * 32, builtins=False, scripts=False, wasm=False) as opened:
        opened.secrets.set("vault_key", SECRET)
        await opened.add_runtime(runtime)
        yield opened


@pytest.mark.anyio
async def test_the_chain_redacts_disguises_in_values_content_progress_logs_and_errors(pincer: Pincer) -> None:
    """Failed on main: the dash-joined value, the JSON list, the doubled ``\\u`` escapes, the
    fullwidth content block, the HTML-referenced progress text, the dot-joined log line and the
    octal-escaped error all reached the caller."""
    client = RecordingClient()
    value = await pincer.call(CallRequest(tool="value", args={}))
    content = await pincer.call(CallRequest(tool="content", args={}))
    chatty = await pincer.call(CallRequest(tool="chatty", args={}, client=client))
    failing = await pincer.call(CallRequest(tool="failing", args={}))
    assert value.ok and content.ok and chatty.ok and not failing.ok
    assert value.usage.redactions >= 3 and content.usage.redactions >= 1
    for shown in (value.output, content.content, client.messages, failing.error):
        text = json.dumps(shown, ensure_ascii=False)
        assert not revealed(text, SECRET), text
    assert len(client.messages) == 2 and all("[REDACTED:" in m for m in client.messages)


@pytest.mark.anyio
async def test_views_of_stored_history_redact_a_disguise_stored_before_the_secret(tmp_path: Path) -> None:
    """Failed on main: an argument recorded dash-joined before the value became a secret was shown
    whole by ``Pincer.shown`` (what the CLI, REST and dashboard views of the audit log print)."""
    runtime = FuncRuntime()
    runtime.add("echo", _echo)
    async with Pincer.open(tmp_path, secret_key=b"d" * 32, builtins=False, scripts=False, wasm=False) as opened:
        await opened.add_runtime(runtime)
        assert (await opened.call(CallRequest(tool="echo", args={"text": DISGUISED}))).ok
        opened.secrets.set("vault_key", SECRET)
        [record] = [r for r in await opened.audit.records() if r.tool == "echo"]
        assert DISGUISED in json.dumps(record.to_dict()), "the stored row is untouched"
        shown = json.dumps(opened.shown(record.to_dict()), ensure_ascii=False)
    assert not revealed(shown, SECRET), shown


async def _echo(args: dict[str, Any], host: Any) -> Any:
    return "ok"


@pytest.mark.anyio
async def test_an_agent_transcript_redacts_a_disguise_the_model_wrote(tmp_path: Path) -> None:
    """Failed on main: the model's answer (the secret comma-joined and in HTML hex references)
    was stored in the run's transcript as it came."""
    from pincer.demo.model_server import Turn, serve_models
    from pincer.llm import RunRequest
    from tests.llm.conftest import llm_config, open_pincer

    answer = f"here: {DISGUISES['comma-joined'](SECRET)} and {DISGUISES['html-hex'](SECRET)}"
    with serve_models([Turn(text=answer)]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as opened:
            opened.secrets.set("vault_key", SECRET)
            with anyio.fail_after(60):
                run = await opened.agent.run(RunRequest(message="say it"))
            assert run.status == "done"
            stored = json.dumps([m.to_dict() for m in await opened.runs.messages(run.id)], ensure_ascii=False)
    assert "[REDACTED:" in stored and not revealed(stored, SECRET), stored
