from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.config import ConfigFile, GatewaySettings, SkillsSettings, load_config, parse_config
from pincer.config_template import render_settings, schema_keys, toml_key, toml_value
from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import ConfigError
from pincer.policy.session import SessionKind

EXAMPLE = """
[approvals]
timeout_s = 30

[[grants]]
tool = "http"
effects = { network = "allow" }
hosts = ["api.github.com"]
expires = 2030-01-01T00:00:00Z
max_invocations = 100

[[grants]]
tool = "write_file"
default = "allow"

[sessions.ci]
kind = "non-main"
allow = ["group:fs", "echo"]

[limits.http]
calls_per_minute = 30

[[credentials]]
secret = "github_token"
location = "bearer"
host_patterns = ["api.github.com"]
"""


def test_example_parses(tmp_path: Path) -> None:
    config = parse_config(EXAMPLE, home=tmp_path)
    assert config.approval_timeout_s == 30
    http = config.grants[0]
    assert http.effects == {EffectKind.NETWORK: Mode.ALLOW}
    assert http.hosts == ("api.github.com",) and http.max_invocations == 100
    assert http.expires_at == 1893456000.0
    assert config.session("ci").kind is SessionKind.NON_MAIN
    assert config.session("ci").deny  # the sandbox default deny list stays unless replaced
    assert config.rate_limit("http").calls_per_minute == 30
    assert config.rate_limit("echo").is_unlimited
    assert config.workspace == tmp_path / "workspace"


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path)
    assert config.grants == () and config.approval_timeout_s == 120


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[approvals\n", "not valid TOML"),
        ("[approvals]\ntimeout_s = -1\n", "approvals.timeout_s"),
        ("[[grants]]\ntool = 'x'\neffects = { telepathy = 'allow' }\n", "grants.0.effects.telepathy"),
        ("[[grants]]\ntool = 'x'\neffects = { network = 'maybe' }\n", "grants.0.effects.network"),
        ("[[grants]]\ntool = 'x'\n", "sets neither effects nor default"),
        ("[sessions.a]\nkind = 'root'\n", "sessions.a.kind"),
        ("[typo]\nx = 1\n", "typo"),
        ("[[credentials]]\nsecret = 's'\nlocation = 'header'\nhost_patterns = ['a']\n", "needs the name"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, home=tmp_path)
    assert needle in str(info.value)


def test_corrupt_file_on_disk(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(tmp_path)


@given(st.text(max_size=300))
def test_arbitrary_text_only_raises_config_error(text: str) -> None:
    try:
        parse_config(text, home=Path("/nonexistent"))
    except ConfigError:
        pass


def test_credentials_become_a_checked_manifest(tmp_path: Path) -> None:
    config = parse_config(EXAMPLE, home=tmp_path)
    caps = config.credential_capabilities
    assert caps is not None and caps.is_secret_allowed("github_token")
    (mapping,) = caps.http.credentials
    assert mapping.secret_name == "github_token" and mapping.host_patterns == ("api.github.com",)
    bad = "[[credentials]]\nsecret = 's'\nhost_patterns = ['*']\n"
    with pytest.raises(ConfigError, match="credentials"):
        parse_config(bad, home=tmp_path)


def test_sandbox_workdir_max_bytes(tmp_path: Path) -> None:
    assert load_config(tmp_path).sandbox_workdir_max_bytes == 256 * 1024 * 1024
    config = parse_config("[sandbox]\nworkdir_max_bytes = 1073741824\n", home=tmp_path)
    assert config.sandbox_workdir_max_bytes == 1024**3
    for bad in ("100", "68719476737", "'big'"):
        with pytest.raises(ConfigError) as info:
            parse_config(f"[sandbox]\nworkdir_max_bytes = {bad}\n", home=tmp_path)
        assert "sandbox.workdir_max_bytes" in str(info.value)


# TOML-ish input shaped like config.toml: real section and key names (and some made up), values
# of every TOML type, nested, at any size, so the parser's checks past TOML syntax get exercised.
_SCHEMA = schema_keys()
_SECTIONS = sorted({(k.section, k.shape) for k in _SCHEMA} | {("typo", "table")})
_NAMES = sorted({k.name for k in _SCHEMA})
_SCALARS = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.sampled_from(["main", "allow", "ask", "deny", "openai", "https://x.example", "0 9 * * *", "30m", "*"])
)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6
)
_TABLE = st.dictionaries(st.sampled_from(_NAMES) | st.from_regex(r"[a-z_]{1,12}", fullmatch=True), _VALUES, max_size=6)


