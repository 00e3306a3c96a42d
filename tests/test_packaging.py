"""`pip install pincer` as a user does it: into an empty venv, from a wheel of this checkout.

The core install (no extra) must stay small, serve a governed call, and name the extra of every
configured part it lacks; each extra (core/extras.py) installed on top makes its part work. The
wheel is built once; pip takes the dependencies from its cache or the index, as a user's would.
Two venvs per session: one kept without any extra, one that gains an extra per test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pincer.core.extras import EXTRAS
from tests.gateway.conftest import pincer_serve

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PIP_TIMEOUT_S = 900.0  # a cold pip cache downloads the wheels; bounded all the same
CLI_TIMEOUT_S = 120.0
# The issue asked for under 60 MB. The floor is what the gateway cannot serve without: the MCP SDK
# (45.6 MB with what it pulls in: cryptography 16.6 via PyJWT[crypto], pydantic 10.2, jsonschema and
# its referencing 3.4, starlette, uvicorn, httpx2), FastAPI (2.1 MB) and typer (15.4 MB: rich and
# its pygments 10 MB), together 63 MB. The rest of the core's 100 MB is pincer itself (11.7 MB),
# jsonschema-rs (15.8 MB), pyyaml, tzdata, jinja2, croniter and the leak scanner's ahocorasick-rs
# (docs/install.md has the table). Measured: main before 102 MB (httpcore 1 beside httpx2's own
# httpcore2, urllib3 for multipart bodies alone), 100 MB after; then the store's one schema and
# migration history (issue 40): SQLAlchemy 23.6 MB with its greenlet 2.6 (SQLAlchemy requires it on
# x86_64 and arm64; only its async engine uses it, which pincer does not), Alembic 2.8 and its Mako
# 0.8, 130 MB. 2026-12-07: 131 MB (pip 23.2, CPython 3.11, x86_64, the newest wheels of the index).
# Under 60 MB cannot be reached with the MCP SDK: mcp and fastapi alone, installed into an empty
# venv, are 47 MB, with typer 62 MB, and pincer's own files are 13 MB (docs/install.md). The budget
# leaves 5 MB for newer wheels of the same dependencies and stays under the core plus the smallest
# extra (pincer[redis], 7.5 MB), so no optional part can come back into the core unnoticed.
CORE_BUDGET_MB = 136
# One HTTP stack in the core: httpx2 and its httpcore2 (the MCP SDK's client). Failed before:
# httpcore 1 and urllib3 were core dependencies, each for one use (egress, multipart bodies).
SECOND_HTTP_STACKS = ("httpcore", "urllib3", "httpx", "requests", "aiohttp")
PACKAGING_SELF = ("pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth")


def _run(argv: list[str], *, timeout: float = CLI_TIMEOUT_S, env: dict[str, str] | None = None,
         stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, input=stdin)


def _site_packages(env_dir: Path) -> Path:
    found = list(env_dir.glob("lib/python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def _du_mb(*paths: Path) -> int:
    done = _run(["du", "-smc", *map(str, paths)])
    assert done.returncode == 0, done.stderr
    return int(done.stdout.splitlines()[-1].split()[0])


def _installed(env_dir: Path) -> set[str]:
    done = _run([str(env_dir / "bin" / "python"), "-m", "pip", "list", "--format", "json"])
    assert done.returncode == 0, done.stderr
    return {canonicalize_name(item["name"]) for item in json.loads(done.stdout)}


def _extra_distributions(name: str) -> set[str]:
    """The distributions pyproject.toml's extra ``name`` asks for (self-references followed)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    found, todo = set(), [name]
    while todo:
        for line in extras[todo.pop()]:
            req = Requirement(line)
            if canonicalize_name(req.name) == "pincer":
                todo.extend(req.extras)
            elif req.marker is None or req.marker.evaluate({"extra": ""}):
                found.add(canonicalize_name(req.name))
    return found


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)], timeout=PIP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("pincer-*.whl")
    return built


