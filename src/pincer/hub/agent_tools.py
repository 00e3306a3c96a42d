"""``skills_search`` and ``skills_install``: the OpenClaw workflow, governed.

An agent searches the hub sources for a skill it needs and installs it. ``skills_install`` has
the effect ``modify_extension``, so under the default policy it asks. Before anyone is asked,
its preflight resolves the skill and refuses what would be refused anyway (no trusted signature,
a high-severity finding of the hub's scanner): an agent can never pass ``--allow-unsigned`` or
``--force``. The approval shows the skill, its version and source, the signer, the scanner's
findings and what the skill asks for (tools, binaries, environment). The install that follows
is exactly the version and fingerprint the approval showed; the skill arrives as an *installed*
skill (its tools attenuated to read-only unless a grant names it).

Registered by the service when ``[[hub.sources]]`` are configured.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import Field

from pincer.core.effects import EffectKind
from pincer.core.errors import ArtifactRefused, ScanBlocked, SignatureRefused, UsageError
from pincer.core.values import HostContext, RuntimeAsk
from pincer.runtimes.native import NativeRuntime, NativeTool, tool

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.hub.artifact import ArtifactKey
    from pincer.hub.installer import Hub
    from pincer.policy.grants import Grant
    from pincer.store.approvals import ApprovalStore
    from pincer.store.audit import AuditLog
    from pincer.store.grants import GrantStore

__all__ = ["hub_runtime", "HubServices", "RUNTIME_NAME"]

RUNTIME_NAME = "hub"


@dataclass(frozen=True, kw_only=True, slots=True)
class HubServices:
    """What the hub's agent tools use of the service, made by
    ``pincer.service.Pincer.hub_services()`` (the service sits above the hub): config as it is now
    (a reload replaces it), the home, the audit, grant and approval stores, and the reload of what
    pincer.lock covers once a skill is installed."""

    config: Callable[[], Config]
    home: Path
    audit: AuditLog
    grants: GrantStore
    approvals: ApprovalStore
    reload_hub_artifacts: Callable[[frozenset[str]], Awaitable[None]]


def _hub(services: HubServices, records: list[tuple[str, str, str, str]] | None = None) -> Hub:
    from pincer.hub.archive import ArchiveLimits
    from pincer.hub.catalog import Catalog
    from pincer.hub.installer import Hub

    config = services.config()
    settings = config.hub
    limits = ArchiveLimits(max_archive_bytes=settings.max_archive_bytes, max_unpacked_bytes=settings.max_unpacked_bytes,
                           max_files=settings.max_files, max_file_bytes=settings.max_unpacked_bytes)  # fmt: skip
    sink = (lambda *record: records.append(record)) if records is not None else None
    return Hub(services.home, catalog=Catalog.from_config(config), limits=limits, audit=sink,
               download_timeout_s=settings.download_timeout_s)  # fmt: skip


def _skill_key(text: str) -> ArtifactKey:
    from pincer.hub.artifact import ArtifactKey, ArtifactKind, check_name, parse_key

    if "/" in text:
        key = parse_key(text)
        if key.kind is not ArtifactKind.SKILL:
            raise UsageError(f"{key} is not a skill; skills_install installs skills only", hint="ask a person to install other kinds")
        return key
    return ArtifactKey(kind=ArtifactKind.SKILL, name=check_name(text))


def hub_runtime(services: HubServices) -> NativeRuntime:
    """The two tools over the service's config, trust store and lockfile."""

    # No effect of its own: it reads the catalogs the user configured, wherever the agent asks.
    @tool(name="skills_search", effects=(), side_effecting=False)
    async def skills_search(
        query: Annotated[str, Field(max_length=256)],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> dict[str, Any]:
        """Search the configured hub sources for skills.

        Args:
            query: Words describing what the skill should do.
            limit: At most this many results.
        """
        from pincer.hub.artifact import ArtifactKind
        from pincer.hub.catalog import with_signer_names
        from pincer.hub.trust import TrustStore

        def search() -> dict[str, Any]:
            hub = _hub(services)
            try:
                found = hub.catalog.search(query, kind=ArtifactKind.SKILL, limit=limit)
                results = [e.to_json() for e in with_signer_names(found, TrustStore(services.home))]
                return {"query": query, "results": results, "warnings": list(hub.catalog.warnings)}
            finally:
                hub.catalog.close()

        return await anyio.to_thread.run_sync(search)

    @tool(name="skills_install", effects=(EffectKind.MODIFY_EXTENSION,), side_effecting=True)
    async def skills_install(
        key: Annotated[str, Field(min_length=1, max_length=140)],
        version: Annotated[str | None, Field(max_length=128)] = None,
        host: HostContext | None = None,
    ) -> dict[str, Any]:
        """Install a skill from a hub source (signed by a trusted publisher); a person approves it first.

        Args:
            key: The skill, as skills/NAME or NAME (from skills_search).
            version: A version or tag; the newest when left out.
        """
        wanted = await _approved(services, host)
        skill = _skill_key(key)
        spec = f"{skill}@{wanted['version']}" if wanted else (f"{skill}@{version}" if version else str(skill))
        records: list[tuple[str, str, str, str]] = []

        def install() -> list[Any]:
            from pincer.hub.installer import InstallOptions

            hub = _hub(services, records)
            try:
                options = InstallOptions(
                    source=wanted.get("source") if wanted else None,
                    expected_fingerprint=wanted.get("fingerprint") if wanted else None,
                )
                return hub.install(spec, options)
            finally:
                hub.catalog.close()

        results = await anyio.to_thread.run_sync(install)
        await _audit(services, records, host)
        await services.reload_hub_artifacts(frozenset({"skill"}))
        result = results[0]
        return {"installed": result.key, "version": result.version, "signer": result.signer, "action": result.action,
                "source": result.source, "trust": "installed (its tools are limited to read-only unless a grant names it)"}  # fmt: skip

    async def preflight(args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        stored = await services.grants.all()  # read here: the rest blocks (a catalog lookup) in a thread
        return await anyio.to_thread.run_sync(lambda: _install_preflight(services, skills_install, args, host, stored))

    tools: list[NativeTool] = [skills_search, skills_install.with_preflight(preflight)]
    return NativeRuntime(tools, name=RUNTIME_NAME)


async def _approved(services: HubServices, host: HostContext | None) -> dict[str, Any]:
    """What the approval of this call showed (version, source, fingerprint), to install exactly that."""
    from pincer.approver import approved_detail

    detail = await approved_detail(services.approvals, host)
    return dict(detail) if detail.get("fingerprint") else {}


def _install_preflight(
    services: HubServices, item: NativeTool, args: Mapping[str, Any], host: HostContext, stored: tuple[Grant, ...]
) -> RuntimeAsk | None:
    """Refuse what an agent may not install; otherwise what the approval shows."""
    from pincer.hub.catalog import with_signer_names
    from pincer.hub.sources import CatalogEntry
    from pincer.hub.trust import TrustStore
    from pincer.policy.grants import evaluate_grants

    key = _skill_key(str(args.get("key", "")))
    hub = _hub(services)
    try:
        hub.catalog.check_unambiguous(key, None)
        source, resolved = hub.catalog.resolve(key, args.get("version"))
    finally:
        hub.catalog.close()
    if resolved.manifest is None or not resolved.signature or not resolved.public_key:
        raise SignatureRefused(f"{resolved.label} from {source.name!r} is not signed; an agent installs only signed skills",
                               hint=f"a person can review it and run `pincer install {key} --allow-unsigned`")  # fmt: skip
    from pincer.hub.signing import key_id, verify_manifest

    verify_manifest(resolved.manifest, resolved.signature, resolved.public_key)
    trusted = TrustStore(services.home).signer_of(resolved.public_key)
    if trusted is None:
        raise SignatureRefused(
            f"{resolved.label} is signed by key {key_id(resolved.public_key)}, which is not in the trust store",
            hint="a person decides whom to trust: `pincer hub trust add NAME PUBKEY`",
        )
    high = [f for f in resolved.findings if f.get("severity") == "high"]
    if high:
        first = high[0]
        raise ScanBlocked(
            f"{resolved.label}: the hub's scanner found {len(high)} high-severity finding(s), e.g. {first.get('rule')} "
            f"at {first.get('file')}:{first.get('line')}",
            findings=tuple(dict(f) for f in resolved.findings),
            hint="an agent cannot install past them; a person sees each one with `pincer install KEY` "
            "(it refuses and lists them) and decides on --force",
        )
    if resolved.yanked:
        raise ArtifactRefused(f"{resolved.label} was yanked", hint="install another version")
    config = services.config()
    grants = tuple(config.grants) + stored
    decision = evaluate_grants(
        item.spec, grants, now=time.time(), session=host.session, session_kind=config.session(host.session).kind.value
    )
    if decision.mode.value == "allow":
        return None
    signer = with_signer_names([CatalogEntry(kind=key.kind, name=key.name, version=resolved.version, source=source.name,
                                             signer=resolved.public_key)], TrustStore(services.home), verified=True)[0].signer  # fmt: skip
    return RuntimeAsk(
        reason=f"an agent wants to install {resolved.label} from {source.name} (signed by {signer})",
        effects=(EffectKind.MODIFY_EXTENSION.value,),
        detail={
            "key": str(key),
            "version": resolved.version,
            "source": source.name,
            "fingerprint": resolved.manifest.fingerprint,
            "signer": signer,
            "signer_key": resolved.public_key,
            "publisher": resolved.publisher,
            "description": resolved.description[:500],
            "scanner": {"verdict": resolved.verdict, "findings": [dict(f) for f in resolved.findings]},
            "requested": dict(resolved.requested),
        },
    )


async def _audit(services: HubServices, records: list[tuple[str, str, str, str]], host: HostContext | None) -> None:
    from pincer.core.acts import Actor
    from pincer.store.acts import hub_act

    actor = host.actor if host is not None else Actor(channel="agent", principal="main")
    for action, key, version, reason in records:
        await services.audit.append(hub_act(actor, action, key, version, reason, approval_id=host.approval if host else None))