@st.composite
def _config_texts(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for section, shape in draw(st.lists(st.sampled_from(_SECTIONS), max_size=5, unique=True)):
        for _ in range(draw(st.integers(min_value=1, max_value=2)) if shape != "table" else 1):
            if shape == "table":
                lines.append(f"[{section}]")
            elif shape == "array":
                lines.append(f"[[{section}]]")
            else:
                lines.append(f"[{section}.{toml_key(draw(st.text(max_size=8)))}]")
            lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in draw(_TABLE).items()]
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(_config_texts())
def test_config_shaped_input_only_raises_config_error(text: str) -> None:
    """Any config-shaped text parses or raises ConfigError naming the file, never anything else."""
    try:
        config = parse_config(text, home=Path("/nonexistent"))
    except ConfigError as exc:
        assert str(exc).startswith("config.toml"), str(exc)
    else:
        assert config.home == Path("/nonexistent")


def test_sections_are_the_parsed_models_with_paths_under_home(tmp_path: Path) -> None:
    """The code reads config.toml's section models themselves; relative paths are under the home,
    hosts compared lower-case, and ``pincer config show`` still prints what was written."""
    text = (
        '[skills]\nextra_dirs = ["team", "/abs"]\n[[hub.sources]]\nname = "local"\npath = "reg"\n'
        '[gateway]\nallowed_hosts = ["Pincer.Local"]\nallowed_origins = ["HTTPS://Console.Example/"]\n'
    )
    config = parse_config(text, home=tmp_path)
    assert isinstance(config.skills, SkillsSettings) and isinstance(config.gateway, GatewaySettings)
    assert config.skills.extra_dirs == (tmp_path / "team", Path("/abs"))
    assert config.hub.sources[0].path == str(tmp_path / "reg")
    assert config.gateway.allowed_hosts == ("pincer.local",)
    assert config.gateway.allowed_origins == ("https://console.example",)
    shown = render_settings(ConfigFile.model_validate(tomllib.loads(text)))
    assert 'extra_dirs = ["team", "/abs"]' in shown and 'allowed_hosts = ["Pincer.Local"]' in shown


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[skills]\nextra_dirs = 'x'\n", "skills.extra_dirs: Input should be a valid list"),
        ("[skills]\nextra_dirs = [1]\n", "skills.extra_dirs.0: Input should be a valid string"),
        ("hooks = 3\n", "hooks: Input should be a valid list"),
        ("[[credentials]]\nsecret = 's'\nhost_patterns = []\n", "List should have at least 1 item"),
    ],
)
def test_array_errors_speak_of_lists_and_strings(tmp_path: Path, text: str, needle: str) -> None:
    """Arrays are tuples inside (frozen values): the messages still say list, as a TOML reader expects."""
    with pytest.raises(ConfigError) as info:
        parse_config(text, home=tmp_path)
    assert needle in str(info.value)


@pytest.mark.anyio
async def test_a_calls_limits_and_the_databases_durability_default_to_the_config_models(tmp_path: Path) -> None:
    """Issue 22 item 2: HostContext wrote its own 30 s and 100,000 bytes and the database's open
    its own NORMAL; now each default is written once and a caller that names none gets the model's."""
    from pincer.core.values import HostContext
    from pincer.store.sql import Sql, open_sqlite

    config = load_config(tmp_path)
    host = HostContext(session="main", tool="t")
    assert (host.timeout_s, host.max_output_bytes) == (config.tools.timeout_s, config.output.max_bytes)
    db = await open_sqlite(tmp_path)
    try:
        levels = {0: "off", 1: "normal", 2: "full", 3: "extra"}
        row = await db.fetch_one(Sql("PRAGMA synchronous"))
        assert row is not None and levels[row[0]] == config.audit.synchronous
    finally:
        await db.aclose()
