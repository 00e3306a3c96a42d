"""The one place the gateway reads the whole ``Pincer``: each of its parts is given the few
services it uses (docs/architecture.md, "Who receives what"), made here of an open Pincer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.gateway.canvas_live import CanvasServices
from pincer.gateway.hooks import HookServices
from pincer.gateway.mcp_server import McpServices
from pincer.gateway.probes import ProbeServices
from pincer.gateway.tasks import TaskServices
from pincer.gateway.ui.services import DashboardServices

if TYPE_CHECKING:
    from pincer.gateway.rest.common import RestServices
    from pincer.service import Pincer

__all__ = ["canvas_services", "dashboard_services", "hook_services", "mcp_services", "probe_services", "rest_services", "task_services"]


def task_services(pincer: Pincer) -> TaskServices:
    return TaskServices(
        tasks=pincer.tasks, approvals=pincer.approvals, dispatcher=pincer.dispatcher, db=pincer.db,
        settings=lambda: pincer.config.tasks, people=pincer.people,
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


def dashboard_services(pincer: Pincer) -> DashboardServices:
    return DashboardServices(
        config=lambda: pincer.config, home=pincer.home, approvals=pincer.approvals, audit=pincer.audit,
        grants=pincer.grants, runs=pincer.runs, tasks=pincer.tasks, people=pincer.people, oidc_logins=pincer.oidc_logins,
        secrets=pincer.secrets, registry=pincer.registry, dispatcher=pincer.dispatcher, skills=pincer.skills,
        upstream=lambda: pincer.mcp, restart_needed=lambda: pincer.restart_needed, shown=pincer.shown,
    )  # fmt: skip


def rest_services(pincer: Pincer) -> RestServices:
    from pincer.gateway.rest.common import RestServices  # FastAPI: imported at the first REST request

    return RestServices(
        config=lambda: pincer.config, registry=pincer.registry, dispatcher=pincer.dispatcher,
        approvals=pincer.approvals, audit=pincer.audit, runs=pincer.runs, tasks=pincer.tasks,
        triggers=lambda: pincer.triggers, builder=pincer.builder_services(), shown=pincer.shown, people=pincer.people,
        secrets=pincer.secrets,
    )  # fmt: skip


def hook_services(pincer: Pincer) -> HookServices:
    return HookServices(
        config=lambda: pincer.config, secrets=pincer.secrets, triggers=lambda: pincer.triggers, shown=pincer.shown,
        metrics=pincer.metrics,
    )  # fmt: skip


def canvas_services(pincer: Pincer) -> CanvasServices:
    return CanvasServices(
        config=lambda: pincer.config, scanner=pincer.scanner, add_runtime=pincer.add_runtime,
        remove_runtime=pincer.remove_runtime,
    )  # fmt: skip
