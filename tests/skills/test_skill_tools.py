"""Skill tools run in the sandbox through the call chain and are audited; the ``skill`` tool
returns rendered instructions, files and attenuated tools; dependencies install in the sandbox
with network limited to the registry (npm from the real registry, pip from a local index)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.service import Pincer
from tests.skills.conftest import write_skill

pytestmark = pytest.mark.anyio
KEY = b"k" * 32

WORD_COUNT = """
capabilities:
  word_count:
    effects: [read_filesystem]
"""
WORD_COUNT_BODY = """# Words

## capability: word_count
Count the words of a text.

### Inputs
- text (string, required): the text
- unique (boolean): distinct words only
"""
SCRIPT = """import argparse, json, os, sys
p = argparse.ArgumentParser()
p.add_argument("--text", required=True)
p.add_argument("--unique", default="false")
a = p.parse_args()
words = a.text.split()
if a.unique == "true":
    words = set(words)
print(json.dumps({"count": len(words), "uid": os.getuid(), "cwd": os.getcwd(), "skill_dir": os.environ.get("SKILL_DIR")}))
"""


def config_for(home: Path, extra: str = "") -> object:
    return parse_config(extra, home=home)


async def test_a_skill_tool_runs_in_the_sandbox_through_the_call_chain_and_is_audited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    home = tmp_path / "home"
    skill_md = write_skill(home / "workspace" / "skills", "words", WORD_COUNT, WORD_COUNT_BODY)
    (skill_md.parent / "scripts").mkdir()
    (skill_md.parent / "scripts" / "word_count.py").write_text(SCRIPT)
    write_skill(home / "workspace" / "skills", "no-code", body="## capability: nothing\nDoes nothing.\n")
    async with Pincer.open(home, config=config_for(home), secret_key=KEY, external=False, wasm=False) as pincer:
        assert "words.word_count" in pincer.registry
        assert not [n for n in (s.name for s in pincer.registry.list()) if n.startswith("no-code")]
        spec = pincer.registry.get("words.word_count")
        assert spec.input_schema["required"] == ["text"] and spec.runtime.value == "script"
        result = await pincer.call(CallRequest(tool="words.word_count", args={"text": "a b a c", "unique": True}))
        assert result.ok, result.error
        out = json.loads(result.output["stdout"])
        assert out["count"] == 3 and out["skill_dir"] == "/skill" and out["cwd"] == "/work"
        assert out["uid"] == 65534 or out["uid"] != 0
        denied = await pincer.call(CallRequest(tool="words.word_count", args={"text": 5}))
        assert not denied.ok and denied.error["code"] == "invalid_arguments"
        records = [r for r in await pincer.audit.records() if r.tool == "words.word_count"]
        assert [r.outcome for r in records] == ["ok", "error"] and records[0].session == "main"


async def test_the_skill_tool_returns_instructions_files_and_attenuated_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    home = tmp_path / "home"
    installed = write_skill(
        home / "installed" / "skills", "helper",
        "allowed-tools: read_file write_file http\nparameters:\n  - {name: target, type: string, required: true}",
        "Work on {{ target }} in {baseDir}.\n",
    )  # fmt: skip
    (installed.parent / "references").mkdir()
    (installed.parent / "references" / "guide.md").write_text("guide")
    write_skill(home / "skills", "needs-bin", "requires: {bins: [definitely-not-installed-here]}")
    grants = '[[grants]]\ntool = "skill:other"\ndefault = "allow"\n'
    async with Pincer.open(home, config=config_for(home, grants), secret_key=KEY, external=False, wasm=False, scripts=False) as pincer:
        result = await pincer.call(CallRequest(tool="skill", args={"name": "helper", "params": {"target": "docs"}}))
        assert result.ok, result.error
        out = result.output
        assert out["instructions"] == f"Work on docs in {installed.parent}.\n" and out["trust"] == "installed"
        assert [f["path"] for f in out["files"]] == ["SKILL.md", "references/guide.md"]
        # Read-only means no network writes: http's POST is external_write, so http is withheld too.
        assert out["tools"]["allowed"] == ["read_file"] and out["tools"]["attenuated"]
        assert sorted(w["tool"] for w in out["tools"]["withheld"]) == ["http", "write_file"]
        missing = await pincer.call(CallRequest(tool="skill", args={"name": "helper"}))
        assert missing.error["code"] == "invalid_arguments" and "needs parameter 'target'" in missing.error["message"]
        ineligible = await pincer.call(CallRequest(tool="skill", args={"name": "needs-bin"}))
        assert ineligible.error["code"] == "denied" and "definitely-not-installed-here on PATH" in ineligible.error["message"]
        unknown = await pincer.call(CallRequest(tool="skill", args={"name": "ghost"}))
        assert unknown.error["code"] == "skill_not_found"
        assert [r.tool for r in await pincer.audit.records()] == ["skill"] * 4


NPM_SKILL = """
capabilities:
  check:
    effects: []
