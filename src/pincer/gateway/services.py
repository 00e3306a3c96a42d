"""The one place the gateway reads the whole ``Pincer``: each of its parts is given the few
services it uses (docs/architecture.md, "Who receives what"), made here of an open Pincer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.gateway.mcp_server import McpServices
from pincer.gateway.probes import ProbeServices
from pincer.gateway.tasks import TaskServices

if TYPE_CHECKING:
    from pincer.service import Pincer

__all__ = ["mcp_services", "probe_services", "task_services"]


def task_services(pincer: Pincer) -> TaskServices:
    return TaskServices(
        tasks=pincer.tasks, approvals=pincer.approvals, dispatcher=pincer.dispatcher, db=pincer.db,
        settings=lambda: pincer.config.tasks,
    )  # fmt: skip


def mcp_services(pincer: Pincer) -> McpServices:
    # config and the MCP runtime are read at each use: a reload replaces them on the Pincer.
    return McpServices(
        registry=pincer.registry, dispatcher=pincer.dispatcher, config=lambda: pincer.config,
        tasks=task_services(pincer), upstream=lambda: pincer.mcp,
    )  # fmt: skip


def probe_services(pincer: Pincer) -> ProbeServices:
    return ProbeServices(
        restart_needed=lambda: pincer.restart_needed, readiness=pincer.readiness, metrics=pincer.metrics
    )
