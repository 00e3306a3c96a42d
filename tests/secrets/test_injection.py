"""Credential injection: every location, host and path selection, optional and missing secrets."""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.capabilities import Capabilities, CredentialLocation, CredentialMapping
from pincer.core.errors import SecretError, UsageError
from pincer.secrets.injection import InjectedRequest, inject_credentials

SECRET = "s3cr3t-VALUE-9f8e7d"


class Vault:
    """A real in-memory resolver that records which names were asked for."""

    def __init__(self, **values: str | None) -> None:
        self.values = values
        self.asked: list[str] = []

    def __call__(self, name: str) -> str | None:
        self.asked.append(name)
        return self.values.get(name)


def mapping(location: CredentialLocation, *, secret: str = "token", hosts: tuple[str, ...] = ("api.example.com",),
            paths: tuple[str, ...] = (), optional: bool = False, key: str = "") -> CredentialMapping:  # fmt: skip
    return CredentialMapping(key=key or secret, secret_name=secret, location=location, host_patterns=hosts,
                             path_patterns=paths, optional=optional)  # fmt: skip


BEARER = CredentialLocation(type="bearer")


def inject(url: str, *maps: CredentialMapping, headers: dict[str, str] | None = None,
           vault: Vault | None = None, method: str = "GET") -> InjectedRequest:  # fmt: skip
    return inject_credentials(method, url, headers or {}, credentials=maps, resolve=vault or Vault(token=SECRET))


def corpus_caps(corpus: Path, relative: str) -> Capabilities:
    return Capabilities.from_path(corpus / "ironclaw-v0.29.1" / relative)


# ------------------------------------------------------------------------------- locations


def test_bearer_replaces_a_header_the_tool_set(corpus: Path) -> None:
    caps = corpus_caps(corpus, "tools-src/github/github-tool.capabilities.json")
    assert caps.http is not None
    out = inject_credentials(
        "GET", "https://api.github.com/user", {"authorization": "Bearer forged", "Accept": "x"},
        credentials=caps.http.credentials, resolve=Vault(github_token=SECRET),
    )  # fmt: skip
    assert out.headers == {"Accept": "x", "Authorization": f"Bearer {SECRET}"}
    assert out.url == "https://api.github.com/user"
    assert out.injected == (SECRET,)


def test_basic_with_username_encodes_user_and_password() -> None:
    out = inject("https://api.example.com/", mapping(CredentialLocation(type="basic", username="myuser")))
    encoded = base64.b64encode(f"myuser:{SECRET}".encode()).decode()
    assert out.headers == {"Authorization": f"Basic {encoded}"}
    assert out.injected == (SECRET, encoded)


def test_basic_without_username_encodes_the_value_whole() -> None:
    out = inject("https://api.example.com/", mapping(CredentialLocation(type="basic")),
                 vault=Vault(token="alice:pa ss"))  # fmt: skip
    encoded = base64.b64encode(b"alice:pa ss").decode()
    assert out.headers == {"Authorization": f"Basic {encoded}"}
    assert set(out.injected) == {"alice:pa ss", encoded}


def test_header_with_prefix_from_discord_manifest(corpus: Path) -> None:
    caps = corpus_caps(corpus, "channels-src/discord/discord.capabilities.json")
    assert caps.http is not None
    out = inject_credentials("POST", "https://discord.com/api/v10/channels/1/messages", {},
                             credentials=caps.http.credentials, resolve=Vault(discord_bot_token=SECRET))  # fmt: skip
    assert out.headers == {"Authorization": f"Bot {SECRET}"}
    assert out.injected == (SECRET,)


def test_header_without_prefix() -> None:
    loc = CredentialLocation(type="header", header_name="X-Subscription-Token")
    out = inject("https://api.example.com/res", mapping(loc), headers={"x-subscription-token": "old"})
    assert out.headers == {"X-Subscription-Token": SECRET}


def test_query_param_encoded_replacing_existing_and_keeping_others() -> None:
    value = "a&b=c d/é+"
    loc = CredentialLocation(type="query_param", param_name="api_key")
    url = "https://api.example.com/v1/search?q=hello%20world&api_key=forged&api%5Fkey=forged2&x=1+2#frag"
    out = inject(url, mapping(loc), vault=Vault(token=value))
    parts = urlsplit(out.url)
    assert parts.query.startswith("q=hello%20world&x=1+2&")  # others kept byte for byte
    assert parse_qs(parts.query)["api_key"] == [value]
    assert parts.fragment == "frag" and parts.path == "/v1/search"
    assert "forged" not in out.url
    assert value in out.injected and "a%26b%3Dc%20d%2F%C3%A9%2B" in out.injected