def _new_venv(where: Path, wheel: Path) -> Path:
    venv.EnvBuilder(with_pip=True).create(where)
    done = _run([str(where / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], timeout=PIP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return where


@pytest.fixture(scope="session")
def core_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """`pip install pincer`, no extra: never changed by a test."""
    return _new_venv(tmp_path_factory.mktemp("core") / "venv", wheel)


@pytest.fixture(scope="session")
def extras_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """pincer, then each test's extra on top (one venv: the core is installed once)."""
    return _new_venv(tmp_path_factory.mktemp("extras") / "venv", wheel)


@pytest.fixture
def user_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "pincer-home"
    home.mkdir(mode=0o700)
    yield home


def _pincer(env_dir: Path, home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    return _run([str(env_dir / "bin" / "pincer"), *args], env=env, stdin=stdin)


def test_the_core_install_is_small_and_has_no_optional_part(core_venv: Path, record_property: Callable[[str, object], None]) -> None:
    """Failed before: a bare `pip install .` was 473 MB of site-packages (Playwright 167 MB, the
    LLM SDKs 68 MB, trafilatura's babel and lxml 49 MB, wasmtime 31 MB, uvloop 14 MB...)."""
    site = _site_packages(core_venv)
    ours = [p for p in site.iterdir() if not p.name.startswith(PACKAGING_SELF)]
    size = _du_mb(*ours)
    largest = sorted(((_du_mb(p), p.name) for p in ours if p.is_dir() and not p.name.endswith(".dist-info")), reverse=True)[:8]
    figure = f"{size} MB of site-packages (budget {CORE_BUDGET_MB} MB); largest: " + ", ".join(f"{n} {mb}" for mb, n in largest)
    print(figure)  # shown with -rP or -s; the junit report keeps it as a property
    record_property("core_site_packages_mb", size)
    assert size < CORE_BUDGET_MB, figure
    optional = set().union(*(_extra_distributions(name) for name in EXTRAS))
    installed = _installed(core_venv)
    leaked = sorted(optional & installed)
    assert not leaked, f"optional distributions installed by the core: {leaked}"
    doubled = sorted(installed & set(SECOND_HTTP_STACKS))
    assert not doubled, f"a second HTTP stack beside httpx2 in the core install: {doubled}"


def test_the_core_install_serves_a_governed_call(core_venv: Path, user_home: Path) -> None:
    with pincer_serve(user_home, pincer=core_venv / "bin" / "pincer") as server:
        response = httpx.post(
            server.info["api_url"] + "/tools/echo/call",
            json={"args": {"text": "from the core install"}},
            headers={"Authorization": f"Bearer {server.token}"},
            trust_env=False,
            timeout=30.0,
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True and body["output"] == {"text": "from the core install"}, body
    audit = _pincer(core_venv, user_home, "audit", "list", "--json")
    assert audit.returncode == 0, audit.stderr
    (record,) = [r for r in json.loads(audit.stdout) if r["id"] == body["audit_id"]]
    assert (record["tool"], record["caller"], record["decision"], record["outcome"]) == ("echo", "rest", "allow", "ok")


# What config.toml turns on for each extra, and the config key `pincer config check` names.
_CONFIGURED = {
    "browser": ("[builtins.browser]\nenabled = true\n", "builtins.browser.enabled"),
    "web": ("[builtins.web_fetch]\nenabled = true\n", "builtins.web_fetch.enabled"),
    "oauth": ("[builtins.gmail]\nenabled = true\n", "builtins.gmail.enabled"),
    "postgres": ('[store]\nurl = "postgresql://pincer@127.0.0.1:1/pincer"\n', "store.url"),
    "redis": ('[cache]\nurl = "redis://127.0.0.1:1/0"\n', "cache.url"),
    "agent": ('[llm]\nmodel = "gpt-4o-mini"\n', "llm.model"),
    "telemetry": ("[telemetry]\ntraces = true\n", "telemetry.traces"),
}


def test_config_check_and_doctor_name_the_extra_of_each_configured_part(core_venv: Path, user_home: Path) -> None:
    # and single sign-on, the second part of pincer[oauth] (missing from the check before)
    oidc = '[auth.oidc.corp]\nissuer = "https://id.example.com"\nclient_id = "pincer"\n'
    (user_home / "config.toml").write_text("".join(text for text, _ in _CONFIGURED.values()) + oidc)
    check = _pincer(core_venv, user_home, "config", "check")
    assert check.returncode == 1, check.stderr
    for extra, key in [*((extra, key) for extra, (_, key) in _CONFIGURED.items()), ("oauth", "auth.oidc.corp")]:
        assert f"{key}: needs {EXTRAS[extra].feature}, which is not installed" in check.stderr, check.stderr
        assert f"hint: pip install 'pincer[{extra}]'" in check.stderr
    doctor = _pincer(core_venv, user_home, "doctor", "--json")
    extras = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "extras")
    assert extras["status"] == "fail" and extras["hint"] == "pip install 'pincer[agent,browser,oauth,postgres,redis,telemetry,web]'"
    assert "Traceback" not in check.stderr + doctor.stderr


def test_a_part_without_its_extra_is_a_clear_error_at_the_point_of_use(core_venv: Path, user_home: Path) -> None:
    """A call of web_fetch without pincer[web]: the error names the extra, no ImportError. Failed
    before: the call asked for an approval first (and the CLI waited for it until its timeout)."""
    (user_home / "config.toml").write_text(_CONFIGURED["web"][0] + "[approvals]\ntimeout_s = 5\n")
    called = _pincer(core_venv, user_home, "tools", "call", "web_fetch", "--args", '{"url": "https://example.org/"}', "--json")
    assert called.returncode != 0
    error = json.loads(called.stdout)["error"]
    assert error["code"] == "extra_missing" and error["hint"] == "pip install 'pincer[web]'", error
    assert "Traceback" not in called.stderr and "ModuleNotFoundError" not in called.stderr
    assert "waiting for approval" not in called.stderr, called.stderr


# A minimal use of each part in the extras venv, after its extra is installed.
_EXERCISE = {
    "agent": "from pincer.config import ModelSettings\nfrom pincer.llm.provider import open_provider\n"
             "print(type(open_provider(ModelSettings(model='m', provider='anthropic'), 'k')).__name__)",
    "browser": "from pincer.builtins.browser.playwright_compat import playwright_error\nprint(playwright_error().__name__)",
    "postgres": "from pincer.core.extras import require\nprint(require('postgres', 'psycopg').sql.SQL('x').as_string(None))",
    "redis": "from pincer.store.cache import SharedRateLimiter\nprint(type(SharedRateLimiter('redis://127.0.0.1:1/0')).__name__)",
    "oauth": "from pincer.builtins.oauth import PROVIDERS, begin_login\n"
             "print('code_challenge=' in begin_login(PROVIDERS['google'], client_id='c', scopes=['s'], redirect_uri='http://127.0.0.1/').url)",
    "web": "from pincer.builtins.web_fetch import html_to_markdown\n"
           "print(html_to_markdown('<html><body><article><h1>T</h1><p>' + 'word ' * 60 + '</p></article></body></html>')[0][:40])",
    "wasm": "from pincer.runtimes.wasm.engine import new_engine\nprint(type(new_engine()).__name__)",
    "fast": "from pincer.cli.serve import event_loop_options\nfrom pincer.core.extras import require\n"
            "print(type(require('fast', 'uvloop').new_event_loop()).__name__, event_loop_options())",
    "telemetry": "from pincer.config import TelemetrySettings\nfrom pincer.telemetry.tracing import TRACING\n"
                 "print(TRACING.configure(TelemetrySettings(traces=True), environ={}))",
}  # fmt: skip


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_installs_and_its_part_works(extras_venv: Path, wheel: Path, user_home: Path, extra: str) -> None:
    python = str(extras_venv / "bin" / "python")
    before = _run([python, "-c", _EXERCISE[extra]])
    if not _extra_distributions(extra) & _installed(extras_venv):  # not yet pulled in by another extra
        assert before.returncode != 0 and f"pip install 'pincer[{extra}]'" in before.stderr, before.stderr
    done = _run([python, "-m", "pip", "install", "--quiet", f"{wheel}[{extra}]"], timeout=PIP_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    after = _run([python, "-c", _EXERCISE[extra]])
    assert after.returncode == 0 and after.stdout.strip() not in ("", "False"), after.stderr
    doctor = _pincer(extras_venv, user_home, "doctor", "--json")
    extras = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "extras")
    assert extra in extras["detail"].split("installed: ", 1)[1].split(";")[0].split(", "), extras


def _tracked_package_files() -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", "src/pincer"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return {line.removeprefix("src/") for line in out.splitlines() if line}


def test_the_wheel_carries_every_package_file_and_its_entry_point_runs(wheel: Path, tmp_path: Path) -> None:
    """`pip install .` and `pipx install .` give a working pincer (newcomer item 5): the wheel
    holds every file the package reads at run time, and its `pincer` entry point runs from it."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "pincer = pincer.cli.main:main" in archive.read(entry_points).decode()
    # Built by `make setup`, not tracked: the A2UI renderer the canvas inlines.
    missing = sorted(f for f in (*_tracked_package_files(), "pincer/canvas/assets/a2ui-renderer.js") if f not in names)
    assert not missing, f"files the wheel leaves out (add them to package-data): {missing}"

    # The installed package, alone on the path before this checkout's, answers.
    target = tmp_path / "site"
    installed = _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                     timeout=PIP_TIMEOUT_S)  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(target), "PINCER_HOME": str(tmp_path / "home")}
    code = "import pincer, sys; from pincer.cli.main import main; sys.argv = ['pincer', '--version']; main()"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0 and ran.stdout.startswith("pincer "), ran.stderr
    where = subprocess.run([sys.executable, "-c", "import pincer; print(pincer.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)  # fmt: skip
    assert where.stdout.strip().startswith(str(target))
