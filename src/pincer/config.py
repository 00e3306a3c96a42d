"""``$PINCER_HOME/config.toml``: grants, sessions, limits and settings.

Parsed with pydantic at the edge (the file is user input) into frozen values. Unknown keys are
errors here, unlike foreign manifests: a typo in your own policy must not silently widen or
narrow it. Every error names the key and says what was expected.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import ConfigError, ManifestError, PincerError, UsageError
from pincer.core.values import DEFAULT_TOOL_TIMEOUT_S
from pincer.policy.budget import RateLimit
from pincer.policy.grants import Grant
from pincer.policy.run_budget import RunBudgets
from pincer.policy.session import SessionKind, SessionPolicy
from pincer.safety.hosts import HostPattern
from pincer.safety.limits import DEFAULT_MAX_OUTPUT_BYTES

DEFAULT_MAX_RESOURCE_BYTES = 8_000_000

__all__ = [
    "Config",
    "ConfigFile",
    "ApprovalSettings",
    "AuditSettings",
    "StoreSettings",
    "CacheSettings",
    "OutputSettings",
    "IdempotencySettings",
    "NetworkSettings",
    "ToolSettings",
    "WorkspaceSettings",
    "SandboxSettings",
    "CredentialRule",
    "GatewaySettings",
    "GatewayToken",
    "HubSettings",
    "HubSource",
    "SkillsSettings",
    "ModelSettings",
    "LlmProfile",
    "LlmSettings",
    "Price",
    "AgentSettings",
    "BuiltinSettings",
    "HookSettings",
    "JobSettings",
    "TriggersSettings",
    "load_config",
    "parse_config",
    "CONFIG_FILENAME",
    "MAX_CONFIG_BYTES",
]

CONFIG_FILENAME = "config.toml"
MAX_CONFIG_BYTES = 1_048_576


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _home(info: ValidationInfo) -> Path | None:
    """The ``$PINCER_HOME`` relative paths are read against (``parse_config`` passes it)."""
    context = info.context
    return context.get("home") if isinstance(context, dict) else None


def _under_home(text: str, home: Path | None) -> Path:
    path = Path(text)
    if home is None:
        return path  # validated without a home (``pincer config show``): the path as written
    expanded = path.expanduser()
    return expanded if expanded.is_absolute() else home / expanded


def _home_path(value: Any, info: ValidationInfo) -> Path:
    if not isinstance(value, str):  # a TOML string, as the key's docs say; not any path-like
        raise PydanticCustomError("string_type", "Input should be a valid string")
    return _under_home(value, _home(info))


# A path in config.toml: a string, relative ones under $PINCER_HOME.
_HomePath = Annotated[Path, BeforeValidator(_home_path)]


# Each section of config.toml is one frozen model below: its keys, bounds and defaults are
# written here once, and the code reads these very objects (``config.gateway.port``).


class ApprovalSettings(_Model):
    """``[approvals]``: calls that need a person's answer."""

    timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    # An MCP client that cannot take an elicitation: "wait" keeps the call open (with progress
    # notifications saying how to answer), "return" answers at once with the approval id.
    when_no_elicitation: Literal["wait", "return"] = "wait"


class AuditSettings(_Model):
    synchronous: Literal["normal", "full"] = "normal"


class StoreSettings(_Model):
    """``[store]``: where shared state lives. No url: SQLite under $PINCER_HOME (one machine).
    A ``postgresql://`` url: PostgreSQL, for several gateways (docs/scale-out.md); its schema is
    made by ``pincer db upgrade``. Keep the password out of the url: name a secret in
    ``password_secret`` (``pincer secrets set``), or let libpq read ``PGPASSFILE``."""

    url: str | None = Field(default=None, pattern=r"^postgres(ql)?://", max_length=2_000)
    password_secret: str | None = Field(default=None, max_length=200)
    pool_size: int = Field(default=8, ge=1, le=200)
    # The machine's name in the owner tokens other gateways read (docs/scale-out.md: liveness).
    host_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^/\s]+$")


class CacheSettings(_Model):
    """``[cache]``: a ``redis://`` url makes rate limits exact across gateways and carries
    approval answers between them at once (docs/scale-out.md)."""

    url: str | None = Field(default=None, pattern=r"^rediss?://", max_length=2_000)


class OutputSettings(_Model):
    # The safety layer's limit when nothing names one (below this one), so written once there.
    max_bytes: int = Field(default=DEFAULT_MAX_OUTPUT_BYTES, ge=1_000, le=100_000_000)
    # An upstream MCP server's resources and prompts read through the gateway: an MCP App's page
    # is one bundled HTML file (the ext-apps examples' run to ~220 KB), a document may be larger.
    max_resource_bytes: int = Field(default=DEFAULT_MAX_RESOURCE_BYTES, ge=1_000, le=100_000_000)


class IdempotencySettings(_Model):
    ttl_s: float = Field(default=300.0, gt=0, le=7 * 86_400)
    max_entries: int = Field(default=10_000, ge=1, le=10_000_000)
    # OpenClaw's rule: every side-effecting call carries a key. Off by default: MCP clients send none.
    required: bool = False


class TasksSettings(_Model):
    """``[tasks]``: MCP Tasks (``io.modelcontextprotocol/tasks``, docs/tasks.md): calls answered
    with a task handle that the client polls, stored in the store so they outlive the connection."""

    enabled: bool = True
    # A call still running this long is handed back as a task (a client that declared the
    # extension); a call that must wait for a person is handed back at once.
    after_s: float = Field(default=5.0, ge=0, le=3_600)
    ttl_s: float = Field(default=3_600.0, gt=0, le=30 * 86_400)
    poll_interval_ms: int = Field(default=1_000, ge=50, le=600_000)
    # Tasks not yet finished per session; past it a call that would become a task is refused.
    max_live_per_session: int = Field(default=100, ge=1, le=100_000)
    # Tools that run only as tasks: a client without the extension gets -32021.
    only: tuple[str, ...] = Field(default=(), max_length=1_000)