def test_query_param_on_url_without_query() -> None:
    loc = CredentialLocation(type="query_param", param_name="key")
    out = inject("https://api.example.com/x", mapping(loc))
    assert out.url == f"https://api.example.com/x?key={SECRET}"


def test_url_path_placeholder_from_telegram_manifest(corpus: Path) -> None:
    caps = corpus_caps(corpus, "channels-src/telegram/telegram.capabilities.json")
    assert caps.http is not None
    token = "123456789:AAH-bb_cc"
    vault = Vault(telegram_bot_token=token)
    out = inject_credentials("POST", "https://api.telegram.org/bot{TELEGRAM_BOT_TOKEN}/sendMessage", {},
                             credentials=caps.http.credentials, resolve=vault)  # fmt: skip
    assert out.url == f"https://api.telegram.org/bot{token}/sendMessage"
    assert out.headers == {} and out.injected == (token,)
    # the placeholder percent-encoded by the tool's URL builder is found too
    encoded = inject_credentials("GET", "https://api.telegram.org/bot%7BTELEGRAM_BOT_TOKEN%7D/getMe", {},
                                 credentials=caps.http.credentials, resolve=vault)  # fmt: skip
    assert encoded.url == f"https://api.telegram.org/bot{token}/getMe"


def test_url_path_value_is_percent_encoded() -> None:
    loc = CredentialLocation(type="url_path", placeholder="{T}")
    out = inject("https://api.example.com/k/{T}/x?again={T}", mapping(loc), vault=Vault(token="a/b?c#d e"))
    assert out.url == "https://api.example.com/k/a%2Fb%3Fc%23d%20e/x?again=a%2Fb%3Fc%23d%20e"
    assert set(out.injected) == {"a/b?c#d e", "a%2Fb%3Fc%23d%20e"}


def test_url_path_without_placeholder_does_not_read_the_secret() -> None:
    vault = Vault(token=SECRET)
    out = inject("https://api.example.com/plain", mapping(CredentialLocation(type="url_path", placeholder="{T}")),
                 vault=vault)  # fmt: skip
    assert out.url == "https://api.example.com/plain" and out.injected == ()
    assert vault.asked == []


def test_url_path_never_touches_the_host() -> None:
    loc = CredentialLocation(type="url_path", placeholder="T")
    out = inject("https://T.api.example.com/T", mapping(loc, hosts=("*.api.example.com",)))
    assert out.url == f"https://T.api.example.com/{SECRET}"


# ------------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    ("url", "hosts", "applies"),
    [
        ("https://api.example.com/x", ("api.example.com",), True),
        ("https://API.EXAMPLE.COM/x", ("api.example.com",), True),
        ("https://eu.api.example.com/x", ("*.api.example.com",), True),
        ("https://api.example.com/x", ("*.api.example.com",), False),
        ("https://api.example.com.evil.io/x", ("api.example.com",), False),
        ("https://other.io/x", ("api.example.com",), False),
        ("https://api.example.com:8443/x", ("api.example.com:8443",), True),
        ("https://api.example.com/x", ("api.example.com:8443",), False),
        ("https://api.example.com/x", (), False),
        ("/relative/only", ("api.example.com",), False),
    ],
)
def test_host_patterns(url: str, hosts: tuple[str, ...], applies: bool) -> None:
    vault = Vault(token=SECRET)
    out = inject(url, mapping(BEARER, hosts=hosts), vault=vault)
    assert ("Authorization" in out.headers) is applies
    assert bool(vault.asked) is applies  # a secret is read only for a request that gets it


@pytest.mark.parametrize(
    ("path", "winner"),
    [
        ("/v1/admin/users", "admin"),
        ("/v1/admin", "v1"),  # "/v1/admin/" does not prefix "/v1/admin"
        ("/v1/items", "v1"),
        ("/v2/items", "any"),
        ("/", "any"),
    ],
)
def test_longest_path_pattern_wins_for_one_place(path: str, winner: str) -> None:
    maps = (
        mapping(BEARER, secret="any"),
        mapping(BEARER, secret="admin", paths=("/v1/admin/", "/x/")),
        mapping(BEARER, secret="v1", paths=("/v1/*",)),
    )
    out = inject(f"https://api.example.com{path}", *maps, vault=Vault(any="A", admin="B", v1="C"))
    assert out.headers["Authorization"] == "Bearer " + {"any": "A", "admin": "B", "v1": "C"}[winner]


