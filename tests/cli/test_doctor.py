"""``pincer doctor`` against real broken homes: each problem fails its check with a fix."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pincer.runtimes.mcp import ServerConfig, ServerStore
from tests.gateway.conftest import pincer_serve

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def doctor(home: Path, *, env: dict[str, str] | None = None, config: str | None = None) -> tuple[int, dict[str, Any]]:
    if config is not None:
        (home / "config.toml").write_text(config)
    elif not (home / "config.toml").exists():
        # Never the shared machine's 8765: another engineer's gateway may be listening there.
        (home / "config.toml").write_text(f"[gateway]\nport = {free_port()}\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    base.update({"PINCER_HOME": str(home)}, **(env or {}))
    done = subprocess.run([*PINCER, "doctor", "--json"], capture_output=True, text=True, env=base, timeout=CLI_TIMEOUT_S)
    report = json.loads(done.stdout)
    assert {c["status"] for c in report["checks"]} <= {"ok", "warn", "fail"}
    assert report["ok"] is (done.returncode == 0), done.stderr
    assert done.returncode in (0, 1)
    return done.returncode, report


def checks(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    found = [c for c in report["checks"] if c["name"] == name]
    assert found, f"no {name} check in {[c['name'] for c in report['checks']]}"
    return found


def test_a_fresh_home_checks_out(tmp_path: Path) -> None:
    _code, report = doctor(tmp_path)
    failed = [c for c in report["checks"] if c["status"] == "fail" and c["name"] != "sandbox"]
    assert not failed, failed  # the sandbox depends on the machine; the rest must pass anywhere
    names = [c["name"] for c in report["checks"]]
    assert names[:5] == ["python", "home", "settings", "secret key", "database"]
    assert {"sandbox", "node", "gateway", "path"} <= set(names)
    for check in report["checks"]:
        assert check["status"] == "ok" or check["hint"], check  # every problem comes with its fix


def test_human_output_is_a_line_per_check_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(f"[gateway]\nport = {free_port()}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(tmp_path)
    done = subprocess.run([*PINCER, "doctor"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert any(line.startswith("ok   python") for line in lines)
    assert any(line.startswith("warn gateway") for line in lines)
    assert any("fix: `pincer serve` starts it" in line for line in lines)


def test_a_broken_config_fails_the_settings_check(tmp_path: Path) -> None:
    code, report = doctor(tmp_path, config="[approvals]\ntimeoutt = 3\n")
    assert code == 1
    settings = checks(report, "settings")[0]
    assert settings["status"] == "fail" and "approvals.timeoutt" in settings["detail"]
    assert "pincer config check" in settings["hint"]


def test_a_key_file_others_can_read_fails_with_chmod(tmp_path: Path) -> None:
    key = tmp_path / "secret.key"
    key.write_text("a" * 64 + "\n")
    key.chmod(0o644)
    code, report = doctor(tmp_path)
    secret = checks(report, "secret key")[0]
    assert code == 1 and secret["status"] == "fail"
    assert secret["hint"] == f"chmod 600 {key}"
    assert "a" * 16 not in json.dumps(report)  # never the key
    key.chmod(0o600)
    assert checks(doctor(tmp_path)[1], "secret key")[0]["status"] == "ok"


def test_secrets_without_their_key_fail(tmp_path: Path) -> None:
    env = {"PINCER_SECRET_KEY": "11" * 32}
    stored = subprocess.run([*PINCER, "secrets", "set", "t"], input="v", capture_output=True, text=True,
                            env={**os.environ, "PINCER_HOME": str(tmp_path), **env}, timeout=CLI_TIMEOUT_S)  # fmt: skip
    assert stored.returncode == 0, stored.stderr
    assert checks(doctor(tmp_path, env=env)[1], "secret key")[0]["detail"].startswith("from PINCER_SECRET_KEY")
    code, report = doctor(tmp_path)
    assert code == 1 and "secrets.db holds secrets" in checks(report, "secret key")[0]["detail"]


def test_a_corrupt_database_fails_quick_check(tmp_path: Path) -> None:
    (tmp_path / "pincer.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    code, report = doctor(tmp_path)
    database = checks(report, "database")[0]
    assert code == 1 and database["status"] == "fail" and "quick_check" in database["detail"]


def test_a_tampered_audit_chain_fails(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    for text in ("a", "b"):
        call = subprocess.run([*PINCER, "tools", "call", "echo", "--args", json.dumps({"text": text})],
                              capture_output=True, text=True, env={**env, "PINCER_HOME": str(tmp_path)}, timeout=CLI_TIMEOUT_S)  # fmt: skip
        assert call.returncode == 0, call.stderr
    assert checks(doctor(tmp_path)[1], "audit chain")[0]["detail"] == "intact over 2 records"
    conn = sqlite3.connect(tmp_path / "pincer.db")
    conn.execute("UPDATE audit SET session = 'other' WHERE id = 2")
    conn.commit()
    conn.close()
    code, report = doctor(tmp_path)
    chain = checks(report, "audit chain")[0]
    assert code == 1 and chain["status"] == "fail" and "pincer audit verify" in chain["hint"]


def test_mcp_servers_whose_command_is_missing_and_npx_without_node(tmp_path: Path) -> None:
    store = ServerStore(tmp_path)
    store.add(ServerConfig(name="gone", transport="stdio", command="/nonexistent/mcp-server"))
    store.add(ServerConfig(name="gh", transport="stdio", command="npx", args=("-y", "some-mcp")))
    # A PATH with this Python but no Node: npx-launched servers cannot start.
    code, report = doctor(tmp_path, env={"PATH": str(BIN)})
    assert code == 1
    node = checks(report, "node")[0]
    assert node["status"] == "fail" and "needed by gh" in node["detail"] and "Node.js" in node["hint"]
    servers = {c["detail"].split(":")[0]: c for c in checks(report, "mcp server")}
    assert servers["gone"]["status"] == "fail" and "pincer mcp remove gone" in servers["gone"]["hint"]


def test_a_running_gateway_answers(tmp_path: Path) -> None:
    with pincer_serve(tmp_path) as server:
        port = server.info["port"]
        _code, report = doctor(tmp_path, config=f"[gateway]\nport = {port}\n")
        gateway = checks(report, "gateway")[0]
        assert gateway["status"] == "ok" and f":{port}/healthz" in gateway["detail"]


class _NotPincer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>hello</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


def test_another_program_on_the_gateway_port_fails(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotPincer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        code, report = doctor(tmp_path, config=f"[gateway]\nport = {server.server_address[1]}\n")
    finally:
        server.shutdown()
        server.server_close()
    gateway = checks(report, "gateway")[0]
    assert code == 1 and gateway["status"] == "fail" and "[gateway] port" in gateway["hint"]


@pytest.mark.skipif(not (BIN / "pincer").exists(), reason="needs the installed pincer script")
def test_path_says_whether_pincer_is_this_installation(tmp_path: Path) -> None:
    ours = checks(doctor(tmp_path, env={"PATH": f"{BIN}:{os.environ.get('PATH', '')}"})[1], "path")[0]
    assert ours["status"] == "ok" and str(BIN / "pincer") in ours["detail"]
    other = tmp_path / "bin"
    other.mkdir()
    (other / "pincer").write_text("#!/bin/sh\nexit 0\n")
    (other / "pincer").chmod(0o755)
    theirs = checks(doctor(tmp_path, env={"PATH": f"{other}:{BIN}"})[1], "path")[0]
    assert theirs["status"] == "warn" and "not this installation" in theirs["detail"]
    missing = checks(doctor(tmp_path, env={"PATH": "/nonexistent"})[1], "path")[0]
    assert missing["status"] == "warn" and "export PATH=" in missing["hint"]


def test_llm_says_what_is_off_without_a_model_and_checks_the_key(tmp_path: Path) -> None:
    """Issue 21 item 16. Before: `pincer doctor` said nothing about [llm]: with no model the agent
    loop, run_skill and the builder are off, and no check said so."""
    port = free_port()
    _code, report = doctor(tmp_path, config=f"[gateway]\nport = {port}\n")
    (llm,) = checks(report, "llm")
    assert llm["status"] == "warn" and "[llm] model is not set" in llm["detail"]
    assert "agent loop" in llm["detail"] and "run_skill" in llm["detail"] and "builder" in llm["detail"]
    assert "set [llm] model in config.toml" in llm["hint"]
    config = f'[gateway]\nport = {port}\n\n[llm]\nmodel = "gpt-4o-mini"\napi_key_env = "PINCER_TEST_NO_SUCH_KEY_VAR"\n'
    _code, report = doctor(tmp_path, config=config)
    (llm,) = checks(report, "llm")
    assert llm["status"] == "warn" and "api_key_env names PINCER_TEST_NO_SUCH_KEY_VAR, which is not set here" in llm["detail"]
    _code, report = doctor(tmp_path, config=config, env={"PINCER_TEST_NO_SUCH_KEY_VAR": "sk-test"})
    (llm,) = checks(report, "llm")
    assert llm["status"] == "ok" and llm["detail"] == "gpt-4o-mini (openai), key from $PINCER_TEST_NO_SUCH_KEY_VAR"
    assert "sk-test" not in json.dumps(report)