"""
NPM_BODY = "## capability: check\nIs it a number?\n\n### Inputs\n- value (string, required): the value\n"
NPM_SCRIPT = """const isNumber = require("is-number");
const arg = process.argv.find((a) => a.startsWith("--value=")).slice(8);
console.log(JSON.stringify({ value: arg, isNumber: isNumber(arg) }));
"""


async def test_npm_dependencies_install_in_the_sandbox_from_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    home = tmp_path / "home"
    skill_md = write_skill(home / "skills", "numbers", NPM_SKILL, NPM_BODY)
    (skill_md.parent / "package.json").write_text(json.dumps({"name": "numbers", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}))
    (skill_md.parent / "src").mkdir()
    (skill_md.parent / "src" / "check.js").write_text(NPM_SCRIPT)
    # This machine reaches the npm registry through an address in 203.0.113.0/24, which the
    # sandbox proxy counts as private: allow_private lets it through (the allowlist still holds).
    config = config_for(home, "[network]\nallow_private = true\n[skills]\nauto_install_deps = false\n")
    async with Pincer.open(home, config=config, secret_key=KEY, external=False, wasm=False, builtins=False) as pincer:
        reason = pincer.skills.eligibility_of("numbers").reason
        assert "dependencies (package.json) are not installed: run `pincer skills deps numbers`" in reason
        assert "numbers.check" not in pincer.registry
        result = await pincer.install_skill_deps("numbers")
        assert result.managers == ("npm",)
        installed = home / "skill-deps" / "numbers" / "node_modules" / "is-number" / "package.json"
        assert json.loads(installed.read_text())["version"] == "7.0.0"
        assert not (skill_md.parent / "node_modules").exists()  # never into the skill's source folder
        assert pincer.skills.eligibility_of("numbers").is_eligible
        assert "numbers.check" in pincer.registry
        called = await pincer.call(CallRequest(tool="numbers.check", args={"value": "42"}))
        assert called.ok, called.error
        assert json.loads(called.output["stdout"]) == {"value": "42", "isNumber": True}


# -- pip from a local index (the registry host is the only one the sandbox may reach) ------------


def _wheel() -> bytes:
    buffer = io.BytesIO()
    files = {
        "tinydep.py": "ANSWER = 42\n",
        "tinydep-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n",
        "tinydep-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "tinydep-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in {**files, "tinydep-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.fixture
def local_index() -> Iterator[tuple[str, list[str]]]:
    wheel = _wheel()
    digest = hashlib.sha256(wheel).hexdigest()
    seen: list[str] = []

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("://", 1)[-1]
            path = path[path.find("/") :] if "://" in self.path else self.path
            seen.append(path)
            if path.rstrip("/") == "/simple/tinydep":
                body = f'<a href="/files/tinydep-1.0-py3-none-any.whl#sha256={digest}">tinydep-1.0-py3-none-any.whl</a>'.encode()
                kind = "text/html"
            elif path == "/files/tinydep-1.0-py3-none-any.whl":
                body, kind = wheel, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple", seen
    finally:
        server.shutdown()
        server.server_close()


PIP_BODY = "## capability: answer\nThe answer.\n"
PIP_SCRIPT = "import json, tinydep\nprint(json.dumps({'answer': tinydep.ANSWER}))\n"


async def test_pip_dependencies_install_binary_only_from_the_configured_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_index: tuple[str, list[str]]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    url, seen = local_index
    home = tmp_path / "home"
    skill_md = write_skill(home / "skills", "answers", "capabilities: {answer: {effects: []}}", PIP_BODY)
    (skill_md.parent / "pyproject.toml").write_text('[project]\nname = "answers"\nversion = "1"\ndependencies = ["tinydep==1.0"]\n')
    (skill_md.parent / "scripts").mkdir()
    (skill_md.parent / "scripts" / "answer.py").write_text(PIP_SCRIPT)
    config = config_for(home, f'[network]\nallow_private = true\n[skills]\nauto_install_deps = false\npip_index = "{url}"\n')
    async with Pincer.open(home, config=config, secret_key=KEY, external=False, wasm=False, builtins=False) as pincer:
        assert not pincer.skills.eligibility_of("answers").is_eligible
        result = await pincer.install_skill_deps("answers")
        assert result.managers == ("pip",)
        assert (home / "skill-deps" / "answers" / "python" / "tinydep.py").read_text() == "ANSWER = 42\n"
        assert "/simple/tinydep/" in seen and "/files/tinydep-1.0-py3-none-any.whl" in seen
        called = await pincer.call(CallRequest(tool="answers.answer", args={}))
        assert called.ok, called.error
        assert json.loads(called.output["stdout"]) == {"answer": 42}
        (skill_md.parent / "pyproject.toml").write_text('[project]\nname = "answers"\nversion = "2"\ndependencies = ["tinydep==2.0"]\n')
        pincer.skills.reload()
        assert "changed since they were installed" in pincer.skills.eligibility_of("answers").reason
        assert "answers.answer" not in pincer.registry


async def test_tool_separator_underscore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    home = tmp_path / "home"
    skill_md = write_skill(home / "skills", "words", WORD_COUNT, WORD_COUNT_BODY)
    (skill_md.parent / "scripts").mkdir()
    (skill_md.parent / "scripts" / "word_count.py").write_text(SCRIPT)
    config = config_for(home, '[skills]\ntool_separator = "_"\n')
    async with Pincer.open(home, config=config, secret_key=KEY, external=False, wasm=False, builtins=False) as pincer:
        assert "words_word_count" in pincer.registry and "words.word_count" not in pincer.registry


async def test_a_running_watch_installs_missing_dependencies_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_index: tuple[str, list[str]]
) -> None:
    import anyio

    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    url, _seen = local_index
    home = tmp_path / "home"
    skill_md = write_skill(home / "skills", "answers", "capabilities: {answer: {effects: []}}", PIP_BODY)
    (skill_md.parent / "requirements.txt").write_text("tinydep==1.0\n")
    (skill_md.parent / "scripts").mkdir()
    (skill_md.parent / "scripts" / "answer.py").write_text(PIP_SCRIPT)
    config = config_for(home, f'[network]\nallow_private = true\n[skills]\npip_index = "{url}"\n')
    async with Pincer.open(home, config=config, secret_key=KEY, external=False, wasm=False, builtins=False) as pincer:
        assert "answers.answer" not in pincer.registry
        async with anyio.create_task_group() as tg:
            await tg.start(pincer.watch_installed_tools)
            with anyio.fail_after(120):
                while "answers.answer" not in pincer.registry:
                    await anyio.sleep(0.1)
            tg.cancel_scope.cancel()
        assert pincer.skills.eligibility_of("answers").is_eligible


async def test_a_symlink_out_of_the_skill_is_not_copied_into_the_sandbox_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failed before the view skipped escaping symlinks: a skill could link ~/.ssh/id_rsa into
    its folder and its tool, running as the sandbox uid, read the copy."""
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    home = tmp_path / "home"
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    skill_md = write_skill(home / "skills", "leaky", "capabilities: {peek: {effects: [], command: ['/bin/cat', '/skill/link.txt', '/skill/ok.txt']}}")
    (skill_md.parent / "link.txt").symlink_to(secret)
    (skill_md.parent / "ok.txt").write_text("fine")
    (skill_md.parent / "inner.txt").symlink_to(skill_md.parent / "ok.txt")
    async with Pincer.open(home, config=config_for(home), secret_key=KEY, external=False, wasm=False, builtins=False) as pincer:
        result = await pincer.call(CallRequest(tool="leaky.peek", args={}))
    seen = json.dumps(result.output if result.ok else result.error)  # cat fails on the missing link
    assert "TOP-SECRET-VALUE" not in seen
    assert "fine" in seen and "No such file" in seen


