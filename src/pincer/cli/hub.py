"""``pincer hub``: run a hub server, publish to one, and decide whose signatures to trust.

The hub server keeps its state under its own home (``--home``, default
``$PINCER_HOME/hub-server``): ``hub.db`` and ``blobs/``. Publisher tokens are made there
(``pincer hub token new --publisher NAME`` prints one; only its sha256 is stored). The
publisher's signing key lives in the secret store (``pincer hub keygen``), never in argv or a
file in clear.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pincer.cli.acts import record_act
from pincer.cli.common import EXIT_OK, JsonOption, emit_json, fail, pincer_home, run, secret_key, stderr
from pincer.core.acts import ActKind
from pincer.core.errors import PincerError, UsageError

if TYPE_CHECKING:
    from pincer.hub.remote import RemoteSource

app = typer.Typer(help="Run a hub server, publish to one, and manage trusted signing keys.", no_args_is_help=True)
token_app = typer.Typer(help="Publisher tokens of a hub server.", no_args_is_help=True)
trust_app = typer.Typer(help="The trust store: whose signatures installs accept.", no_args_is_help=True)
app.add_typer(token_app, name="token")
app.add_typer(trust_app, name="trust")

HomeOption = typer.Option(None, "--home", help="The hub server's home (default: $PINCER_HOME/hub-server).")


def _server_home(home: Path | None) -> Path:
    return Path(home).expanduser() if home is not None else pincer_home() / "hub-server"


def _secrets() -> Any:
    from pincer.secrets.store import SecretStore

    home = pincer_home()
    return SecretStore.open(home, key=secret_key(home))


@app.command("serve")
def serve(
    home: Path | None = HomeOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Where to listen (loopback unless --allow-remote)."),
    port: int = typer.Option(8766, "--port", min=0, max=65535, help="The port; 0 picks a free one."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a non-loopback --host (put TLS in front)."),
    max_upload_bytes: int = typer.Option(96 * 1024 * 1024, "--max-upload-bytes", min=1024, help="Larger publish bodies get 413."),
    rate_limit: int = typer.Option(600, "--rate-limit", min=1, help="Requests a minute per client address."),
    token_rate_limit: int = typer.Option(1200, "--token-rate-limit", min=1, help="Requests a minute per publisher token."),
    as_json: bool = JsonOption,
) -> None:
    """Serve a hub (catalog, publishing, downloads) until interrupted; its own app, port and state."""
    from pincer.hub.server.app import HubLimits
    from pincer.hub.server.serve import HubServeInfo, serve_hub

    def ready(info: HubServeInfo) -> None:
        if as_json:
            emit_json(info.to_dict())
        else:
            stderr.print(f"hub serving at {info.url} (API {info.url}/api/v1, home {info.home}); Ctrl-C stops it")

    limits = HubLimits(max_upload_bytes=max_upload_bytes, address_requests_per_minute=rate_limit,
                       token_requests_per_minute=token_rate_limit)  # fmt: skip

    async def body() -> None:
        await serve_hub(_server_home(home), host=host, port=port, allow_remote=allow_remote, limits=limits, on_ready=ready)

    run(body, as_json=as_json, on_sigterm=False)  # uvicorn's own graceful shutdown


@token_app.command("new")
def new_token(
    publisher: str = typer.Option(..., "--publisher", help="The publisher the token acts for (made if new)."),
    home: Path | None = HomeOption,
    as_json: bool = JsonOption,
) -> None:
    """Make a publisher token on the hub's home and print it once; only its sha256 is kept."""
    from pincer.hub.server.store import HubStore

    def body() -> str:
        store = HubStore(_server_home(home))
        try:
            return store.new_token(publisher)
        finally:
            store.close()

    try:
        token = body()
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"publisher": publisher, "token": token})
    else:
        print(token)
        stderr.print(
            f"a token for publisher {publisher}; it is shown only now. Store it where you publish from: "
            "`pincer secrets set hub_token` (and token_secret = \"hub_token\" in its [[hub.sources]])",
            markup=False,
        )


