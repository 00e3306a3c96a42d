"""The built-ins over one HTTP API are declared as data (builtins/api_tool.py) and made by one
factory: what each declares is checked against the manifest it ships, so a declaration that
forgets a host cannot leave part of the tool unreachable (or reaching the real API) when the
person moves it to another base URL."""

from __future__ import annotations

import pytest

from pincer.builtins.api import BaseUrl
from pincer.builtins.api_tool import ApiTool
from pincer.builtins.github import GITHUB
from pincer.builtins.portfolio import PORTFOLIO
from pincer.builtins.slack import SLACK
from pincer.builtins.telegram import TELEGRAM
from pincer.builtins.tool import bundled_manifest

DECLARED = [GITHUB, SLACK, TELEGRAM, PORTFOLIO]
MOVED = "http://127.0.0.1:8123/prefix"


@pytest.mark.parametrize("declared", DECLARED, ids=lambda d: d.name)
def test_the_declared_hosts_are_every_host_of_the_shipped_manifest(declared: ApiTool) -> None:
    shipped = bundled_manifest(declared.name).http
    assert shipped is not None
    assert {entry.host for entry in shipped.allowlist} == set(declared.hosts)
    assert declared.default_base_url == f"https://{declared.hosts[0]}"


@pytest.mark.parametrize("declared", DECLARED, ids=lambda d: d.name)
def test_a_moved_base_url_takes_the_place_of_every_host(declared: ApiTool) -> None:
    shipped = bundled_manifest(declared.name).http
    base = BaseUrl.parse(MOVED, configured=True, key=declared.base_url_key)
    moved = declared.capabilities(base).http
    assert shipped is not None and moved is not None
    assert len(moved.allowlist) == len(shipped.allowlist)
    assert {entry.host for entry in moved.allowlist} == {"127.0.0.1:8123"}
    assert all(entry.path_prefix.startswith("/prefix/") for entry in moved.allowlist)
    assert not {h for c in moved.credentials for h in c.host_patterns} & set(declared.hosts)


@pytest.mark.parametrize("declared", DECLARED, ids=lambda d: d.name)
def test_the_factory_makes_the_tool_the_declaration_describes(declared: ApiTool) -> None:
    tool = declared.tool(read_only=True)
    assert tool.spec.name == declared.name and tool.spec.source == f"builtin:{declared.name}"
    assert tool.spec.capabilities == bundled_manifest(declared.name)
    offered = set(tool.spec.input_schema["properties"]["action"]["enum"])
    assert offered == {a.name for a in declared.actions if not a.writes}