class NetworkSettings(_Model):
    allow_private: bool = False


class OpenApiSettings(_Model):
    # GitHub's own description (@octokit/openapi) is 13 MB, its dereferenced one 73 MB.
    max_document_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024, le=1024 * 1024 * 1024)
    max_request_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)


class ToolSettings(_Model):
    timeout_s: float = Field(default=DEFAULT_TOOL_TIMEOUT_S, gt=0, le=3_600)
    max_depth: int = Field(default=4, ge=0, le=32)
    # tools/call to stdio and streamable HTTP MCP servers past the SDK's client session
    # (runtimes/mcp/lean.py); off until the whole suite has run with it on.
    mcp_lean_calls: bool = True
    # An MCP server whose env or headers name a per-person secret runs once per person
    # (runtimes/mcp/person_instances.py): at most this many of one server, each closed when idle.
    mcp_max_person_instances: int = Field(default=8, ge=1, le=1_000)
    mcp_person_idle_s: float = Field(default=600.0, gt=0, le=86_400)


class _Grant(_Model):
    tool: str = Field(min_length=1, max_length=256)
    effects: dict[EffectKind, Mode] = Field(default_factory=dict)
    default: Mode | None = None
    hosts: list[str] | None = None
    expires: dt.datetime | None = None
    max_invocations: int | None = Field(default=None, ge=1)
    sessions: list[str] | None = None  # session names (* wildcards) or kind:main / kind:non-main


class _Session(_Model):
    kind: SessionKind = SessionKind.NON_MAIN
    allow: list[str] | None = None
    deny: list[str] | None = None


class _Limit(_Model):
    calls_per_minute: int | None = Field(default=None, ge=1)
    calls_per_hour: int | None = Field(default=None, ge=1)


class CredentialRule(_Model):
    """One ``[[credentials]]``: inject a secret into requests of the ``http`` built-in to matching hosts."""

    secret: str = Field(min_length=1, max_length=128)
    location: Literal["bearer", "basic", "header", "query_param"] = "bearer"
    name: str | None = None  # header or query parameter name
    prefix: str | None = None
    host_patterns: tuple[str, ...] = Field(min_length=1)
    path_patterns: tuple[str, ...] = ()


class WorkspaceSettings(_Model):
    path: str | None = None


class SandboxSettings(_Model):
    backend: Literal["auto", "bwrap", "docker", "podman", "landlock"] = "auto"
    main_session_on_host: bool = False
    use_workspace: bool = False
    container_image: str | None = None
    # The scratch /work of one run, in total (tmpfs size under bwrap): 1 MiB .. 64 GiB.
    workdir_max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024, le=64 * 1024**3)


class GatewayToken(_Model):
    """An extra gateway token (by its sha256) and the session its calls run under."""

    # The sha256 of a token, never the token itself: config.toml is not a secret store.
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    session: str = Field(min_length=1, max_length=128)


class GatewaySettings(_Model):
    """``[gateway]``: where ``pincer serve`` listens and who may talk to it.

    ``session`` is the session of the token generated at first start; ``tokens`` map more tokens
    to other sessions. ``allowed_hosts``/``allowed_origins`` extend the loopback names accepted
    in Host and Origin headers (DNS-rebinding protection). A non-loopback ``host`` needs
    ``allow_remote = true``. ``canvas`` turns on the canvas tools (``canvas``, ``a2ui_push``,
    ``a2ui_reset``) and their pages at ``/ui/canvas/SESSION``; ``a2ui_catalogs`` registers more
    A2UI catalogs (files, relative to the pincer home, or https URLs) besides the built-in ones.
    """

    host: str = Field(default="127.0.0.1", min_length=1, max_length=255)
    port: int = Field(default=8765, ge=0, le=65_535)
    allow_remote: bool = False
    session: str = Field(default="main", min_length=1, max_length=128)
    max_body_bytes: int = Field(default=1_048_576, ge=1_024, le=67_108_864)
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    tokens: tuple[GatewayToken, ...] = ()
    canvas: bool = False
    a2ui_catalogs: tuple[str, ...] = Field(default=(), max_length=64)

    def normalized(self) -> GatewaySettings:
        """These settings with hosts and origins as they are compared: lower-case, no trailing /
        (``pincer config show`` prints them as written)."""
        hosts = tuple(h.lower() for h in self.allowed_hosts)
        origins = tuple(o.lower().rstrip("/") for o in self.allowed_origins)
        return self.model_copy(update={"allowed_hosts": hosts, "allowed_origins": origins})


