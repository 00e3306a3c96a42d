"""Upstream resource URIs as the gateway serves them (runtimes/mcp/uris.py): namespaced by the
server's name, and given back exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pincer.runtimes.mcp.uris import namespaced_block, namespaced_tool_meta, namespaced_uri, split_uri

SERVER_NAMES = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,20}\Z")
SCHEMES = st.from_regex(r"\A[A-Za-z][A-Za-z0-9+.-]{0,10}\Z")


@given(server=SERVER_NAMES, scheme=SCHEMES, rest=st.text(max_size=60))
def test_a_namespaced_uri_splits_back_into_its_server_and_the_upstream_uri(server: str, scheme: str, rest: str) -> None:
    upstream = f"{scheme}://{rest}"
    served = namespaced_uri(server, upstream)
    assert served is not None and served.startswith(f"{scheme}://{server}/")
    assert split_uri(served) == (server, upstream)


@given(server=SERVER_NAMES, text=st.text(max_size=40))
def test_a_uri_without_an_authority_is_not_served_and_garbage_splits_to_nothing(server: str, text: str) -> None:
    if "://" not in text:
        assert namespaced_uri(server, text) is None
        assert split_uri(text) is None


def test_examples_as_the_published_servers_name_them() -> None:
    assert namespaced_uri("everything", "demo://resource/static/document/a.md") == "demo://everything/resource/static/document/a.md"
    assert namespaced_uri("apps", "ui://get-time/mcp-app.html") == "ui://apps/get-time/mcp-app.html"
    assert namespaced_uri("fs", "file:///etc/hosts") == "file://fs//etc/hosts"
    assert split_uri("file://fs//etc/hosts") == ("fs", "file:///etc/hosts")
    assert namespaced_uri("e", "demo://resource/dynamic/text/{resourceId}") == "demo://e/resource/dynamic/text/{resourceId}"
    assert namespaced_uri("n", "urn:isbn:0451450523") is None


def test_tool_meta_keeps_the_servers_keys_but_never_pincers() -> None:
    meta = {"pincer/effects": [], "pincer/auditId": 1, "ui": {"resourceUri": "ui://x/y", "prefersBorder": True}, "k": [1]}
    assert namespaced_tool_meta("s", meta) == {"ui": {"resourceUri": "ui://s/x/y", "prefersBorder": True}, "k": [1]}
    assert namespaced_tool_meta("s", {"ui/resourceUri": "ui://x/y"}) == {"ui/resourceUri": "ui://s/x/y"}
    assert namespaced_tool_meta("s", None) == {}


def test_resource_links_and_embedded_resources_in_results_get_served_uris() -> None:
    link = {"type": "resource_link", "uri": "demo://r/1", "name": "one"}
    embedded = {"type": "resource", "resource": {"uri": "demo://r/2", "text": "two"}}
    assert namespaced_block("e", link) == {**link, "uri": "demo://e/r/1"}
    assert namespaced_block("e", embedded)["resource"] == {"uri": "demo://e/r/2", "text": "two"}
    assert namespaced_block("e", {"type": "text", "text": "demo://r/3"}) == {"type": "text", "text": "demo://r/3"}
