"""The optional parts (core/extras.py): the table agrees with pyproject.toml, their packages are
imported only through ``require``, and without them every core module still imports (the
modules that need one fail with ExtraMissing naming the pip command, never an ImportError).

tests/test_packaging.py checks the same in a real venv without the extras; this runs in the
development venv, with the optional packages made unimportable by a meta-path finder."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pincer.config import BUILTIN_TOOLS
from pincer.core.extras import BUILTIN_EXTRAS, EXTRAS

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "pincer"
OPTIONAL = {module: name for name, extra in EXTRAS.items() for module in extra.modules}
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _distributions(extra: str, *, with_theirs: bool = True) -> set[str]:
    """pincer[extra]'s own distributions, with those their extras bring (psycopg[pool]) when
    ``with_theirs``."""
    found, todo = set(), [extra]
    while todo:
        for line in PROJECT["optional-dependencies"][todo.pop()]:
            req = Requirement(line)
            if canonicalize_name(req.name) == "pincer":
                todo.extend(req.extras)
                continue
            found.add(canonicalize_name(req.name))
            for inner in metadata.requires(req.name) or () if req.extras and with_theirs else ():
                wanted = Requirement(inner)
                if wanted.marker is not None and any(wanted.marker.evaluate({"extra": e}) for e in req.extras):
                    found.add(canonicalize_name(wanted.name))
    return found


def test_every_extra_of_the_table_is_in_pyproject_and_brings_its_modules() -> None:
    providers = metadata.packages_distributions()
    for name, extra in EXTRAS.items():
        assert name in PROJECT["optional-dependencies"], f"pyproject.toml has no extra {name!r}"
        wanted = _distributions(name)
        for module in extra.modules:
            dists = {canonicalize_name(d) for d in providers.get(module.split(".")[0], ())}
            assert dists & wanted, f"pincer[{name}] installs none of {sorted(dists)} (the distributions of {module})"
    missing = [name for name in EXTRAS if not _distributions(name) <= _distributions("all")]
    assert not missing, f"pincer[all] leaves out {missing}"
    assert not {canonicalize_name(Requirement(d).name) for d in PROJECT["dependencies"]} & {
        d for name in EXTRAS for d in _distributions(name, with_theirs=False)
    }, "an optional distribution is also a core dependency"


def test_the_builtins_that_need_an_extra_are_builtins() -> None:
    assert set(BUILTIN_EXTRAS) <= set(BUILTIN_TOOLS) and set(BUILTIN_EXTRAS.values()) <= set(EXTRAS)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _raw_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import of an optional package outside ``if TYPE_CHECKING:``."""
    found: list[tuple[int, str]] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                for inner in child.orelse:  # the else branch runs
                    walk(inner)
                continue
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module]
            found.extend((child.lineno, n) for n in names if n.split(".")[0] in OPTIONAL)
            walk(child)

    walk(tree)
    return found