@app.command("keygen")
def keygen(
    force: bool = typer.Option(False, "--force", help="Replace the key there is (what it signed stays verifiable only by its public key)."),
    as_json: bool = JsonOption,
) -> None:
    """Make an ed25519 publisher key: the private half into the secret store, the public half printed."""
    from pincer.config import load_config
    from pincer.hub.signing import generate_key, key_id, public_of

    def body() -> dict[str, Any]:
        name = load_config(pincer_home()).hub.signing_key
        store = _secrets()
        try:
            existing = store.find(name)
            if existing is not None and not force:
                raise UsageError(
                    f"a signing key is stored already (secret {name!r}, public key {public_of(existing)})",
                    hint="keep using it, or replace it with `pincer hub keygen --force`",
                )
            pair = generate_key()
            store.set(name, pair.private)
        finally:
            store.close()
        return {"public_key": pair.public, "key_id": key_id(pair.public), "secret": name}

    try:
        result = body()
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **result})
    else:
        print(result["public_key"])
        stderr.print(
            f"the private key is in the secret store as {result['secret']!r}; give the public key above to the people "
            "who install what you publish (`pincer hub trust add NAME PUBKEY`)"
        )


@app.command("publish")
def publish(
    path: Path = typer.Argument(..., help="A skill folder, a .wasm or IronClaw .tar.gz, a script manifest, an entry, a bundle.json."),
    source: str = typer.Option(..., "--source", help="The [[hub.sources]] hub server to publish to."),
    kind: str | None = typer.Option(None, "--kind", help="What it is, when pincer cannot tell."),
    name: str | None = typer.Option(None, "--name", help="Its name (default: from the files)."),
    version: str | None = typer.Option(None, "--version", help="Its semver version (default: from the files)."),
    description: str | None = typer.Option(None, "--description", help="One line for search results."),
    keyword: list[str] = typer.Option([], "--keyword", help="A search keyword; repeat for more."),
    tag: list[str] = typer.Option([], "--tag", help="A tag (category); repeat for more."),
    force: bool = typer.Option(
        False, "--force", help="Publish past high-severity scanner findings; the version says so to installers."
    ),
    as_json: bool = JsonOption,
) -> None:
    """Pack, sign and upload an artifact to a hub server (your publisher token and key from the secret store)."""
    from pincer.config import load_config
    from pincer.hub.catalog import make_source
    from pincer.hub.publish import build_artifact
    from pincer.hub.remote import RemoteSource
    from pincer.hub.signing import public_of, sign_manifest

    def body() -> dict[str, Any]:
        config = load_config(pincer_home())
        settings = next((s for s in config.hub.sources if s.name == source), None)
        if settings is None or settings.url is None:
            raise UsageError(
                f"no hub server source named {source!r}",
                hint="add [[hub.sources]] with name and url (and token_secret) to config.toml",
            )
        built = build_artifact(path, kind=kind, name=name, version=version, description=description,
                               keywords=tuple(keyword), tags=tuple(tag))  # fmt: skip
        store = _secrets()
        try:
            private = store.find(config.hub.signing_key)
            if private is None:
                raise UsageError("there is no signing key in the secret store", hint="make one with `pincer hub keygen`")
            remote = make_source(settings, secrets=store)
        finally:
            store.close()
        assert isinstance(remote, RemoteSource)
        published = remote.publish(built.manifest, built.archive, signature=sign_manifest(built.manifest, private),
                                   public_key=public_of(private), force=force)  # fmt: skip
        return {"ok": True, **published}

    result = run(_sync(body), as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        stderr.print(f"published {result['key']}@{result['version']} ({result['fingerprint']}); scanner: {result['verdict']}")
        if result.get("forced"):
            stderr.print("  published past high-severity findings (--force): the hub shows this version as forced")
    raise typer.Exit(EXIT_OK)


@app.command("tag")
def tag_version(
    key: str = typer.Argument(..., help="The artifact, kind/name."),
    version: str = typer.Argument(..., help="The version the tag points at from now on."),
    source: str = typer.Option(..., "--source", help="The hub server."),
    tag: str = typer.Option("latest", "--tag", help="The tag; moving latest back is a rollback for everyone."),
    as_json: bool = JsonOption,
) -> None:
    """Point a tag (latest by default) of a published artifact at a version."""
    from pincer.hub.artifact import parse_key

    def body() -> dict[str, Any]:
        return _remote(source).set_tag(parse_key(key), tag, version)

    result = run(_sync(body), as_json=as_json)
    if as_json:
        emit_json({"ok": True, **result})
    else:
        stderr.print(f"{result['key']}: " + ", ".join(f"{t} -> {v}" for t, v in sorted(result["dist_tags"].items())))


@app.command("yank")
def yank(
    spec: str = typer.Argument(..., help="KEY@VERSION to hide from new installs (kept for lockfiles that pin it)."),
    source: str = typer.Option(..., "--source", help="The hub server."),
    as_json: bool = JsonOption,
) -> None:
    """Yank a published version: hidden from resolution, still there for lockfiles that pin it."""
    from pincer.hub.artifact import parse_key, parse_spec

    def body() -> dict[str, Any]:
        text, version = parse_spec(spec)
        if version is None:
            raise UsageError("say which version to yank", hint="pincer hub yank tools/NAME@1.2.3 --source S")
        return _remote(source).yank(parse_key(text), version)

    result = run(_sync(body), as_json=as_json)
    if as_json:
        emit_json({"ok": True, **result})
    else:
        stderr.print(f"yanked {result['key']}@{result['version']}; tags now: {result['dist_tags']}")


def _remote(source: str) -> RemoteSource:
    from pincer.config import load_config
    from pincer.hub.catalog import make_source
    from pincer.hub.remote import RemoteSource

    config = load_config(pincer_home())
    settings = next((s for s in config.hub.sources if s.name == source and s.url), None)
    if settings is None:
        raise UsageError(f"no hub server source named {source!r}", hint="add [[hub.sources]] with name and url to config.toml")
    store = _secrets()
    try:
        remote = make_source(settings, secrets=store)
    finally:
        store.close()
    assert isinstance(remote, RemoteSource)  # make_source makes one for every source with a url
    return remote


def _sync(fn: Any) -> Any:
    async def body() -> Any:
        return fn()

    return body


@trust_app.command("add")
def trust_add(
    name: str = typer.Argument(..., help="What to call the signer (shown in search and in pincer.lock)."),
    public_key: str = typer.Argument(..., help="Their public key, ed25519:<base64>, as `pincer hub keygen` prints it."),
    as_json: bool = JsonOption,
) -> None:
    """Accept signatures made by this public key."""
    from pincer.hub.trust import TrustStore

    home = pincer_home()
    try:
        entry = TrustStore(home).add(name, public_key)
        record_act(home, ActKind.SIGNER, subject=entry.name, outcome="trusted",
                   reason=f"hub signing key {entry.key_id} trusted as {entry.name}",
                   args={"key_id": entry.key_id, "public_key": entry.public_key})  # fmt: skip
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **entry.to_json()})
    else:
        stderr.print(f"trusting {entry.name} (key {entry.key_id})")