def test_path_pattern_that_does_not_match_excludes_the_mapping() -> None:
    out = inject("https://api.example.com/public", mapping(BEARER, paths=("/private/",)))
    assert out.headers == {} and out.injected == ()


def test_ties_go_to_the_exact_host_then_to_the_first_declared() -> None:
    wildcard = mapping(BEARER, secret="wild", hosts=("*.example.com",))
    exact = mapping(BEARER, secret="exact", hosts=("api.example.com",))
    vault = Vault(wild="W", exact="E", first="F", second="S")
    assert inject("https://api.example.com/", wildcard, exact, vault=vault).headers["Authorization"] == "Bearer E"
    first, second = mapping(BEARER, secret="first"), mapping(BEARER, secret="second")
    assert inject("https://api.example.com/", first, second, vault=vault).headers["Authorization"] == "Bearer F"


def test_bearer_and_header_named_authorization_share_one_place() -> None:
    header = mapping(CredentialLocation(type="header", header_name="authorization", prefix="Token "),
                     secret="h", paths=("/v2/",))  # fmt: skip
    out = inject("https://api.example.com/v2/x", mapping(BEARER), header, vault=Vault(token="T", h="H"))
    assert out.headers == {"authorization": "Token H"} and out.injected == ("H",)


def test_different_places_all_apply() -> None:
    maps = (
        mapping(BEARER, secret="a"),
        mapping(CredentialLocation(type="header", header_name="X-Org"), secret="b"),
        mapping(CredentialLocation(type="query_param", param_name="k"), secret="c"),
    )
    out = inject("https://api.example.com/x", *maps, vault=Vault(a="AAAA", b="BBBB", c="CCCC"))
    assert out.headers == {"Authorization": "Bearer AAAA", "X-Org": "BBBB"}
    assert out.url == "https://api.example.com/x?k=CCCC"
    assert out.injected == ("AAAA", "BBBB", "CCCC")


def test_one_secret_is_resolved_once_per_request() -> None:
    vault = Vault(token=SECRET)
    inject("https://api.example.com/", mapping(BEARER),
           mapping(CredentialLocation(type="header", header_name="X-Also")), vault=vault)  # fmt: skip
    assert vault.asked == ["token"]


# ------------------------------------------------------------------------------- optional and missing


def test_optional_missing_is_skipped_portfolio(corpus: Path) -> None:
    caps = corpus_caps(corpus, "tools-src/portfolio/portfolio-tool.capabilities.json")
    assert caps.http is not None
    out = inject_credentials("GET", "https://api.sim.dune.com/v1/evm/balances/0x1", {"Accept": "a"},
                             credentials=caps.http.credentials, resolve=Vault())  # fmt: skip
    assert out.headers == {"Accept": "a"} and out.injected == ()
    present = inject_credentials("GET", "https://api.sim.dune.com/v1/evm/balances/0x1", {},
                                 credentials=caps.http.credentials, resolve=Vault(dune_api_key=SECRET))  # fmt: skip
    assert present.headers == {"X-Sim-Api-Key": SECRET}


def test_optional_missing_falls_through_to_the_next_candidate() -> None:
    specific = mapping(BEARER, secret="specific", paths=("/v1/",), optional=True)
    general = mapping(BEARER, secret="general")
    out = inject("https://api.example.com/v1/x", specific, general, vault=Vault(general="G"))
    assert out.headers["Authorization"] == "Bearer G"


