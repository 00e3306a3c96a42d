"""Server entries, the servers file, the child environment and the importers: tables and properties."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ConfigError, ManifestError, SecretError, UsageError
from pincer.runtimes.mcp import ServerConfig, ServerStore, tool_name
from pincer.runtimes.mcp.config import parse_servers
from pincer.runtimes.mcp.environment import child_environment, resolve_secret_refs
from pincer.runtimes.mcp.importers import import_data, import_path


def test_tool_names_replace_everything_but_letters_digits_and_underscore() -> None:
    assert tool_name("git-hub", "create.issue") == "git_hub_create_issue"
    assert tool_name("s", "ünï code/x y") == "s__n__code_x_y"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"transport": "stdio"}, "needs a command"),
        ({"transport": "stdio", "command": "x", "url": "https://a.example/mcp"}, "takes no URL"),
        ({"transport": "http", "url": "ftp://a.example"}, "not an http(s) URL"),
        ({"transport": "http", "url": "http://10.0.0.1/mcp"}, "only to this machine"),
        ({"transport": "sse", "url": "https://a.example/sse", "command": "x"}, "takes no command"),
        ({"transport": "stdio", "command": "x", "env": {"PYTHONPATH": "/x"}}, "may not be set"),
        ({"transport": "stdio", "command": "x", "env": {"1BAD": "x"}}, "not a valid environment variable"),
        ({"transport": "http", "url": "https://a.example/mcp", "headers": {"X": "a\r\nb"}}, "line break"),
        ({"transport": "stdio", "command": "x", "timeout_s": 0}, "timeouts must be"),
        ({"transport": "stdio", "command": "x", "protocol": "v2"}, "protocol must be"),
        ({"transport": "pipe", "command": "x"}, "unknown transport"),
    ],
)
def test_bad_server_entries_say_what_is_wrong(fields: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ServerConfig(name="s", **fields)


def test_the_servers_file_round_trips_and_rejects_typos(tmp_path: Path) -> None:
    store = ServerStore(tmp_path)
    server = ServerConfig(name="a", transport="stdio", command="x", args=("1",), env={"K": "${secret:k}"},
                          startup="eager", timeout_s=5, read_only_tools=("t",))
    store.add(server)
    store.add(ServerConfig(name="b", transport="http", url="https://b.example/mcp", headers={"X-Key": "${secret:b}"}))
    assert store.load() == [server, store.get("b")]
    assert (tmp_path / "mcp" / "servers.json").stat().st_mode & 0o777 == 0o600
    data = json.loads((tmp_path / "mcp" / "servers.json").read_text())
    data["servers"][0]["comand"] = "typo"
    (tmp_path / "mcp" / "servers.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="servers.0.comand"):
        store.load()


def test_environment_is_a_whitelist_and_secrets_come_only_from_references() -> None:
    base = {"PATH": "/bin", "HOME": "/h", "AWS_SECRET": "x", "LD_PRELOAD": "y", "BASH_FUNC_f%%": "() { :; }"}
    env = child_environment({"A": "1", "TOKEN": "Bearer ${secret:t}", "NODE_OPTIONS": "x"},
                            lookup={"t": "v"}.get, server="s", base=base)
    assert env == {"PATH": "/bin", "HOME": "/h", "A": "1", "TOKEN": "Bearer v"}
    with pytest.raises(SecretError, match="needs secret 'missing'") as error:
        resolve_secret_refs("${secret:missing}", {}.get, where="x")
    assert "pincer secrets set missing" in str(error.value)


def test_import_formats(corpus: Path) -> None:
    registry = import_path(corpus / "ironclaw-v0.29.1/registry/mcp-servers/notion.json")
    assert registry.format == "IronClaw registry entry"
    assert registry.servers[0].url == "https://mcp.notion.com/mcp" and registry.servers[0].description
    ironclaw = import_data(
        {"schema_version": 1, "servers": [
            {"name": "gh", "url": "https://gh.example/mcp", "headers": {"Authorization": "Bearer ghp_abc"}},
            {"name": "local", "url": "", "transport": {"transport": "stdio", "command": "npx", "args": ["-y", "srv"],
                                                        "env": {"API_KEY": "k-1", "MODE": "fast"}}},
            {"name": "flat", "url": "", "transport": "stdio", "command": "uvx", "args": ["x"]},
            {"name": "sock", "url": "", "transport": {"transport": "unix", "socket_path": "/s"}},
            {"name": "off", "url": "https://off.example/mcp", "enabled": False, "oauth": {"client_id": "c"}},
        ]},
        source="mcp-servers.json",
    )
    servers = {s.name: s for s in ironclaw.servers}
    assert set(servers) == {"gh", "local", "flat", "off"}
    assert servers["gh"].headers == {"Authorization": "Bearer ${secret:mcp_gh_authorization}"}
    assert servers["local"].env == {"API_KEY": "${secret:mcp_local_api_key}", "MODE": "fast"}
    assert ironclaw.secrets == {"mcp_gh_authorization": "ghp_abc", "mcp_local_api_key": "k-1"}
    assert servers["flat"].command == "uvx" and not servers["off"].enabled
    assert any("unix" in n for n in ironclaw.notes) and any("OAuth" in n for n in ironclaw.notes)
    desktop = import_data(
        {"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "remote": {"type": "streamable-http", "url": "https://r.example/mcp", "headers": {"X-Api-Key": "${KEY}"}},
            "old": {"url": "https://o.example/sse"},
            "weird name!": {"command": "x", "disabled": True},
        }},
        source="claude_desktop_config.json",
    )
    servers = {s.name: s for s in desktop.servers}
    assert servers["remote"].transport == "http" and servers["remote"].headers == {"X-Api-Key": "${secret:KEY}"}
    assert servers["old"].transport == "sse" and not servers["weird_name_"].enabled
    with pytest.raises(ManifestError, match="schema_version 2"):
        import_data({"schema_version": 2, "servers": []}, source="x")


def test_overrides_and_capabilities_round_trip_and_typos_name_the_key(tmp_path: Path) -> None:
    from pincer.core.effects import EffectKind as E

    store = ServerStore(tmp_path)
    server = ServerConfig(name="fs", transport="stdio", command="x", effects=frozenset({E.READ_FILESYSTEM}),
                          tool_effects={"write_file": frozenset({E.WRITE_FILESYSTEM})}, capabilities=("local",))
    store.add(server)
    assert store.load() == [server]
    data = json.loads((tmp_path / "mcp" / "servers.json").read_text())
    assert data["servers"][0]["tools"] == {"write_file": {"effects": ["write_filesystem"]}}
    data["servers"][0]["tools"]["write_file"] = {"effects": ["write_filesystem"], "efects": []}
    (tmp_path / "mcp" / "servers.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="servers.0.tools.write_file.efects"):
        store.load()
    data["servers"][0]["tools"]["write_file"] = {"effects": ["flying"]}
    (tmp_path / "mcp" / "servers.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="servers.0.tools.write_file.effects.0"):
        store.load()
    with pytest.raises(UsageError, match="not a usable capability label"):
        ServerConfig(name="s", transport="stdio", command="x", capabilities=("two words",))


def test_openclaw_shapes_specpath_and_unknown_keys(tmp_path: Path) -> None:
    (tmp_path / "api.json").write_text(json.dumps({
        "openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "servers": [{"url": "https://api.example/v2"}],
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}},
    }))
    (tmp_path / "no-server.json").write_text(json.dumps({
        "openapi": "3.0.3", "info": {"title": "T", "version": "1"},
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}},
    }))
    result = import_data({"mcpServers": {
        "api": {"url": "http://localhost:9/sse", "spec": "api.json", "capabilities": ["x"]},
        "bare": {"openapi": "no-server.json"},
        "far": {"specPath": "https://specs.example/api.yaml"},
        "chat": {"url": "https://chat.example/mcp", "capabilities": ["discord", "discord", "telegram"], "retries": 3},
    }}, source="openclaw.json", base=tmp_path)
    assert [s.name for s in result.services] == ["api"] and result.services[0].base_url == "https://api.example/v2"
    assert [s.name for s in result.servers] == ["chat"] and result.servers[0].capabilities == ("discord", "telegram")
    assert result.unknown_keys == {"mcpServers.chat": ["retries"]}
    notes = " ".join(result.notes)
    assert "pincer openapi add bare --spec" in notes and "--base-url" in notes  # skipped, with the command to use
    assert "pincer openapi add far --spec https://specs.example/api.yaml" in notes  # no fetch given
    assert "capabilities apply to MCP servers only" in notes
    with pytest.raises(ManifestError, match=r"mcp.servers.gone.specPath.*does not exist"):
        import_data({"mcp": {"servers": {"gone": {"specPath": "./missing.yaml"}}}}, source="o.json", base=tmp_path)
    with pytest.raises(ManifestError, match="mcpServers.chat.capabilities"):
        import_data({"mcpServers": {"chat": {"url": "https://c.example/mcp", "capabilities": ["a b"]}}}, source="x")
    with pytest.raises(ManifestError, match="mcpServers.chat.capabilities: expected a list of strings"):
        import_data({"mcpServers": {"chat": {"url": "https://c.example/mcp", "capabilities": "discord"}}}, source="x")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["mcpServers", "servers", "schema_version", "name", "url", "command", "args", "env",
                         "transport", "headers", "kind", "type", "enabled", "mcp_server", "stdio", "http", "mcp",
                         "specPath", "spec", "openapi", "capabilities", "tools", "effects"])
        | st.text(max_size=6),
        inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(data=json_values)
def test_importers_only_raise_manifest_errors(data) -> None:
    try:
        # A base folder that does not exist: a specPath reads nothing from this machine.
        result = import_data(data, source="x.json", base=Path("/nonexistent-pincer-import-base"))
    except ManifestError:
        return
    for server in result.servers:
        assert isinstance(server, ServerConfig)


@settings(max_examples=300, deadline=None)
@given(data=json_values)
def test_the_servers_file_parser_only_raises_config_errors(data) -> None:
    try:
        parse_servers(data, source="servers.json")
    except ConfigError:
        pass
