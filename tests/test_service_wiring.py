"""The subsystems below the service receive the few typed services they use, never the whole ``Pincer``.

Before (issue 40 item 2) the hub's agent tools, the builder, the agent loop, ``run_skill``, the
trigger engine and its starter were each handed the whole service and restated its shape as a
Protocol of their own (``HubHost``, ``BuilderHost``, ``AgentHost``, ``RunnerHost``,
``DelegateHost``, ``EngineHost``); run against that tree this test listed 18 findings in 7
modules. Now the
service builds one frozen services value per subsystem (``Pincer.agent_services()`` and its
siblings, service.py) and hands that down.

What counts as holding the service, in a module of the packages below it:

- an import of ``pincer.service``;
- a parameter, attribute or variable annotated with ``Pincer``;
- a parameter or attribute named ``pincer`` (what the service is called wherever it is held; the
  restated Protocols were all received under that name).

The gateway's entry points build or wire the service and are allowed, each for the reason given.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "pincer"
# packages, and single modules below the service (reload.py follows the home for it)
BELOW = ("llm", "hub", "builder", "triggers", "gateway", "reload.py")

# path (under src/pincer) -> why it may hold the Pincer
ALLOWED: dict[str, str] = {
    "gateway/services.py": "the gateway's one wiring place: makes each part's services value of the open Pincer",
    "gateway/app.py": "the app factory (create_app): turns the open Pincer into the gateway's parts",
    "gateway/serve.py": "pincer serve's entry point: opens the gateway over the Pincer the CLI opened",
    "gateway/stdio.py": "pincer mcp stdio's entry point: serves the Pincer the CLI opened over stdin/stdout",
}


def _names_pincer(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for part in ast.walk(node):
        if isinstance(part, ast.Name) and part.id == "Pincer":
            return True
        if isinstance(part, ast.Attribute) and part.attr == "Pincer":
            return True
        if isinstance(part, ast.Constant) and isinstance(part.value, str) and "Pincer" in part.value.replace("[", " ").replace("|", " ").split():
            return True
    return False


def findings_in(path: Path, rel: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []

    def say(node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        found.append((line, f"{rel}:{line}: {what}"))

    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module == "pincer.service") or (isinstance(node, ast.Import) and any(alias.name == "pincer.service" for alias in node.names)):
            say(node, "imports pincer.service")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is None:
                    continue
                if _names_pincer(arg.annotation):
                    say(arg, f"{node.name}() takes {arg.arg}: Pincer")
                elif arg.arg == "pincer":
                    say(arg, f"{node.name}() takes the service as 'pincer' ({ast.unparse(arg.annotation) if arg.annotation else 'unannotated'})")
            if _names_pincer(node.returns):
                say(node, f"{node.name}() returns the Pincer")
        elif isinstance(node, ast.AnnAssign) and _names_pincer(node.annotation):
            say(node, f"{ast.unparse(node.target)} is annotated Pincer")
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == "pincer":
                    say(node, f"keeps the service in {ast.unparse(target)}")
    return [text for _, text in sorted(found)]


def service_holders() -> list[str]:
    found: list[str] = []
    for package in BELOW:
        target = SRC / package
        for path in [target] if target.is_file() else sorted(target.rglob("*.py")):
            rel = path.relative_to(SRC).as_posix()
            if rel in ALLOWED:
                continue
            found.extend(findings_in(path, rel))
    return found


def test_no_subsystem_below_the_service_holds_the_pincer() -> None:
    found = service_holders()
    print(f"{len(found)} finding(s)")
    for line in found:
        print(line)
    assert not found, "hand these the services value they use (service.py builds them):\n" + "\n".join(found)


def test_every_allowed_entry_point_still_exists_and_holds_the_pincer() -> None:
    """An allow-list entry whose file no longer holds the service is stale: it would let a
    later change slip through unseen."""
    for rel in ALLOWED:
        path = SRC / rel
        assert path.is_file(), f"{rel} is allowed but no longer exists"
        assert findings_in(path, rel), f"{rel} is allowed but holds no Pincer any more: remove it from ALLOWED"


def test_the_guard_sees_each_way_of_holding_the_service(tmp_path: Path) -> None:
    """The checker itself: each pattern it is for is found, and a services value is not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from __future__ import annotations\n"
        "from pincer.service import Pincer\n"
        "import pincer.service\n"
        "def a(p: Pincer) -> None: ...\n"
        "def b(pincer: object) -> None: ...\n"
        "def c(*, x: 'Pincer | None') -> None: ...\n"
        "def d() -> Pincer: ...\n"
        "class E:\n"
        "    held: Pincer\n"
        "    def __init__(self, services: object) -> None:\n"
        "        self.pincer = services\n"
        "def fine(services: AgentServices, pincers: int) -> None: ...\n",
        encoding="utf-8",
    )
    found = findings_in(sample, "sample.py")
    assert [line.split(":")[1] for line in found] == ["2", "3", "4", "5", "6", "7", "9", "11"], found
