"""Capabilities manifests: the real corpus, both forms, defaults, effects, malformed files."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.capabilities import (
    MAX_DESCRIPTION_CHARS,
    MAX_MANIFEST_BYTES,
    Capabilities,
    CredentialLocation,
    EndpointPattern,
    RateLimit,
)
from pincer.core.effects import EffectKind
from pincer.core.errors import ManifestError, UsageError

IRONCLAW = "ironclaw-v0.29.1"


def corpus_files(corpus: Path) -> list[Path]:
    return sorted((corpus / IRONCLAW).glob("*-src/*/*.capabilities.json"))


def load(corpus: Path, relative: str) -> Capabilities:
    return Capabilities.from_path(corpus / IRONCLAW / relative)


# ------------------------------------------------------------------------------- the corpus


def test_corpus_has_tools_and_channels(corpus: Path) -> None:
    files = corpus_files(corpus)
    assert len([f for f in files if "tools-src" in f.parts]) == 13
    assert len([f for f in files if "channels-src" in f.parts]) == 7


def test_every_corpus_file_parses(corpus: Path) -> None:
    for path in corpus_files(corpus):
        caps = Capabilities.from_path(path)
        raw = json.loads(path.read_text())
        assert caps.source == str(path)
        assert caps.http is not None, path
        assert caps.description == raw["description"]
        assert caps.wit_version in ("0.3.0", "0.3.1")
        # every secret a credential injects is one the manifest also lists as allowed
        for mapping in caps.http.credentials:
            assert caps.is_secret_allowed(mapping.secret_name), (path, mapping.secret_name)
        assert EffectKind.NETWORK in caps.effects()


def test_github_wrapped_form_webhook_validation_endpoint_and_extra_config(corpus: Path) -> None:
    caps = load(corpus, "tools-src/github/github-tool.capabilities.json")
    assert caps.version == "0.2.3"
    assert caps.http is not None
    assert caps.http.allowlist == (
        EndpointPattern(host="api.github.com", path_prefix="/", methods=("GET", "POST", "PUT", "DELETE")),
    )
    (token,) = caps.http.credentials
    assert (token.key, token.secret_name, token.location.type) == ("github_token", "github_token", "bearer")
    assert token.host_patterns == ("api.github.com",) and not token.optional
    assert caps.http.rate_limit == RateLimit(requests_per_minute=60, requests_per_hour=3600)
    assert caps.secrets_allowed_names == ("github_token", "github_*")
    assert caps.webhook is not None
    assert caps.webhook.hmac_secret_name == "github_webhook_secret"
    assert caps.webhook.hmac_signature_header == "x-hub-signature-256"
    assert caps.webhook.hmac_prefix == "sha256="
    assert caps.auth is not None and caps.auth.secret_name == "github_token"
    endpoint = caps.auth.validation_endpoint
    assert endpoint is not None
    assert (endpoint.url, endpoint.method, endpoint.success_status) == ("https://api.github.com/user", "GET", 200)
    assert endpoint.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert caps.auth.oauth is not None
    assert caps.auth.oauth.scopes == ("repo", "workflow", "read:org") and caps.auth.oauth.use_pkce is False
    assert not hasattr(caps, "config")  # the extra "config" section is not a capability


def test_portfolio_optional_credential_and_unknown_keys(corpus: Path) -> None:
    caps = load(corpus, "tools-src/portfolio/portfolio-tool.capabilities.json")
    assert caps.http is not None and len(caps.http.allowlist) == 4
    (dune,) = caps.http.credentials
    assert dune.optional is True
    assert dune.location == CredentialLocation(type="header", header_name="X-Sim-Api-Key")
    assert caps.auth is not None and caps.auth.optional is True
    assert caps.setup is not None
    assert [(s.name, s.optional) for s in caps.setup.secrets] == [("dune_api_key", True)]


def test_telegram_channel_url_path_placeholder(corpus: Path) -> None:
    caps = load(corpus, "channels-src/telegram/telegram.capabilities.json")
    assert (caps.kind, caps.name) == ("channel", "telegram")
    assert caps.http is not None
    (bot,) = caps.http.credentials
    assert bot.location == CredentialLocation(type="url_path", placeholder="{TELEGRAM_BOT_TOKEN}")
    assert caps.http.max_response_bytes == 52_428_800
    assert caps.http.max_request_bytes == 1_048_576 and caps.http.timeout_secs == 30
    assert [e.path_prefix for e in caps.http.allowlist] == ["/bot", "/file/bot"]
    assert all(e.methods == () for e in caps.http.allowlist)
    assert caps.setup is not None and caps.setup.validation_endpoint is not None
    assert caps.setup.validation_endpoint.url == "https://api.telegram.org/bot{telegram_bot_token}/getMe"
    assert [s.optional for s in caps.setup.secrets] == [False, True]


def test_discord_header_prefix_and_telegram_tool_workspace(corpus: Path) -> None:
    discord = load(corpus, "channels-src/discord/discord.capabilities.json")
    assert discord.http is not None
    assert discord.http.credentials[0].location == CredentialLocation(
        type="header", header_name="Authorization", prefix="Bot "
    )
    tool = load(corpus, "tools-src/telegram/telegram-tool.capabilities.json")
    assert tool.workspace_allowed_prefixes == ("telegram/",)
    assert tool.http is not None and tool.http.credentials == () and tool.http.timeout_secs == 60
    assert tool.http.allowlist[0].host == "*.web.telegram.org"
    assert tool.effects() == {EffectKind.NETWORK, EffectKind.USE_SECRET, EffectKind.READ_FILESYSTEM}


# ------------------------------------------------------------------------------- forms and defaults

HTTP = {"allowlist": [{"host": "api.example.com"}], "rate_limit": {"requests_per_minute": 5}}


def test_flat_and_wrapped_forms_are_equal() -> None:
    body = {"http": HTTP, "secrets": {"allowed_names": ["k"]}, "workspace": {"allowed_prefixes": []}}
    flat = Capabilities.from_json({"description": "d", **body}, source="m")
    wrapped = Capabilities.from_json({"description": "d", "capabilities": body}, source="m")
    assert flat == wrapped


@pytest.mark.parametrize(
    ("doc", "hosts", "secrets"),
    [
        # a top-level section beats the same section inside the wrapper, whole
        ({"http": HTTP, "capabilities": {"http": {"allowlist": [{"host": "inner.example"}]}}},
         ("api.example.com",), ()),
        # different sections combine
        ({"secrets": {"allowed_names": ["a"]}, "capabilities": {"http": HTTP}}, ("api.example.com",), ("a",)),
        # a null at the top falls through to the wrapped section, as serde's Option::or does
        ({"http": None, "capabilities": {"http": HTTP}}, ("api.example.com",), ()),
        # nested wrappers resolve outermost first
        ({"capabilities": {"capabilities": {"http": HTTP, "secrets": {"allowed_names": ["deep"]}},
                           "secrets": {"allowed_names": ["mid"]}}}, ("api.example.com",), ("mid",)),
    ],
)  # fmt: skip
def test_top_level_sections_win(doc: dict[str, Any], hosts: tuple[str, ...], secrets: tuple[str, ...]) -> None:
    caps = Capabilities.from_json(doc, source="m")
    assert caps.http is not None
    assert tuple(e.host for e in caps.http.allowlist) == hosts
    assert caps.secrets_allowed_names == secrets


def test_defaults_are_ironclaws() -> None:
    empty = Capabilities.from_json("{}", source="m")
    assert (empty.http, empty.webhook, empty.auth, empty.setup, empty.workspace_allowed_prefixes) == (None,) * 5
    assert empty.effects() == frozenset() and empty.tool_invoke_aliases == {}
    http = Capabilities.from_json({"http": {}}, source="m").http
    assert http is not None
    assert (http.allowlist, http.credentials) == ((), ())
    assert http.rate_limit == RateLimit(requests_per_minute=60, requests_per_hour=1000)
    assert (http.max_request_bytes, http.max_response_bytes, http.timeout_secs) == (1_048_576, 10_485_760, 30)
    partial = Capabilities.from_json({"http": HTTP}, source="m").http
    assert partial is not None and partial.rate_limit == RateLimit(requests_per_minute=5, requests_per_hour=1000)
    assert partial.allowlist == (EndpointPattern(host="api.example.com", path_prefix="/", methods=()),)


def test_endpoint_methods_upper_cased() -> None:
    doc = {"http": {"allowlist": [{"host": "API.Example.com", "path_prefix": "/v1/", "methods": ["get"]}]}}
    http = Capabilities.from_json(doc, source="m").http
    assert http is not None
    (entry,) = http.allowlist
    assert entry == EndpointPattern(host="api.example.com", path_prefix="/v1/", methods=("GET",))


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ({"type": "bearer"}, CredentialLocation(type="bearer")),
        ({"type": "basic", "username": "u"}, CredentialLocation(type="basic", username="u")),
        ({"type": "basic"}, CredentialLocation(type="basic")),
        ({"type": "header", "name": "X-Key"}, CredentialLocation(type="header", header_name="X-Key")),
        ({"type": "header", "header_name": "X-Key", "prefix": "Key "},
         CredentialLocation(type="header", header_name="X-Key", prefix="Key ")),
        ({"type": "query_param", "name": "api_key"}, CredentialLocation(type="query_param", param_name="api_key")),
        ({"type": "query_param", "param_name": "k"}, CredentialLocation(type="query_param", param_name="k")),
        ({"type": "url_path", "placeholder": "{T}"}, CredentialLocation(type="url_path", placeholder="{T}")),
    ],
)  # fmt: skip
def test_credential_locations(location: dict[str, Any], expected: CredentialLocation) -> None:
    doc = {"http": {"credentials": {"c": {"secret_name": "s", "location": location, "host_patterns": ["h.io"],
                                          "path_patterns": ["/a/", "/b*"]}}}}  # fmt: skip
    http = Capabilities.from_json(doc, source="m").http
    assert http is not None
    (mapping,) = http.credentials
    assert mapping.location == expected
    assert mapping.path_patterns == ("/a/", "/b*") and mapping.optional is False


def test_location_value_checks_itself() -> None:
    with pytest.raises(UsageError, match="header_name"):
        CredentialLocation(type="header")
    with pytest.raises(UsageError, match="unknown credential location"):
        CredentialLocation(type="digest")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="param_name"):
        CredentialLocation(type="cookie")  # an OpenAPI apiKey cookie needs the cookie's name


def test_long_description_truncated() -> None:
    caps = Capabilities.from_json({"description": "x" * (MAX_DESCRIPTION_CHARS + 10)}, source="m")
    assert caps.description == "x" * MAX_DESCRIPTION_CHARS


# ------------------------------------------------------------------------------- effects, secrets, hosts


@pytest.mark.parametrize(
    ("doc", "effects"),
    [
        ({}, set()),
        ({"http": {}}, {"network"}),
        ({"http": {"credentials": {"c": {"secret_name": "s", "location": {"type": "bearer"}}}}},
         {"network", "use_secret"}),
        ({"secrets": {"allowed_names": ["a"]}}, {"use_secret"}),
        ({"secrets": {"allowed_names": []}}, set()),
        ({"workspace": {}}, {"read_filesystem"}),
        ({"tool_invoke": {"aliases": {"search": "brave_search"}}}, {"dispatch_capability"}),
        ({"tool_invoke": {"aliases": {}}}, set()),
    ],
)  # fmt: skip
def test_effects_follow_from_the_manifest(doc: dict[str, Any], effects: set[str]) -> None:
    assert {e.value for e in Capabilities.from_json(doc, source="m").effects()} == effects


def test_widen_adds_effects_and_never_removes() -> None:
    caps = Capabilities.from_json({"http": {}}, source="m")
    wider = caps.widen([EffectKind.EXTERNAL_WRITE, "financial"])
    assert wider.effects() == {EffectKind.NETWORK, EffectKind.EXTERNAL_WRITE, EffectKind.FINANCIAL}
    assert caps.effects() == {EffectKind.NETWORK}
    assert wider.widen([]).effects() == wider.effects()
    with pytest.raises(UsageError, match="unknown effect"):
        caps.widen(["teleport"])


@pytest.mark.parametrize(
    ("allowed", "name", "ok"),
    [
        (("github_token",), "github_token", True),
        (("github_token",), "github_token2", False),
        (("github_*",), "github_app_key", True),
        (("github_*",), "github_", True),
        (("github_*",), "gitlab_token", False),
        (("*",), "anything", True),
        ((), "anything", False),
    ],
)
def test_is_secret_allowed(allowed: tuple[str, ...], name: str, ok: bool) -> None:
    caps = Capabilities.from_json({"secrets": {"allowed_names": list(allowed)}}, source="m")
    assert caps.is_secret_allowed(name) is ok


# ------------------------------------------------------------------------------- malformed manifests


def cred(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"secret_name": "s", "location": {"type": "bearer"}, "host_patterns": ["h.io"]}
    return {"http": {"credentials": {"c": {**base, **over}}}}


MALFORMED: list[tuple[Any, str, str]] = [
    ("{not json", "", "not valid JSON"),
    (b"\xff\xfe\x00garbage", "", "not valid JSON"),
    ("[" * 100_000, "", "not valid JSON"),
    ("[]", "", "expected a JSON object"),
    ({"http": []}, "http", "expected an object, got a list"),
    ({"http": {"allowlist": {"host": "a.io"}}}, "http.allowlist", "expected a list"),
    ({"http": {"allowlist": [{}]}}, "http.allowlist[0].host", "expected a host name"),
    ({"http": {"allowlist": [{"host": "*"}]}}, "http.allowlist[0].host", "bare *"),
    ({"http": {"allowlist": [{"host": "https://a.io/x"}]}}, "http.allowlist[0].host", "no scheme"),
    ({"http": {"allowlist": [{"host": "a.io", "methods": ["GET", 1]}]}}, "http.allowlist[0].methods[1]", "string"),
    ({"http": {"allowlist": [{"host": "a.io", "methods": ["G E T"]}]}}, "http.allowlist[0].methods[0]", "method"),
    ({"http": {"allowlist": [{"host": "a.io", "path_prefix": "api/"}]}}, "http.allowlist[0].path_prefix", "'/'"),
    ({"http": {"credentials": []}}, "http.credentials", "expected an object"),
    (cred(location={"type": "digest"}), "http.credentials.c.location.type", "one of bearer, basic"),
    (cred(location="bearer"), "http.credentials.c.location", "expected an object"),
    (cred(location={"type": "header"}), "http.credentials.c.location.name", "required"),
    (cred(location={"type": "url_path"}), "http.credentials.c.location.placeholder", "required"),
    (cred(location={"type": "query_param", "name": ""}), "http.credentials.c.location.name", "non-empty"),
    (cred(secret_name=None), "http.credentials.c.secret_name", "required"),
    (cred(host_patterns=["*"]), "http.credentials.c.host_patterns[0]", "host name"),
    (cred(host_patterns="h.io"), "http.credentials.c.host_patterns", "list of strings"),
    (cred(path_patterns=["v1/"]), "http.credentials.c.path_patterns[0]", "'/'"),
    (cred(optional="yes"), "http.credentials.c.optional", "true or false"),
    ({"http": {"rate_limit": {"requests_per_minute": -1}}}, "http.rate_limit.requests_per_minute", ">= 0"),
    ({"http": {"rate_limit": {"requests_per_hour": True}}}, "http.rate_limit.requests_per_hour", "whole number"),
    ({"http": {"max_request_bytes": 1.5}}, "http.max_request_bytes", "whole number"),
    ({"http": {"timeout_secs": 0}}, "http.timeout_secs", ">= 1"),
    ({"secrets": {"allowed_names": "github_*"}}, "secrets.allowed_names", "list of strings"),
    ({"tool_invoke": {"aliases": {"a": 1}}}, "tool_invoke.aliases.a", "string"),
    ({"workspace": {"allowed_prefixes": [None]}}, "workspace.allowed_prefixes[0]", "string"),
    ({"webhook": {"hmac_prefix": 7}}, "webhook.hmac_prefix", "string"),
    ({"auth": {"display_name": "X"}}, "auth.secret_name", "required"),
    ({"auth": {"secret_name": "s", "oauth": {"token_url": "t"}}}, "auth.oauth.authorization_url", "required"),
    ({"auth": {"secret_name": "s", "validation_endpoint": 3}}, "auth.validation_endpoint", "URL or an object"),
    ({"setup": {"required_secrets": [{"name": "a"}]}}, "setup.required_secrets[0].prompt", "required"),
    ({"description": 5}, "description", "string"),
    ({"capabilities": "http"}, "capabilities", "capability sections"),
    ({"capabilities": {"http": {"timeout_secs": "30"}}}, "capabilities.http.timeout_secs", "whole number"),
    ({"capabilities": {"description": []}}, "capabilities.description", "string"),
]


@pytest.mark.parametrize(("doc", "key", "message"), MALFORMED)
def test_malformed_manifest_names_source_and_key(doc: Any, key: str, message: str) -> None:
    with pytest.raises(ManifestError) as info:
        Capabilities.from_json(doc, source="tools/x.capabilities.json")
    assert info.value.source == "tools/x.capabilities.json"
    assert info.value.key == key
    assert message in info.value.message
    assert str(info.value).startswith(f"tools/x.capabilities.json: {key + ': ' if key else ''}")


def test_malformed_file_on_disk_names_the_file(tmp_path: Path, corpus: Path) -> None:
    original = json.loads((corpus / IRONCLAW / "tools-src/github/github-tool.capabilities.json").read_text())
    original["capabilities"]["http"]["allowlist"][0]["methods"] = "GET"
    path = tmp_path / "github-tool.capabilities.json"
    path.write_text(json.dumps(original))
    with pytest.raises(ManifestError) as info:
        Capabilities.from_path(path)
    assert info.value.source == str(path)
    assert info.value.key == "capabilities.http.allowlist[0].methods"
    assert str(path) in str(info.value) and "capabilities.http.allowlist[0].methods" in str(info.value)


def test_unreadable_and_oversized_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.capabilities.json"
    with pytest.raises(ManifestError, match="cannot read") as info:
        Capabilities.from_path(missing)
    assert info.value.source == str(missing)
    big = tmp_path / "big.capabilities.json"
    big.write_text(json.dumps({"description": "x" * MAX_MANIFEST_BYTES}))
    with pytest.raises(ManifestError, match="larger than"):
        Capabilities.from_path(big)
    with pytest.raises(ManifestError, match="cannot read"):
        Capabilities.from_path(tmp_path)  # a directory


# ------------------------------------------------------------------------------- properties

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
section_names = st.sampled_from(
    ["http", "secrets", "tool_invoke", "workspace", "webhook", "auth", "setup", "capabilities", "description",
     "allowlist", "credentials", "location", "type", "host", "rate_limit", "allowed_names", "aliases", "oauth",
     "required_secrets", "validation_endpoint", "host_patterns", "path_patterns", "name", "placeholder"]
)  # fmt: skip
manifest_like = st.recursive(
    json_values,
    lambda inner: st.dictionaries(section_names | st.integers(0, 3), inner, max_size=5) | st.lists(inner, max_size=3),
    max_leaves=30,
)


def check_only_manifest_errors(doc: Any) -> None:
    try:
        caps = Capabilities.from_json(doc, source="prop.json")
    except ManifestError as exc:
        assert exc.source == "prop.json"
        return
    assert isinstance(caps, Capabilities)
    caps.effects()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifest_like)
def test_arbitrary_json_only_raises_manifest_error(doc: Any) -> None:
    check_only_manifest_errors(doc)  # as a decoded object, non-string keys included
    check_only_manifest_errors(json.dumps(doc))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_arbitrary_bytes_and_text_only_raise_manifest_error(raw: bytes | str) -> None:
    check_only_manifest_errors(raw)


def key_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            paths += key_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            paths += key_paths(v, (*prefix, i))
    return paths


@pytest.fixture(scope="module")
def corpus_docs(corpus: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in corpus_files(corpus)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_real_manifests_with_one_value_replaced(corpus_docs: list[dict[str, Any]], data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(corpus_docs)))
    path = data.draw(st.sampled_from(key_paths(doc)))
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = data.draw(json_values)
    check_only_manifest_errors(doc)