@pytest.mark.parametrize("missing", [None, ""])
def test_missing_required_secret_raises_without_leaking(missing: str | None,
                                                        caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    maps = (
        mapping(CredentialLocation(type="header", header_name="X-Present"), secret="present"),
        mapping(BEARER, secret="absent", key="api"),
    )
    with pytest.raises(SecretError) as info:
        inject("https://api.example.com/", *maps, vault=Vault(present=SECRET, absent=missing))
    text = str(info.value) + repr(info.value) + str(info.value.to_dict())
    assert "'absent'" in text and "'api'" in text and "pincer secrets set absent" in text
    assert SECRET not in text
    assert SECRET not in caplog.text


def test_a_resolver_that_refuses_propagates_its_error() -> None:
    def refuse(name: str) -> str | None:
        raise SecretError(f"secret {name!r} is not allowed for this tool")

    with pytest.raises(SecretError, match="not allowed"):
        inject_credentials("GET", "https://api.example.com/", {}, credentials=(mapping(BEARER),), resolve=refuse)


@pytest.mark.parametrize("location", [BEARER, CredentialLocation(type="header", header_name="X-K"),
                                      CredentialLocation(type="basic", username="u")])  # fmt: skip
def test_line_breaks_never_reach_a_header(location: CredentialLocation) -> None:
    bad = SECRET + "\r\nX-Evil: 1"
    with pytest.raises(SecretError, match="line break") as info:
        inject("https://api.example.com/", mapping(location), vault=Vault(token=bad))
    assert SECRET not in str(info.value)


def test_bad_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="cannot be parsed"):
        inject("https://api.example.com:99999/", mapping(BEARER))


def test_nothing_secret_in_repr_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="pincer")
    out = inject("https://api.example.com/", mapping(BEARER))
    assert SECRET in out.headers["Authorization"]
    assert SECRET not in repr(out)
    assert "injected credential 'token'" in caplog.text
    assert SECRET not in caplog.text


# ------------------------------------------------------------------------------- properties

values = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(value=values, name=st.text(st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=8))
def test_query_param_round_trips(value: str, name: str) -> None:
    loc = CredentialLocation(type="query_param", param_name=name)
    out = inject("https://api.example.com/p?keep=1", mapping(loc), vault=Vault(token=value))
    query = parse_qs(urlsplit(out.url).query, keep_blank_values=True)
    assert query[name] == [value] and query["keep"] == ["1"]
    assert value in out.injected


@settings(max_examples=200, deadline=None)
@given(value=values)
def test_url_path_round_trips_and_keeps_the_host(value: str) -> None:
    loc = CredentialLocation(type="url_path", placeholder="{T}")
    out = inject("https://api.example.com/bot{T}/getMe", mapping(loc), vault=Vault(token=value))
    parts = urlsplit(out.url)
    assert parts.hostname == "api.example.com" and parts.query == "" and parts.fragment == ""
    assert parts.path.startswith("/bot") and parts.path.endswith("/getMe")
    assert unquote(parts.path[len("/bot") : -len("/getMe")]) == value
    assert value in out.injected


@settings(max_examples=200, deadline=None)
@given(value=values)
def test_header_values_either_placed_whole_or_refused_without_the_value(value: str) -> None:
    try:
        out = inject("https://api.example.com/", mapping(BEARER), vault=Vault(token=value))
    except SecretError as exc:
        assert any(c in value for c in "\r\n\0")
        assert value not in str(exc) or value in "secret 'token' (or its prefix) holds a line break"
        return
    assert out.headers == {"Authorization": f"Bearer {value}"} and out.injected == (value,)


# ------------------------------------------------------------------------------- cookie


def test_a_cookie_joins_the_requests_cookies_and_replaces_its_own_name() -> None:
    """An OpenAPI apiKey scheme `in: cookie`: one Cookie header, the caller's other cookies kept,
    a cookie of the same name the tool set replaced (never sent twice)."""
    cookie = mapping(CredentialLocation(type="cookie", param_name="sid"))
    out = inject("https://api.example.com/x", cookie, headers={"cookie": "theme=dark; sid=forged"})
    assert dict(out.headers) == {"Cookie": f"theme=dark; sid={SECRET}"} and SECRET in out.injected
    assert dict(inject("https://api.example.com/x", cookie).headers) == {"Cookie": f"sid={SECRET}"}


@pytest.mark.parametrize("value", ["a;admin=1", "a b", 'a"', "a,b", "a\r\nX: 1", "a\\b"])
def test_a_cookie_value_that_would_add_a_cookie_is_refused(value: str) -> None:
    cookie = mapping(CredentialLocation(type="cookie", param_name="sid"))
    with pytest.raises(SecretError, match="cannot carry") as refused:
        inject("https://api.example.com/x", cookie, vault=Vault(token=value))
    assert value not in str(refused.value) and "`pincer secrets set token`" in (refused.value.hint or "")


def test_a_cookie_location_needs_its_name() -> None:
    with pytest.raises(UsageError, match="needs param_name"):
        CredentialLocation(type="cookie")
