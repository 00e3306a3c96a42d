"""A build over a running :class:`~pincer.service.Pincer`: its ``[llm]`` model, secret store,
audit log, and a live reload of the WASM tools when the tool is registered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pincer.builder.build import Builder, BuildReport, BuildRequest, PlannedBuild, Progress, Taken

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pincer.config import Config
    from pincer.core.acts import Actor
    from pincer.registry import Registry
    from pincer.secrets.store import SecretStore
    from pincer.store.approvals import ApprovalStore
    from pincer.store.audit import AuditLog
    from pincer.store.grants import GrantStore

__all__ = ["run_build", "plan_build", "BuilderHost"]


class BuilderHost(Protocol):
    """What a build and ``build_tool`` use of the service (``pincer.service.Pincer`` is one;
    the service sits above the builder, so the builder names only what it reads)."""

    @property
    def config(self) -> Config: ...

    @property
    def home(self) -> Path: ...

    @property
    def environ(self) -> Mapping[str, str]: ...

    @property
    def secrets(self) -> SecretStore: ...

    @property
    def registry(self) -> Registry: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def grants(self) -> GrantStore: ...

    @property
    def approvals(self) -> ApprovalStore: ...

    async def reload_hub_artifacts(self, kinds: frozenset[str] | None = None) -> None: ...

Audit = Callable[[str, str, str, str], None]


@asynccontextmanager
async def _builder(pincer: BuilderHost, *, profile: str | None, runner_cache: Path | None, progress: Progress | None,
                   limits: Any, audit: Audit | None) -> AsyncIterator[Builder]:  # fmt: skip
    from pincer.builder.runner import default_cache_dir
    from pincer.core.errors import ConfigError
    from pincer.llm.prices import find_price
    from pincer.llm.provider import open_provider, resolve_api_key

    config = pincer.config
    settings = config.llm.resolve(profile)
    if not settings.model:
        raise ConfigError("no model is configured for the builder",
                          hint='set [llm] model in config.toml (and provider, base_url, api_key_secret), e.g. model = "gpt-4o-mini"')  # fmt: skip
    provider = open_provider(settings, resolve_api_key(settings, pincer.secrets, pincer.environ))
    try:
        yield Builder(
            home=pincer.home, provider=provider, model=settings.model, secrets=pincer.secrets,
            runner_cache=runner_cache or default_cache_dir(pincer.environ, pincer.home), progress=progress, limits=limits,
            audit=audit, max_output_tokens=settings.max_output_tokens, price=find_price(settings.model, config.agent.prices),
            key_secret=config.hub.signing_key, taken=_taken(pincer),
        )  # fmt: skip
    finally:
        await provider.aclose()


def _taken(pincer: BuilderHost) -> Taken:
    """What has a tool name already: an installed tool (pincer.lock), or any tool of the registry."""

    def taken(name: str) -> str | None:
        from pincer.hub.artifact import ArtifactKey, ArtifactKind
        from pincer.hub.lockfile import LOCK_FILENAME, Lockfile

        entry = Lockfile.read(Path(pincer.home) / LOCK_FILENAME).get(ArtifactKey(kind=ArtifactKind.TOOL, name=name))
        if entry is not None:
            return f"the installed tool {entry.key}@{entry.version} (from {entry.source})"
        if name in pincer.registry:
            spec = pincer.registry.get(name)
            return f"the {spec.runtime.value} tool {name!r} (from {spec.source})"
        return None

    return taken


async def plan_build(pincer: BuilderHost, request: BuildRequest, *, profile: str | None = None) -> PlannedBuild:
    """The plan stage alone, with ``pincer``'s model: what an approval of the build shows."""
    async with _builder(pincer, profile=profile, runner_cache=None, progress=None, limits=None, audit=None) as builder:
        return await builder.plan(request)


async def run_build(pincer: BuilderHost, request: BuildRequest, *, actor: Actor, profile: str | None = None,
                    runner_cache: Path | None = None, progress: Progress | None = None, limits: Any = None,
                    planned: PlannedBuild | None = None, approval_id: str | None = None) -> BuildReport:  # fmt: skip
    """Build with ``pincer``'s model (``[llm]``, or ``profile``), from ``planned`` on when the
    plan was made (and approved) already; the tool is registered live. What the build installs
    is recorded as ``actor``'s act (``approval_id``: the approval that let it)."""
    from pincer.store.acts import hub_act

    records: list[tuple[str, str, str, str]] = []
    try:
        async with _builder(pincer, profile=profile, runner_cache=runner_cache, progress=progress, limits=limits,
                            audit=lambda *record: records.append(record)) as builder:  # fmt: skip
            report = await builder.build(request, planned=planned)
    finally:
        for action, key, version, reason in records:
            await pincer.audit.append(hub_act(actor, action, key, version, reason, approval_id=approval_id))
    await pincer.reload_hub_artifacts(frozenset({"tool"}))
    return report