@trust_app.command("list")
def trust_list(as_json: bool = JsonOption) -> None:
    """List the trusted signing keys."""
    from pincer.hub.trust import TrustStore

    try:
        keys = TrustStore(pincer_home()).load()
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"keys": [k.to_json() for k in keys]})
        return
    if not keys:
        stderr.print("no trusted keys (`pincer hub trust add NAME PUBKEY` adds one)")
    for key in keys:
        stderr.print(f"{key.name}  {key.key_id}  {key.public_key}")


@trust_app.command("rm")
def trust_rm(name: str = typer.Argument(..., help="The trusted signer to forget."), as_json: bool = JsonOption) -> None:
    """Stop accepting a signer's signatures (`pincer verify` then reports what they signed)."""
    from pincer.hub.trust import TrustStore

    home = pincer_home()
    try:
        entry = TrustStore(home).remove(name)
        record_act(home, ActKind.SIGNER, subject=entry.name, outcome="forgotten",
                   reason=f"hub signing key {entry.key_id} ({entry.name}) no longer trusted",
                   args={"key_id": entry.key_id, "public_key": entry.public_key})  # fmt: skip
    except PincerError as exc:
        fail(exc, as_json=as_json)
    if as_json:
        emit_json({"ok": True, **entry.to_json()})
    else:
        stderr.print(f"no longer trusting {entry.name} ({entry.key_id})")
