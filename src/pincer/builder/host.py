"""What the builder is given of the service: :class:`BuilderServices`, made by
``pincer.service.Pincer.builder_services()``. This module imports nothing at run time, so the
service (and the REST API, which hands it to ``POST /builds``) makes it without loading the builder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.registry import Registry
    from pincer.secrets.store import SecretStore
    from pincer.store.approvals import ApprovalStore
    from pincer.store.audit import AuditLog
    from pincer.store.grants import GrantStore

__all__ = ["BuilderServices"]


@dataclass(frozen=True, kw_only=True, slots=True)
class BuilderServices:
    """What a build and ``build_tool`` use of the service, made by
    ``pincer.service.Pincer.builder_services()`` (the service sits above the builder): config as
    it is now (a reload replaces it), the home and environment (the model's key, the runner
    cache), the secret store, the registry (names taken), the audit, grant and approval stores,
    and the reload of what pincer.lock covers once a tool is installed."""

    config: Callable[[], Config]
    home: Path
    environ: Mapping[str, str]
    secrets: SecretStore
    registry: Registry
    audit: AuditLog
    grants: GrantStore
    approvals: ApprovalStore
    reload_hub_artifacts: Callable[[frozenset[str]], Awaitable[None]]