class SkillsSettings(_Model):
    """``[skills]``: where skills come from besides the standard roots, the walk's limits, the
    selection and catalog budgets, and where skill dependencies are installed from. ``config``
    holds the values skills ask for with ``requires.config`` (dotted keys). A relative
    ``extra_dirs`` entry is under ``$PINCER_HOME``."""

    enabled: bool = True
    extra_dirs: tuple[_HomePath, ...] = Field(default=(), max_length=64)
    max_candidates_per_root: int = Field(default=300, ge=1, le=100_000)
    max_loaded_per_root: int = Field(default=200, ge=1, le=100_000)
    max_file_bytes: int = Field(default=262_144, ge=1_024, le=16_777_216)
    max_selected: int = Field(default=3, ge=1, le=100)
    max_selected_tokens: int = Field(default=6_000, ge=100, le=1_000_000)
    catalog_max_skills: int = Field(default=150, ge=1, le=10_000)
    catalog_max_chars: int = Field(default=30_000, ge=1_000, le=10_000_000)
    max_render_chars: int = Field(default=1_000_000, ge=10_000, le=100_000_000)
    tool_separator: Literal[".", "_"] = "."
    npm_registry: str = Field(default="https://registry.npmjs.org/", min_length=8, max_length=2048)
    pip_index: str = Field(default="https://pypi.org/simple", min_length=8, max_length=2048)
    auto_install_deps: bool = True
    # The workspace's skill roots are written by agents (write_file, exec): installed-level
    # unless a person says the skills there are theirs.
    trust_workspace: bool = False
    config: dict[str, Any] = Field(default_factory=dict)


_SECRET_NAME = r"^[A-Za-z0-9_.-]{1,128}$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_PROVIDER = Literal["openai", "anthropic"]


class _ModelKeys(_Model):
    """The keys of one model setting, at their defaults: ``[llm]`` is one, a resolved profile another."""

    provider: _PROVIDER = "openai"
    model: str | None = Field(default=None, min_length=1, max_length=256)
    base_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    api_key_secret: str | None = Field(default=None, pattern=_SECRET_NAME)
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME)
    timeout_s: float = Field(default=60.0, gt=0, le=3_600)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_output_tokens: int = Field(default=4_096, ge=1, le=1_000_000)
    stream: bool = True


class ModelSettings(_ModelKeys):
    """One model to talk to: ``[llm]``, or a ``[llm.profiles.NAME]`` over it. The API key is never
    here: ``api_key_secret`` names an entry of the secret store, ``api_key_env`` an environment
    variable; the provider reads the value when a run starts."""

    profile: str | None = None  # the profile these settings came from
    key_table: str = "[llm]"  # the table that named the API key, for messages about it


class LlmProfile(_Model):
    """A named model setting; what it leaves out (None) comes from [llm]."""

    provider: _PROVIDER | None = None
    model: str | None = Field(default=None, min_length=1, max_length=256)
    base_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    api_key_secret: str | None = Field(default=None, pattern=_SECRET_NAME)
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME)
    timeout_s: float | None = Field(default=None, gt=0, le=3_600)
    max_retries: int | None = Field(default=None, ge=0, le=10)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    stream: bool | None = None


class LlmSettings(_ModelKeys):
    """``[llm]`` and its profiles. ``profile`` names the profile used when a run names none."""

    profile: str | None = Field(default=None, min_length=1, max_length=64)
    profiles: dict[str, LlmProfile] = Field(default_factory=dict)

    @property
    def default(self) -> ModelSettings:
        """``[llm]`` itself as a model setting."""
        return ModelSettings(**{key: getattr(self, key) for key in _ModelKeys.model_fields})

    def resolve(self, profile: str | None = None) -> ModelSettings:
        """The settings of ``profile`` (else ``[llm] profile``, else ``[llm]`` itself)."""
        name = profile or self.profile
        if name is None:
            return self.default
        found = self.profiles.get(name)
        if found is None:
            known = ", ".join(sorted(self.profiles)) or "none are defined"
            raise ConfigError(
                f"no model profile named {name!r} (profiles: {known})",
                hint="define it as a [llm.profiles.NAME] table in config.toml, or leave out --profile",
            )
        given = {key: value for key, value in found.model_dump().items() if value is not None}
        if given.get("provider", self.provider) != self.provider:
            # A profile of another provider inherits neither [llm]'s URL (another wire format)
            # nor its key (sending one provider's key to another would leak it).
            for key in ("base_url", "api_key_secret", "api_key_env"):
                given.setdefault(key, None)
        names_key = given.get("api_key_secret") or given.get("api_key_env")
        key_table = f"[llm.profiles.{name}]" if names_key else "[llm]"
        return self.default.model_copy(update={**given, "profile": name, "key_table": key_table})


class Price(_Model):
    """USD per million tokens."""

    input_per_mtok: float = Field(ge=0, le=10_000)
    output_per_mtok: float = Field(ge=0, le=10_000)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, le=10_000)


# A run's budgets when nothing names them: the policy layer's (below this one), so written once there.
_BUDGETS = RunBudgets()


class AgentSettings(_Model):
    """``[agent]``: the agent loop's defaults. Budgets apply per run unless a run names its own."""

    session: str = Field(default="main", min_length=1, max_length=128)
    max_tool_definitions: int = Field(default=40, ge=1, le=10_000)
    max_parallel_tool_calls: int = Field(default=4, ge=1, le=64)
    taint: Literal["ask", "deny", "off"] = "ask"
    trusted_output: tuple[str, ...] = Field(default=(), max_length=1_000)
    max_turns: int = Field(default=_BUDGETS.turns, ge=1, le=10_000)
    max_tool_calls: int = Field(default=_BUDGETS.tool_calls, ge=0, le=100_000)
    max_input_tokens: int = Field(default=_BUDGETS.input_tokens, ge=1, le=1_000_000_000)
    max_output_tokens: int = Field(default=_BUDGETS.output_tokens, ge=1, le=1_000_000_000)
    max_cost_usd: float | None = Field(default=_BUDGETS.cost_usd, gt=0, le=1_000_000)
    deadline_s: float = Field(default=_BUDGETS.deadline_s, gt=0, le=7 * 86_400)
    prices: dict[str, Price] = Field(default_factory=dict)