def test_pincer_skills_deps_installs_from_the_cli(tmp_path: Path, local_index: tuple[str, list[str]]) -> None:
    import os
    import subprocess
    import sys

    url, _seen = local_index
    home = tmp_path / "home"
    skill_md = write_skill(home / "skills", "answers", "capabilities: {answer: {effects: []}}", PIP_BODY)
    (skill_md.parent / "requirements.txt").write_text("tinydep==1.0\n")
    (home / "config.toml").write_text(f'[network]\nallow_private = true\n[skills]\npip_index = "{url}"\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}, "PINCER_HOME": str(home), "HOME": str(tmp_path / "nohome")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pincer.cli", "skills", *args], capture_output=True, text=True, env=env, timeout=300)

    before = json.loads(cli("show", "answers", "--json").stdout)
    assert "not installed: run `pincer skills deps answers`" in before["eligibility"]["reasons"][0]
    installed = cli("deps", "answers", "--json")
    assert installed.returncode == 0, installed.stderr + installed.stdout
    assert json.loads(installed.stdout)["managers"] == ["pip"]
    after = json.loads(cli("show", "answers", "--json").stdout)
    assert after["eligibility"] == {"eligible": True, "reasons": []}


async def test_a_script_tool_named_skill_keeps_its_name_and_pincer_still_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Failed before the skill tool's registration tolerated a taken name: Pincer.open raised."""
    from pincer.runtimes.script.installed import script_dir

    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    home = tmp_path / "home"
    folder = script_dir(home)
    folder.mkdir(parents=True)
    (folder / "skill.toml").write_text('name = "skill"\ndescription = "mine"\ncommand = ["/bin/true"]\n')
    async with Pincer.open(home, config=config_for(home), secret_key=KEY, external=False, wasm=False, builtins=False) as pincer:
        assert pincer.registry.get("skill").description == "mine"
        assert pincer.skills is not None and "code-review" in pincer.skills
