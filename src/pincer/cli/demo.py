"""``pincer demo``: a tour on embedded defaults, in a throwaway PINCER_HOME.

It lists the tools, makes one governed call of each built-in (one of them waits for an
approval, which the demo answers), shows a denial and a leak being redacted, runs the bundled
``code-review`` skill with the agent loop against the local model server (a stand-in for a paid
API: scripted turns over the real OpenAI wire format), and prints the audit trail with its
verification.
"""

from __future__ import annotations

import json
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import typer
from rich.table import Table

from pincer.cli.audit import render_records
from pincer.cli.common import stderr
from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.store.approvals import Answer

if TYPE_CHECKING:
    from pincer.service import Pincer

DEMO_SECRET = "demo-token-7f3a9c41e2b8"


class _EchoHeaders(BaseHTTPRequestHandler):
    """Plays a remote API that carelessly echoes the credential it was sent."""

    def do_GET(self) -> None:
        body = json.dumps({"path": self.path, "authorization": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


def _show(label: str, result: Any) -> None:
    data = result.to_dict()
    shown = data["output"] if data["ok"] else data["error"]
    text = shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)
    colour = "green" if data["ok"] else "red"
    stderr.print(f"[bold]{label}[/] -> [{colour}]{'ok' if data['ok'] else 'refused'}[/] {text[:160]}")


def _review_script() -> list[Any]:
    """What the scripted model does in the demo: read two things in parallel, then report."""
    from pincer.demo.model_server import ScriptedCall, Turn

    return [
        Turn(
            text="Let me look at the notes first.",
            calls=(
                ScriptedCall(name="list_dir", arguments={"path": "notes"}),
                ScriptedCall(name="read_file", arguments={"path": "notes/hello.txt"}),
            ),
            input_tokens=1850, output_tokens=60,
        ),
        Turn(
            text="Review of notes/: hello.txt holds one word and no secrets; nothing to fix. "
            "A test that reads it back would catch an accidental edit.",
            input_tokens=2300, output_tokens=45, cached_tokens=1800,
        ),
    ]  # fmt: skip


async def _skill_run(pincer: Pincer) -> None:
    from pincer.cli.run import Display, Prompter, summary
    from pincer.core.extras import available, install_hint
    from pincer.llm.run import RunRequest

    if not available("agent"):  # the rest of the tour needs only the core
        from rich.markup import escape

        stderr.print(f"[bold]skill run[/]: left out: the agent loop is not installed here ({escape(install_hint('agent'))})")
        return
    stderr.print("[bold]skill run[/]: code-review path=notes (the model is the local scripted server)")
    display = Display()
    run = await pincer.agent.run(
        RunRequest(skill="code-review", params={"path": "notes"}, trigger="demo"),
        on_event=display.on_event,
        on_approval=Prompter(pincer, display).ask,
    )
    display.finish_text()
    stderr.print(summary(run), markup=False, highlight=False)


async def _tour(home: Path, port: int, model_url: str) -> None:
    from pincer.service import Pincer

    config = parse_config(
        f"""
[llm]
model = "gpt-4o-mini"
base_url = "{model_url}"
"""
        + """
[network]
allow_private = true   # the demo's API server listens on loopback

[[grants]]
tool = "http"
effects = { network = "allow", use_secret = "allow" }
hosts = ["127.0.0.1"]

[[credentials]]
secret = "demo_token"
location = "bearer"
host_patterns = ["127.0.0.1"]
""",
        home=home,
    )
    async with Pincer.open(home, config=config, secret_key=b"d" * 32) as pincer:
        pincer.secrets.set("demo_token", DEMO_SECRET)
        table = Table(title="tools", title_justify="left")
        for column in ("name", "runtime", "effects"):
            table.add_column(column)
        for spec in pincer.registry.list():
            table.add_row(spec.name, spec.runtime.value, ", ".join(sorted(e.value for e in spec.effects)) or "-")
        stderr.print(table)

        async def call(tool: str, args: dict[str, Any], label: str | None = None) -> None:
            _show(label or tool, await pincer.call(CallRequest(tool=tool, args=args, caller="demo")))

        await call("echo", {"text": "hello from pincer"})
        await call("time", {"timezone": "UTC"})
        await call("json", {"document": '{"tools": [{"name": "echo"}]}', "path": "tools[0].name"})

        async def approve(approval: Any) -> None:
            stderr.print(f"[yellow]approval {approval.id}[/]: {approval.reason}; the demo answers allow-once")
            await pincer.dispatcher.answer(approval.id, Answer.ALLOW_ONCE, by="demo")

        result = await pincer.call(
            CallRequest(tool="write_file", args={"path": "notes/hello.txt", "content": "hi"}, caller="demo"),
            on_approval=approve,
        )
        _show("write_file (asked, approved once)", result)
        await call("list_dir", {"path": "notes"})
        await call("read_file", {"path": "notes/hello.txt"})
        await call("http", {"url": f"http://127.0.0.1:{port}/user"}, "http (token injected, echoed back, redacted)")
        await call("http", {"url": "https://example.com/"}, "http to a host no grant allows")
        await call("read_file", {"path": "../../etc/passwd"}, "read_file escaping the workspace")
        await _skill_run(pincer)

        stderr.print(render_records([r.to_dict() for r in await pincer.audit.records()]))
        stderr.print(f"audit verify: chain intact over {await pincer.audit.verify()} records")


def demo() -> None:
    """Tour pincer in a throwaway home: tools, governed calls, an approval, a denial, the audit trail."""
    from pincer.demo.model_server import serve_models

    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHeaders)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with tempfile.TemporaryDirectory(prefix="pincer-demo-") as tmp, serve_models(_review_script()) as models:
            anyio.run(_tour, Path(tmp), server.server_address[1], models.openai_url)
    finally:
        server.shutdown()
    raise typer.Exit(0)