class HubSource(_Model):
    """One ``[[hub.sources]]``: a registry folder or server.json documents (``path``; relative:
    under ``$PINCER_HOME``), or a hub server (``url``, with the secret-store entry of its publisher
    token)."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    path: str | None = Field(default=None, min_length=1, max_length=4096)
    url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    token_secret: str | None = Field(default=None, min_length=1, max_length=128)
    format: Literal["auto", "ironclaw", "mcp-registry"] = "auto"

    @field_validator("path")
    @classmethod
    def _resolve_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else str(_under_home(value, _home(info)))


class HubSettings(_Model):
    """``[hub]``: the catalog sources and what one artifact may weigh (docs/hub.md)."""

    sources: tuple[HubSource, ...] = Field(default=(), max_length=64)
    max_archive_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    max_unpacked_bytes: int = Field(default=256 * 1024 * 1024, ge=1024, le=16 * 1024**3)
    max_files: int = Field(default=2_000, ge=1, le=100_000)
    download_timeout_s: float = Field(default=120.0, gt=0, le=3_600)
    signing_key: str = Field(default="hub_signing_key", min_length=1, max_length=128)


_HOOK_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
_SECRET_REF = r"^[A-Za-z0-9_.-]{1,128}$"


class HookSettings(_Model):
    """One ``[[hooks]]`` table: ``POST /hooks/NAME``. ``secret`` names an entry of the secret store
    (the bearer token, the ``whsec_...`` key, or GitHub's HMAC key), never the value. With neither
    ``skill`` nor ``message`` a delivery runs every eligible skill whose ``webhook:`` trigger
    matches its event."""

    name: str = Field(pattern=_HOOK_NAME)
    skill: str | None = Field(default=None, min_length=1, max_length=64)
    message: str | None = Field(default=None, min_length=1, max_length=4_096)
    auth: Literal["bearer", "standard", "github"]
    secret: str = Field(pattern=_SECRET_REF)
    events: tuple[str, ...] = Field(default=(), max_length=256)
    params: dict[str, str] = Field(default_factory=dict, max_length=64)
    session: str | None = Field(default=None, min_length=1, max_length=128)
    max_body_bytes: int | None = Field(default=None, ge=1_024, le=67_108_864)


class JobSettings(_Model):
    """One ``[[jobs]]`` table: a scheduled run kept in the store like ``pincer cron add``'s."""

    name: str = Field(min_length=1, max_length=128)
    cron: str | None = Field(default=None, min_length=1, max_length=256)
    at: str | None = Field(default=None, min_length=1, max_length=64)
    every: str | None = Field(default=None, min_length=1, max_length=64)
    tz: str | None = Field(default=None, min_length=1, max_length=64)
    skill: str | None = Field(default=None, min_length=1, max_length=64)
    message: str | None = Field(default=None, min_length=1, max_length=16_384)
    params: dict[str, Any] = Field(default_factory=dict, max_length=64)
    session: str | None = Field(default=None, min_length=1, max_length=128)
    max_concurrent: int | None = Field(default=None, ge=1, le=64)
    retries: int | None = Field(default=None, ge=0, le=20)
    jitter_s: float | None = Field(default=None, ge=0, le=86_400)
    enabled: bool = True


class TriggersSettings(_Model):
    """``[triggers]``: webhook limits, replay memory, the run queue, the scheduler's defaults."""

    enabled: bool = True
    hook_max_body_bytes: int = Field(default=262_144, ge=1_024, le=67_108_864)
    signature_tolerance_s: float = Field(default=300.0, gt=0, le=86_400)
    max_failures_per_minute: int = Field(default=20, ge=1, le=100_000)
    delivery_retention_days: float = Field(default=30.0, gt=0, le=3_650)
    payload_record_bytes: int = Field(default=8_192, ge=1_024, le=1_048_576)
    max_queued: int = Field(default=10_000, ge=1, le=10_000_000)
    max_running: int = Field(default=8, ge=1, le=1_024)
    misfire_grace_s: float = Field(default=86_400.0, ge=0, le=366 * 86_400)
    retries: int = Field(default=3, ge=0, le=20)
    retry_backoff_s: float = Field(default=30.0, gt=0, le=86_400)
    retry_backoff_max_s: float = Field(default=3_600.0, gt=0, le=7 * 86_400)
    max_concurrent: int = Field(default=1, ge=1, le=64)
    jitter_s: float = Field(default=0.0, ge=0, le=86_400)


class BuiltinSettings(_Model):
    """``[builtins.NAME]``: one bundled tool (``github``, ``web_fetch``, ``web_search``,
    ``llm_context``) or an API they share (``brave``): whether it is registered, the base URL it
    calls (the person's permission for exactly that origin), and how it is narrowed
    (docs/builtins.md)."""

    enabled: bool = False
    base_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    actions: tuple[str, ...] | None = Field(default=None, max_length=256)
    toolsets: tuple[str, ...] | None = Field(default=None, max_length=64)
    read_only: bool = False
    # OAuth providers (``[builtins.google]``, ``[builtins.slack]``): the login's endpoints, for a
    # local authorization server in tests or a proxy; ``pincer auth setup NAME`` uses them.
    authorization_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    token_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    revocation_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    # composio: each enabled action's effects, as the person declares them (no entry: config error).
    effects: dict[str, tuple[EffectKind, ...]] | None = Field(default=None, max_length=256)
    # [builtins.browser] only (unset elsewhere; _to_config refuses them on another built-in).
    idle_timeout_s: float | None = Field(default=None, gt=0, le=86_400)
    max_snapshot_chars: int | None = Field(default=None, ge=1_000, le=1_000_000)
    max_download_bytes: int | None = Field(default=None, ge=1, le=10 * 1024**3)
    profile_dir: str | None = Field(default=None, min_length=1, max_length=4096)

    @property
    def profile_root(self) -> Path:
        """browser: where each launch's fresh profile directory is made (set by _to_config)."""
        return Path(self.profile_dir or "browser")


_BROWSER_ONLY = ("idle_timeout_s", "max_snapshot_chars", "max_download_bytes", "profile_dir")


class TelemetrySettings(_Model):
    """``[telemetry]``: OpenTelemetry traces (off by default; the ``OTEL_*`` variables configure the
    exporter) and the Prometheus ``/metrics`` endpoint (docs/operations.md). Read at start: a
    change waits for a restart of ``pincer serve``."""

    traces: bool = False
    # The OTLP/HTTP traces URL; unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT
    # + /v1/traces, else http://localhost:4318/v1/traces (the official exporter reads them).
    endpoint: str | None = Field(default=None, pattern=r"^https?://", max_length=2_000)
    # Tool arguments and results on the execute_tool spans, leak-scanned and cut to content_max_chars.
    record_content: bool = False
    content_max_chars: int = Field(default=1_024, ge=16, le=65_536)
    metrics: bool = True
    # A second listener on 127.0.0.1 serving /metrics without a token; unset: only the gateway's
    # /metrics, with a main session's token.
    metrics_port: int | None = Field(default=None, ge=1, le=65_535)


class RetentionSettings(_Model):
    """``[retention]``: how long finished things stay in the store before a gateway prunes them
    (hourly; ``pincer db prune`` at once). 0 keeps them forever. The audit log is not pruned
    here: its records leave the database only through ``pincer audit archive`` (docs/audit.md)."""

    approvals_days: float = Field(default=30.0, ge=0, le=36_500)
    runs_days: float = Field(default=90.0, ge=0, le=36_500)
    webhook_payloads_days: float = Field(default=30.0, ge=0, le=36_500)


_GITHUB_GROUP = re.compile(r"org:[A-Za-z0-9-]{1,39}|team:[A-Za-z0-9-]{1,39}/[A-Za-z0-9_.-]{1,100}")


class OidcProvider(_Model):
    """``[auth.oidc.NAME]``: a single sign-on provider the dashboard signs people in with, by
    ``kind``: ``oidc`` (OpenID Connect: authorization code with PKCE; the id_token's signature,
    issuer, audience, expiry and nonce checked; ``issuer`` serves
    ``/.well-known/openid-configuration``) or ``github`` (GitHub's OAuth: authorization code with
    PKCE, then the verified primary email and the orgs and teams from its REST API)."""

    kind: Literal["oidc", "github"] = "oidc"
    issuer: str | None = Field(default=None, pattern=r"^https?://", max_length=2_000)
    client_id: str = Field(min_length=1, max_length=512)
    # The name of a secret in pincer's store holding the client secret (`pincer secrets set NAME`);
    # unset: a public client (PKCE only). GitHub always wants one.
    client_secret_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    # kind = "github" only (kind oidc ignores them): where GitHub is (Enterprise Server, a local stand-in).
    web_url: str | None = Field(default=None, pattern=r"^https?://", max_length=2_000)
    api_url: str | None = Field(default=None, pattern=r"^https?://", max_length=2_000)
    label: str | None = Field(default=None, max_length=80)
    # Unset: openid email profile (oidc); read:user user:email read:org (github).
    scopes: tuple[str, ...] | None = None
    groups_claim: str = Field(default="groups", min_length=1, max_length=128)
    # Who signs in with which roles: a person in a group of the id_token (for github: an
    # `org:ORG` or `team:ORG/TEAM-SLUG` they belong to), at a domain of a verified email, or
    # with that email gets the roles named; every match adds its roles.
    group_roles: dict[str, tuple[str, ...]] = Field(default_factory=dict, max_length=1_000)
    domain_roles: dict[str, tuple[str, ...]] = Field(default_factory=dict, max_length=1_000)
    email_roles: dict[str, tuple[str, ...]] = Field(default_factory=dict, max_length=10_000)
    # An email counts only when the id_token says `email_verified: true`: a provider that lets a
    # user set any address would otherwise sign them in as the person who owns it. Set true only
    # for a provider that sends no such claim and issues every address itself (a workforce
    # directory whose email claim users cannot edit).
    assume_email_verified: bool = False

    @model_validator(mode="after")
    def _kind_keys(self) -> OidcProvider:
        if self.kind == "oidc":
            if self.issuer is None:
                raise ValueError("a kind = \"oidc\" provider needs issuer (its /.well-known/openid-configuration is read)")
            return self
        if self.issuer is not None or self.assume_email_verified:
            raise ValueError("kind = \"github\" takes no issuer nor assume_email_verified (GitHub says which emails it verified)")
        if self.client_secret_name is None:
            raise ValueError("kind = \"github\" needs client_secret_name (a GitHub OAuth app always has a client secret)")
        for key in self.group_roles:
            if not _GITHUB_GROUP.fullmatch(key):
                raise ValueError(f"group_roles key {key!r} is neither org:ORG nor team:ORG/TEAM-SLUG")
        return self

    def scope_list(self) -> tuple[str, ...]:
        if self.scopes is not None:
            return self.scopes
        return ("read:user", "user:email", "read:org") if self.kind == "github" else ("openid", "email", "profile")

    @model_validator(mode="after")
    def _real_roles(self) -> OidcProvider:
        from pincer.policy.roles import parse_roles

        for rules in (self.group_roles, self.domain_roles, self.email_roles):
            for key, roles in rules.items():
                if not roles:
                    raise ValueError(f"{key!r} is given no role")
                try:
                    parse_roles(roles)  # a role that is none: refused when config.toml is read
                except PincerError as exc:
                    raise ValueError(exc.message) from None
        return self

    def roles_for(self, *, email: str, groups: Iterable[str]) -> list[str]:
        """The roles (as written) the rules give a person with this verified email and groups."""
        domain = email.rpartition("@")[2]
        found: list[str] = []
        matched = [r for g in groups for r in self.group_roles.get(g, ())]
        matched += [r for d, roles in self.domain_roles.items() if d.lower() == domain for r in roles]
        matched += [r for e, roles in self.email_roles.items() if e.lower() == email for r in roles]
        found.extend(r for r in matched if r not in found)
        return found


class SecretsSettings(_Model):
    """``[secrets]``: which secrets each person holds their own value of (docs/teams.md). A call
    made on a person's behalf is given that person's value, never another's; a call on no
    person's behalf is refused it. Every other secret is shared: one value for every call."""

    per_person: tuple[Annotated[str, Field(pattern=_SECRET_NAME)], ...] = Field(default=(), max_length=1_000)


class AuthSettings(_Model):
    """``[auth]``: how people sign in to the dashboard (docs/teams.md)."""

    token_sign_in: bool = True
    oidc: dict[str, OidcProvider] = Field(default_factory=dict, max_length=32)


class ConfigFile(_Model):
    """config.toml as written: one model per section (``docs/config.md`` is generated from it)."""

    approvals: ApprovalSettings = ApprovalSettings()
    audit: AuditSettings = AuditSettings()
    store: StoreSettings = StoreSettings()
    cache: CacheSettings = CacheSettings()
    output: OutputSettings = OutputSettings()
    idempotency: IdempotencySettings = IdempotencySettings()
    tasks: TasksSettings = TasksSettings()
    network: NetworkSettings = NetworkSettings()
    openapi: OpenApiSettings = OpenApiSettings()
    tools: ToolSettings = ToolSettings()
    workspace: WorkspaceSettings = WorkspaceSettings()
    sandbox: SandboxSettings = SandboxSettings()
    grants: list[_Grant] = Field(default_factory=list)
    sessions: dict[str, _Session] = Field(default_factory=dict)
    limits: dict[str, _Limit] = Field(default_factory=dict)
    credentials: tuple[CredentialRule, ...] = ()
    hooks: tuple[HookSettings, ...] = Field(default=(), max_length=1_000)
    jobs: tuple[JobSettings, ...] = Field(default=(), max_length=10_000)
    gateway: GatewaySettings = GatewaySettings()
    skills: SkillsSettings = SkillsSettings()
    llm: LlmSettings = LlmSettings()
    agent: AgentSettings = AgentSettings()
    hub: HubSettings = HubSettings()
    triggers: TriggersSettings = TriggersSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    retention: RetentionSettings = RetentionSettings()
    auth: AuthSettings = AuthSettings()
    secrets: SecretsSettings = SecretsSettings()
    builtins: dict[str, BuiltinSettings] = Field(default_factory=dict, max_length=64)


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """The settings in force: config.toml's section models as parsed (their defaults live there
    only), the paths they name, and the policy values built from grants, sessions and limits."""

    home: Path
    workspace: Path
    approvals: ApprovalSettings = field(default_factory=ApprovalSettings)
    audit: AuditSettings = field(default_factory=AuditSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    idempotency: IdempotencySettings = field(default_factory=IdempotencySettings)
    tasks: TasksSettings = field(default_factory=TasksSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    openapi: OpenApiSettings = field(default_factory=OpenApiSettings)
    tools: ToolSettings = field(default_factory=ToolSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    grants: tuple[Grant, ...] = ()
    sessions: dict[str, SessionPolicy] = field(default_factory=dict)
    limits: tuple[tuple[str, RateLimit], ...] = ()
    credentials: tuple[CredentialRule, ...] = ()
    # The credentials above as a capabilities manifest: the injection rules for tools that carry
    # no manifest of their own (the http built-in).
    credential_capabilities: Capabilities | None = None
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    skills: SkillsSettings = field(default_factory=SkillsSettings)
    llm: LlmSettings = field(default_factory=LlmSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    hub: HubSettings = field(default_factory=HubSettings)
    triggers: TriggersSettings = field(default_factory=TriggersSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    secrets: SecretsSettings = field(default_factory=SecretsSettings)
    hooks: tuple[HookSettings, ...] = ()
    jobs: tuple[JobSettings, ...] = ()
    builtins: Mapping[str, BuiltinSettings] = field(default_factory=dict)

    # The names the code has always read, each one key of a section above.
    @property
    def approval_timeout_s(self) -> float:
        return self.approvals.timeout_s

    @property
    def approval_when_no_elicitation(self) -> str:
        return self.approvals.when_no_elicitation

    @property
    def audit_synchronous(self) -> str:
        return self.audit.synchronous

    @property
    def max_output_bytes(self) -> int:
        return self.output.max_bytes

    @property
    def idempotency_ttl_s(self) -> float:
        return self.idempotency.ttl_s

    @property
    def idempotency_max_entries(self) -> int:
        return self.idempotency.max_entries

    @property
    def idempotency_required(self) -> bool:
        return self.idempotency.required

    @property
    def allow_private_network(self) -> bool:
        return self.network.allow_private

    @property
    def tool_timeout_s(self) -> float:
        return self.tools.timeout_s

    @property
    def max_call_depth(self) -> int:
        return self.tools.max_depth

    @property
    def sandbox_backend(self) -> str:
        return self.sandbox.backend

    @property
    def sandbox_main_session_on_host(self) -> bool:
        return self.sandbox.main_session_on_host

    @property
    def sandbox_use_workspace(self) -> bool:
        return self.sandbox.use_workspace

    @property
    def sandbox_container_image(self) -> str | None:
        return self.sandbox.container_image

    @property
    def sandbox_workdir_max_bytes(self) -> int:
        return self.sandbox.workdir_max_bytes

    def hook(self, name: str) -> HookSettings | None:
        return next((h for h in self.hooks if h.name == name), None)

    def session(self, name: str) -> SessionPolicy:
        return self.sessions.get(name) or SessionPolicy.default_for(name)

    def rate_limit(self, tool: str) -> RateLimit:
        """The most specific limit whose pattern matches the tool; exact names win."""
        best: tuple[tuple[int, int], RateLimit] | None = None
        for pattern, limit in self.limits:
            if fnmatch.fnmatchcase(tool.lower(), pattern.lower()):
                rank = (0 if "*" in pattern else 1, len(pattern))
                if best is None or rank > best[0]:
                    best = (rank, limit)
        return best[1] if best else RateLimit()


def _describe(exc: ValidationError, source: str) -> ConfigError:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    problems = len(exc.errors())
    more = f" (and {problems - 1} more problem{'s' if problems > 2 else ''})" if problems > 1 else ""
    # Arrays are tuples here (frozen values); a person wrote a TOML array, a list.
    message = first["msg"].replace("valid tuple", "valid list").replace("Tuple should", "List should")
    return ConfigError(
        f"{source}: {key}: {message}{more}",
        hint="fix that key; docs/config.md lists every key and docs/config-example.md shows a whole file",
    )


def parse_config(text: str, *, home: Path, source: str = CONFIG_FILENAME) -> Config:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}", hint="fix the syntax at that line") from exc
    try:
        data = ConfigFile.model_validate(raw, context={"home": home})
    except ValidationError as exc:
        raise _describe(exc, source) from None
    return _to_config(data, home=home, source=source)


# [builtins.NAME] sections: the bundled tools, and an API several of them call (base_url only).
# The Google Workspace tools (gmail ... google_slides): one login, [builtins.google], serves all six.
BUILTIN_TOOLS = (
    "github",
    "web_fetch",
    "web_search",
    "llm_context",
    "gmail",
    "google_calendar",
    "google_docs",
    "google_drive",
    "google_sheets",
    "google_slides",
    "slack",
    "telegram",
    "portfolio",
    "composio",
    "browser",
)
# [builtins.slack] is a tool now (the chat tools); its OAuth endpoints live in the same section.
BUILTIN_SHARED = ("brave", "google", "dune")


def _with_browser_profile(builtins: dict[str, BuiltinSettings], home: Path) -> dict[str, BuiltinSettings]:
    """``[builtins.browser] profile_dir`` made absolute: relative to $PINCER_HOME, default ``browser``."""
    browser = builtins.get("browser")
    if browser is None:
        return builtins
    where = str(_under_home(browser.profile_dir or "browser", home))
    return {**builtins, "browser": browser.model_copy(update={"profile_dir": where})}


def _to_config(data: ConfigFile, *, home: Path, source: str) -> Config:
    """The checks that span keys (each error names its key), and the policy values."""
    for name in data.builtins:
        if name not in BUILTIN_TOOLS + BUILTIN_SHARED:
            known = ", ".join(f"[builtins.{n}]" for n in BUILTIN_TOOLS + BUILTIN_SHARED)
            raise ConfigError(f"{source}: [builtins.{name}] is not a built-in pincer knows", hint=f"use one of {known}")
        if name != "browser":
            for key in _BROWSER_ONLY:
                if getattr(data.builtins[name], key) is not None:
                    raise ConfigError(
                        f"{source}: [builtins.{name}] {key} is a setting of the browser only",
                        hint=f"remove {key} here: only the browser built-in has it (docs/browser.md)",
                    )
    grants = []
    for index, g in enumerate(data.grants):
        if not g.effects and g.default is None:
            raise ConfigError(
                f"{source}: grants.{index}: grant for {g.tool!r} sets neither effects nor default",
                hint='add effects = { network = "allow" } or default = "allow"',
            )
        for host in g.hosts or ():
            try:
                HostPattern.parse(host)
            except UsageError as exc:
                raise ConfigError(
                    f"{source}: grants.{index}: hosts entry {host!r} is not a host pattern: {exc.message}",
                    hint='write hosts = ["api.example.com", "*.example.com", "127.0.0.1:8080"]',
                ) from None
        expires = g.expires
        if expires is not None and expires.tzinfo is None:
            expires = expires.replace(tzinfo=dt.UTC)
        grants.append(
            Grant(
                tool=g.tool,
                effects=dict(g.effects),
                default=g.default,
                hosts=tuple(h.lower() for h in g.hosts) if g.hosts is not None else None,
                expires_at=expires.timestamp() if expires else None,
                max_invocations=g.max_invocations,
                sessions=tuple(g.sessions) if g.sessions is not None else None,
                source=source,
            )
        )
    sessions = {}
    for name, s in data.sessions.items():
        base = SessionPolicy.default_for(name) if s.kind is SessionKind.NON_MAIN else None
        sessions[name] = SessionPolicy(
            name=name,
            kind=s.kind,
            allow=tuple(s.allow) if s.allow is not None else (base.allow if base else ()),
            deny=tuple(s.deny) if s.deny is not None else (base.deny if base else ()),
            source=source,
        )
    for index, c in enumerate(data.credentials):
        if c.location in ("header", "query_param") and not c.name:
            raise ConfigError(
                f"{source}: credentials.{index}.name: a {c.location} credential needs the name to use",
                hint='for example name = "X-Api-Key"',
            )
    _check_llm(data.llm, source)
    _check_hub(data.hub, source)
    _check_hooks(data.hooks, source)
    _check_jobs(data.jobs, source)
    workspace = Path(data.workspace.path).expanduser() if data.workspace.path else home / "workspace"
    return Config(
        home=home,
        workspace=workspace,
        approvals=data.approvals,
        audit=data.audit,
        store=data.store,
        cache=data.cache,
        output=data.output,
        idempotency=data.idempotency,
        tasks=data.tasks,
        network=data.network,
        openapi=data.openapi,
        tools=data.tools,
        sandbox=data.sandbox,
        grants=tuple(grants),
        sessions=sessions,
        limits=tuple(
            (pattern, RateLimit(calls_per_minute=lim.calls_per_minute, calls_per_hour=lim.calls_per_hour))
            for pattern, lim in data.limits.items()
        ),
        credentials=data.credentials,
        credential_capabilities=_credential_capabilities(data.credentials, source) if data.credentials else None,
        gateway=data.gateway.normalized(),
        skills=data.skills,
        llm=data.llm,
        agent=data.agent,
        hub=data.hub,
        triggers=data.triggers,
        telemetry=data.telemetry,
        retention=data.retention,
        auth=data.auth,
        secrets=data.secrets,
        hooks=data.hooks,
        jobs=data.jobs,
        builtins=_with_browser_profile(data.builtins, home),
    )


def _check_llm(llm: LlmSettings, source: str) -> None:
    if llm.profile is not None and llm.profile not in llm.profiles:
        raise ConfigError(
            f"{source}: llm.profile: no profile named {llm.profile!r}",
            hint="define it as a [llm.profiles.NAME] table, or remove llm.profile",
        )


def _check_hub(h: HubSettings, source: str) -> None:
    names: set[str] = set()
    for index, s in enumerate(h.sources):
        if (s.path is None) == (s.url is None):
            raise ConfigError(
                f"{source}: hub.sources.{index}: a source has either a path or a url",
                hint='for example path = "/path/to/registry" or url = "https://hub.example.com"',
            )
        if s.name in names:
            raise ConfigError(
                f"{source}: hub.sources.{index}.name: {s.name!r} is used twice", hint="give each source its own name"
            )
        names.add(s.name)


def _check_hooks(hooks: tuple[HookSettings, ...], source: str) -> None:
    seen: set[str] = set()
    for index, h in enumerate(hooks):
        if h.name in seen:
            raise ConfigError(
                f"{source}: hooks.{index}.name: a second hook named {h.name!r}",
                hint="give every [[hooks]] table its own name (it is the path POST /hooks/NAME)",
            )
        seen.add(h.name)


def _check_jobs(jobs: tuple[JobSettings, ...], source: str) -> None:
    if not jobs:
        return
    # Only a config that has jobs pays for the cron parser.
    from pincer.schedule import schedule_from

    seen: set[str] = set()
    for index, j in enumerate(jobs):
        if j.name in seen:
            raise ConfigError(
                f"{source}: jobs.{index}.name: a second job named {j.name!r}",
                hint="give every [[jobs]] table its own name",
            )
        seen.add(j.name)
        kinds = [k for k in ("cron", "at", "every") if getattr(j, k) is not None]
        if len(kinds) != 1:
            raise ConfigError(
                f"{source}: jobs.{index}: job {j.name!r} needs exactly one of cron, at, every (it has {len(kinds)})",
                hint='e.g. cron = "0 9 * * *", at = "2027-01-01T09:00:00Z" or every = "30m"',
            )
        if j.skill is None and j.message is None:
            raise ConfigError(
                f"{source}: jobs.{index}: job {j.name!r} names neither a skill nor a message",
                hint='add skill = "NAME" (a skill to run) or message = "..." (a plain agent turn)',
            )
        try:
            schedule_from(cron=j.cron, at=j.at, every=j.every, tz=j.tz)
        except PincerError as exc:
            raise ConfigError(f"{source}: jobs.{index}.{kinds[0]}: {exc.message}", hint=exc.hint) from None


def _credential_capabilities(credentials: tuple[CredentialRule, ...], source: str) -> Capabilities:
    """Express config credentials in IronClaw's manifest shape, so they are checked and injected
    by exactly the same rules as a tool's own manifest."""
    mappings: dict[str, Any] = {}
    for index, c in enumerate(credentials):
        location: dict[str, Any] = {"type": c.location}
        if c.name:
            location["name"] = c.name
        if c.prefix:
            location["prefix"] = c.prefix
        mappings[f"credentials.{index}"] = {
            "secret_name": c.secret,
            "location": location,
            "host_patterns": list(c.host_patterns),
            "path_patterns": list(c.path_patterns),
        }
    manifest = {
        "http": {"allowlist": [], "credentials": mappings},
        "secrets": {"allowed_names": sorted({c.secret for c in credentials})},
    }
    try:
        return Capabilities.from_json(manifest, source=source)
    except ManifestError as exc:
        raise ConfigError(exc.message, hint="fix that credential in config.toml") from exc


def load_config(home: Path) -> Config:
    """Read ``home/config.toml``; a missing file means the documented defaults."""
    path = home / CONFIG_FILENAME
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes", hint="is this the right file?")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Config(home=home, workspace=home / "workspace")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text", hint="save it as UTF-8") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    return parse_config(text, home=home, source=str(path))
