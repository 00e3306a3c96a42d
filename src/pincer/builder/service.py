"""A build over a running pincer's :class:`BuilderServices`: its ``[llm]`` model, secret store,
audit log, and a live reload of the WASM tools when the tool is registered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pincer.builder.build import Builder, BuildReport, BuildRequest, PlannedBuild, Progress, Taken
from pincer.builder.host import BuilderServices

if TYPE_CHECKING:
    from pincer.core.acts import Actor
    from pincer.runtimes.wasm import WasmLimits

__all__ = ["run_build", "plan_build"]


Audit = Callable[[str, str, str, str], None]


@asynccontextmanager
async def _builder(services: BuilderServices, *, profile: str | None, runner_cache: Path | None, progress: Progress | None,
                   limits: WasmLimits | None, audit: Audit | None) -> AsyncIterator[Builder]:  # fmt: skip
    from pincer.builder.runner import default_cache_dir
    from pincer.core.errors import ConfigError
    from pincer.llm.prices import find_price
    from pincer.llm.provider import open_provider, resolve_api_key

    config = services.config()
    settings = config.llm.resolve(profile)
    if not settings.model:
        raise ConfigError("no model is configured for the builder",
                          hint='set [llm] model in config.toml (and provider, base_url, api_key_secret), e.g. model = "gpt-4o-mini"')  # fmt: skip
    provider = open_provider(settings, resolve_api_key(settings, services.secrets, services.environ))
    try:
        yield Builder(
            home=services.home, provider=provider, model=settings.model, secrets=services.secrets,
            runner_cache=runner_cache or default_cache_dir(services.environ, services.home), progress=progress, limits=limits,
            audit=audit, max_output_tokens=settings.max_output_tokens, price=find_price(settings.model, config.agent.prices),
            key_secret=config.hub.signing_key, taken=_taken(services),
        )  # fmt: skip
    finally:
        await provider.aclose()


def _taken(services: BuilderServices) -> Taken:
    """What has a tool name already: an installed tool (pincer.lock), or any tool of the registry."""

    def taken(name: str) -> str | None:
        from pincer.hub.artifact import ArtifactKey, ArtifactKind
        from pincer.hub.lockfile import LOCK_FILENAME, Lockfile

        entry = Lockfile.read(Path(services.home) / LOCK_FILENAME).get(ArtifactKey(kind=ArtifactKind.TOOL, name=name))
        if entry is not None:
            return f"the installed tool {entry.key}@{entry.version} (from {entry.source})"
        if name in services.registry:
            spec = services.registry.get(name)
            return f"the {spec.runtime.value} tool {name!r} (from {spec.source})"
        return None

    return taken


async def plan_build(services: BuilderServices, request: BuildRequest, *, profile: str | None = None) -> PlannedBuild:
    """The plan stage alone, with the configured model: what an approval of the build shows."""
    async with _builder(services, profile=profile, runner_cache=None, progress=None, limits=None, audit=None) as builder:
        return await builder.plan(request)


async def run_build(services: BuilderServices, request: BuildRequest, *, actor: Actor, profile: str | None = None,
                    runner_cache: Path | None = None, progress: Progress | None = None, limits: WasmLimits | None = None,
                    planned: PlannedBuild | None = None, approval_id: str | None = None) -> BuildReport:  # fmt: skip
    """Build with the configured model (``[llm]``, or ``profile``), from ``planned`` on when the
    plan was made (and approved) already; the tool is registered live. What the build installs
    is recorded as ``actor``'s act (``approval_id``: the approval that let it)."""
    from pincer.store.acts import hub_act

    records: list[tuple[str, str, str, str]] = []
    try:
        async with _builder(services, profile=profile, runner_cache=runner_cache, progress=progress, limits=limits,
                            audit=lambda *record: records.append(record)) as builder:  # fmt: skip
            report = await builder.build(request, planned=planned)
    finally:
        for action, key, version, reason in records:
            await services.audit.append(hub_act(actor, action, key, version, reason, approval_id=approval_id))
    await services.reload_hub_artifacts(frozenset({"tool"}))
    return report