def test_optional_packages_are_imported_only_through_require() -> None:
    """Failed before core/extras.py with 49 imports in 24 modules (playwright, psycopg,
    psycopg_pool, redis, authlib, trafilatura, openai, anthropic, wasmtime, uvloop)."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "core" / "extras.py":
            continue
        bad += [f"{path.relative_to(SRC)}:{line} imports {name}" for line, name in _raw_imports(ast.parse(path.read_text()))]
    assert not bad, bad


_PROBE = r"""
import importlib, importlib.abc, json, pkgutil, sys
BLOCKED = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
import pincer
failed = {}
for info in pkgutil.walk_packages(pincer.__path__, "pincer."):
    # __main__ runs the CLI; Alembic's env.py is a script Alembic runs inside its own context
    if info.name.endswith("__main__") or info.name == "pincer.store.sql.migrations.env":
        continue
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed[info.name] = [type(exc).__name__, getattr(exc, "hint", None)]
print(json.dumps(failed))
"""


def _module_level_require(path: Path) -> set[str]:
    """The extras a module requires at import time (``require(...)`` outside any function)."""
    found = set()
    tree = ast.parse(path.read_text())
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant):
                found.add(str(first.value))
        todo.extend(ast.iter_child_nodes(node))
    return found


def test_without_any_extra_every_core_module_imports_and_the_others_say_which_extra() -> None:
    """Importing pincer's modules with every optional package unimportable: the core ones import
    (so they import no optional package), and the adapters (llm providers, the WASM host) fail
    with ExtraMissing and the pip command, not ModuleNotFoundError."""
    done = subprocess.run([sys.executable, "-c", _PROBE, ",".join(OPTIONAL)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    failed = json.loads(done.stdout)
    adapters: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        extras = _module_level_require(path)
        if extras:
            parts = path.relative_to(SRC.parent).with_suffix("").parts
            adapters[".".join(parts)] = extras
    wrong = {m: f for m, f in failed.items() if f[0] != "ExtraMissing"}
    assert not wrong, wrong
    # Exactly the adapters fail (and what imports them at its top, found by the same run).
    assert set(adapters) <= set(failed), sorted(set(adapters) - set(failed))
    importers = set(failed) - set(adapters)
    assert importers == {"pincer.runtimes.wasm.runtime"}, importers  # imports the component host at its top
    for module, (_, hint) in failed.items():
        assert hint is not None and hint.startswith("pip install 'pincer[") and hint.endswith("]'"), (module, hint)


def test_each_extra_is_in_the_installed_metadata_and_its_packages_import_through_require() -> None:
    """One check per extra in the development venv, which has pincer[all]: the installed pincer's
    metadata offers the extra (what `pip install 'pincer[NAME]'` resolves), and require() imports
    every package of it (the other half, without the extra, is the probe above and
    tests/test_packaging.py)."""
    from pincer.core.extras import available, require

    offered = set(metadata.metadata("pincer").get_all("Provides-Extra") or ())
    for name, extra in EXTRAS.items():
        assert name in offered, f"the installed pincer offers no extra {name!r} (reinstall: make setup)"
        assert available(name), f"pincer[{name}] is not installed in the development venv"
        for module in extra.modules:
            assert require(name, module).__name__ == module


# Every kind of key that turns on an optional part, and the extra it needs.
_TURNED_ON = (
    '[store]\nurl = "postgresql://pincer@127.0.0.1:1/pincer"\n[cache]\nurl = "redis://127.0.0.1:1/0"\n'
    '[telemetry]\ntraces = true\n[llm]\nmodel = "gpt-4o-mini"\n[llm.profiles.fast]\nmodel = "gpt-4o-mini"\n'
    "[builtins.browser]\nenabled = true\n[builtins.web_fetch]\nenabled = true\n[builtins.gmail]\nenabled = true\n"
    '[auth.oidc.corp]\nissuer = "https://id.example.com"\nclient_id = "pincer"\n'
)


def test_every_configured_part_names_its_extra_and_key(tmp_path: Path) -> None:
    """Failed before: single sign-on ([auth.oidc.NAME], joserfc and authlib of pincer[oauth]) was
    not among them, so `pincer config check` and `pincer doctor` passed a config whose dashboard
    sign-in could only answer 503."""
    from pincer.config import parse_config
    from pincer.config_check import configured_extras

    found = configured_extras(parse_config(_TURNED_ON, home=tmp_path))
    assert sorted(found) == sorted([
        ("postgres", "store.url"), ("redis", "cache.url"), ("telemetry", "telemetry.traces"),
        ("agent", "llm.model"), ("agent", "llm.profiles.fast.model"), ("browser", "builtins.browser.enabled"),
        ("web", "builtins.web_fetch.enabled"), ("oauth", "builtins.gmail.enabled"), ("oauth", "auth.oidc.corp"),
    ])  # fmt: skip
    assert configured_extras(parse_config("", home=tmp_path)) == []


# None in sys.modules: `import` fails with ModuleNotFoundError and importlib.util.find_spec finds
# nothing, as for a package that is not installed.
_CLI_WITHOUT = r"""
import sys
sys.modules.update(dict.fromkeys(sys.argv[1].split(",")))
from pincer.cli.main import main
sys.argv = ["pincer", *sys.argv[2:]]
main()
"""


def test_config_check_and_doctor_name_the_oauth_extra_for_single_sign_on(tmp_path: Path) -> None:
    """The CLI itself, with pincer[oauth]'s packages unimportable (tests/test_packaging.py does the
    same for every extra in a venv that never had them)."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text('[auth.oidc.corp]\nissuer = "https://id.example.com"\nclient_id = "pincer"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    blocked = ",".join(EXTRAS["oauth"].modules)

    def pincer(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", _CLI_WITHOUT, blocked, *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)

    check = pincer("config", "check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"auth.oidc.corp: needs {EXTRAS['oauth'].feature}, which is not installed" in check.stderr, check.stderr
    assert "hint: pip install 'pincer[oauth]'" in check.stderr, check.stderr
    doctor = pincer("doctor", "--json")
    extras = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "extras")
    assert (extras["status"], extras["hint"]) == ("fail", "pip install 'pincer[oauth]'"), extras
    assert "auth.oidc.corp needs" in extras["detail"], extras
