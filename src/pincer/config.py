"""``$PINCER_HOME/config.toml``: grants, sessions, limits and settings.

Parsed with pydantic at the edge (the file is user input) into frozen values. Unknown keys are
errors here, unlike foreign manifests: a typo in your own policy must not silently widen or
narrow it. Every error names the key and says what was expected.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind, Mode
from pincer.core.errors import ConfigError, ManifestError, PincerError
from pincer.policy.budget import RateLimit
from pincer.policy.grants import Grant
from pincer.policy.session import SessionKind, SessionPolicy

__all__ = [
    "Config",
    "CredentialRule",
    "GatewaySettings",
    "GatewayToken",
    "HubSettings",
    "HubSource",
    "SkillsSettings",
    "ModelSettings",
    "LlmSettings",
    "Price",
    "AgentSettings",
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


class _Approvals(_Model):
    timeout_s: float = Field(default=120.0, gt=0, le=86_400)
    # An MCP client that cannot take an elicitation: "wait" keeps the call open (with progress
    # notifications saying how to answer), "return" answers at once with the approval id.
    when_no_elicitation: Literal["wait", "return"] = "wait"


class _Audit(_Model):
    synchronous: Literal["normal", "full"] = "normal"


class _Output(_Model):
    max_bytes: int = Field(default=100_000, ge=1_000, le=100_000_000)


class _Idempotency(_Model):
    ttl_s: float = Field(default=300.0, gt=0, le=7 * 86_400)
    max_entries: int = Field(default=10_000, ge=1, le=10_000_000)
    # OpenClaw's rule: every side-effecting call carries a key. Off by default: MCP clients send none.
    required: bool = False


class _Network(_Model):
    allow_private: bool = False


class _Tools(_Model):
    timeout_s: float = Field(default=30.0, gt=0, le=3_600)
    max_depth: int = Field(default=4, ge=0, le=32)


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


class _Credential(_Model):
    secret: str = Field(min_length=1, max_length=128)
    location: Literal["bearer", "basic", "header", "query_param"] = "bearer"
    name: str | None = None  # header or query parameter name
    prefix: str | None = None
    host_patterns: list[str] = Field(min_length=1)
    path_patterns: list[str] = Field(default_factory=list)


class _Workspace(_Model):
    path: str | None = None


class _Sandbox(_Model):
    backend: Literal["auto", "bwrap", "docker", "podman", "landlock"] = "auto"
    main_session_on_host: bool = False
    use_workspace: bool = False
    container_image: str | None = None
    # The scratch /work of one run, in total (tmpfs size under bwrap): 1 MiB .. 64 GiB.
    workdir_max_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024, le=64 * 1024**3)


class _GatewayToken(_Model):
    # The sha256 of a token, never the token itself: config.toml is not a secret store.
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    session: str = Field(min_length=1, max_length=128)


class _Gateway(_Model):
    host: str = Field(default="127.0.0.1", min_length=1, max_length=255)
    port: int = Field(default=8765, ge=0, le=65_535)
    allow_remote: bool = False
    session: str = Field(default="main", min_length=1, max_length=128)
    max_body_bytes: int = Field(default=1_048_576, ge=1_024, le=67_108_864)
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    tokens: list[_GatewayToken] = Field(default_factory=list)


class _Skills(_Model):
    enabled: bool = True
    extra_dirs: list[str] = Field(default_factory=list, max_length=64)
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
    trust_workspace: bool = False
    config: dict[str, Any] = Field(default_factory=dict)


_SECRET_NAME = r"^[A-Za-z0-9_.-]{1,128}$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class _LlmProfile(_Model):
    """A named model setting; what it leaves out comes from [llm]."""

    provider: Literal["openai", "anthropic"] | None = None
    model: str | None = Field(default=None, min_length=1, max_length=256)
    base_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    api_key_secret: str | None = Field(default=None, pattern=_SECRET_NAME)
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME)
    timeout_s: float | None = Field(default=None, gt=0, le=3_600)
    max_retries: int | None = Field(default=None, ge=0, le=10)
    max_output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    stream: bool | None = None


class _Llm(_Model):
    provider: Literal["openai", "anthropic"] = "openai"
    model: str | None = Field(default=None, min_length=1, max_length=256)
    base_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    api_key_secret: str | None = Field(default=None, pattern=_SECRET_NAME)
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME)
    timeout_s: float = Field(default=60.0, gt=0, le=3_600)
    max_retries: int = Field(default=3, ge=0, le=10)
    max_output_tokens: int = Field(default=4_096, ge=1, le=1_000_000)
    stream: bool = True
    profile: str | None = Field(default=None, min_length=1, max_length=64)
    profiles: dict[str, _LlmProfile] = Field(default_factory=dict)


class _Price(_Model):
    input_per_mtok: float = Field(ge=0, le=10_000)
    output_per_mtok: float = Field(ge=0, le=10_000)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, le=10_000)


class _Agent(_Model):
    session: str = Field(default="main", min_length=1, max_length=128)
    max_tool_definitions: int = Field(default=40, ge=1, le=10_000)
    max_parallel_tool_calls: int = Field(default=4, ge=1, le=64)
    taint: Literal["ask", "deny", "off"] = "ask"
    trusted_output: list[str] = Field(default_factory=list, max_length=1_000)
    max_turns: int = Field(default=20, ge=1, le=10_000)
    max_tool_calls: int = Field(default=50, ge=0, le=100_000)
    max_input_tokens: int = Field(default=500_000, ge=1, le=1_000_000_000)
    max_output_tokens: int = Field(default=50_000, ge=1, le=1_000_000_000)
    max_cost_usd: float | None = Field(default=None, gt=0, le=1_000_000)
    deadline_s: float = Field(default=600.0, gt=0, le=7 * 86_400)
    prices: dict[str, _Price] = Field(default_factory=dict)


class _HubSource(_Model):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    path: str | None = Field(default=None, min_length=1, max_length=4096)
    url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    token_secret: str | None = Field(default=None, min_length=1, max_length=128)
    format: Literal["auto", "ironclaw", "mcp-registry"] = "auto"


class _Hub(_Model):
    sources: list[_HubSource] = Field(default_factory=list, max_length=64)
    max_archive_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    max_unpacked_bytes: int = Field(default=256 * 1024 * 1024, ge=1024, le=16 * 1024**3)
    max_files: int = Field(default=2_000, ge=1, le=100_000)
    download_timeout_s: float = Field(default=120.0, gt=0, le=3_600)
    signing_key: str = Field(default="hub_signing_key", min_length=1, max_length=128)


_HOOK_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
_SECRET_REF = r"^[A-Za-z0-9_.-]{1,128}$"


class _Hook(_Model):
    name: str = Field(pattern=_HOOK_NAME)
    skill: str | None = Field(default=None, min_length=1, max_length=64)
    message: str | None = Field(default=None, min_length=1, max_length=4_096)
    auth: Literal["bearer", "standard", "github"]
    secret: str = Field(pattern=_SECRET_REF)
    events: list[str] = Field(default_factory=list, max_length=256)
    params: dict[str, str] = Field(default_factory=dict, max_length=64)
    session: str | None = Field(default=None, min_length=1, max_length=128)
    max_body_bytes: int | None = Field(default=None, ge=1_024, le=67_108_864)


class _Job(_Model):
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


class _Triggers(_Model):
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


class _Builtin(_Model):
    enabled: bool = False
    base_url: str | None = Field(default=None, min_length=8, max_length=2048, pattern=r"^https?://")
    actions: list[str] | None = Field(default=None, max_length=256)
    toolsets: list[str] | None = Field(default=None, max_length=64)
    read_only: bool = False


class _File(_Model):
    approvals: _Approvals = _Approvals()
    audit: _Audit = _Audit()
    output: _Output = _Output()
    idempotency: _Idempotency = _Idempotency()
    network: _Network = _Network()
    tools: _Tools = _Tools()
    workspace: _Workspace = _Workspace()
    sandbox: _Sandbox = _Sandbox()
    grants: list[_Grant] = Field(default_factory=list)
    sessions: dict[str, _Session] = Field(default_factory=dict)
    limits: dict[str, _Limit] = Field(default_factory=dict)
    credentials: list[_Credential] = Field(default_factory=list)
    hooks: list[_Hook] = Field(default_factory=list, max_length=1_000)
    jobs: list[_Job] = Field(default_factory=list, max_length=10_000)
    gateway: _Gateway = _Gateway()
    skills: _Skills = _Skills()
    llm: _Llm = _Llm()
    agent: _Agent = _Agent()
    hub: _Hub = _Hub()
    triggers: _Triggers = _Triggers()
    builtins: dict[str, _Builtin] = Field(default_factory=dict, max_length=64)


@dataclass(frozen=True, kw_only=True, slots=True)
class CredentialRule:
    """Inject a secret into requests of the ``http`` built-in to matching hosts."""

    secret: str
    location: str
    name: str | None
    prefix: str | None
    host_patterns: tuple[str, ...]
    path_patterns: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewayToken:
    """An extra gateway token (by its sha256) and the session its calls run under."""

    sha256: str
    session: str


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewaySettings:
    """``[gateway]``: where ``pincer serve`` listens and who may talk to it.

    ``session`` is the session of the token generated at first start; ``tokens`` map more tokens
    to other sessions. ``allowed_hosts``/``allowed_origins`` extend the loopback names accepted
    in Host and Origin headers (DNS-rebinding protection). A non-loopback ``host`` needs
    ``allow_remote = true``.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    allow_remote: bool = False
    session: str = "main"
    max_body_bytes: int = 1_048_576
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    tokens: tuple[GatewayToken, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillsSettings:
    """``[skills]``: where skills come from besides the standard roots, the walk's limits, the
    selection and catalog budgets, and where skill dependencies are installed from. ``config``
    holds the values skills ask for with ``requires.config`` (dotted keys)."""

    enabled: bool = True
    extra_dirs: tuple[Path, ...] = ()
    max_candidates_per_root: int = 300
    max_loaded_per_root: int = 200
    max_file_bytes: int = 262_144
    max_selected: int = 3
    max_selected_tokens: int = 6_000
    catalog_max_skills: int = 150
    catalog_max_chars: int = 30_000
    max_render_chars: int = 1_000_000
    tool_separator: str = "."
    npm_registry: str = "https://registry.npmjs.org/"
    pip_index: str = "https://pypi.org/simple"
    auto_install_deps: bool = True
    # The workspace's skill roots are written by agents (write_file, exec): installed-level
    # unless a person says the skills there are theirs.
    trust_workspace: bool = False
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSettings:
    """One model to talk to: ``[llm]``, or a ``[llm.profiles.NAME]`` over it. The API key is never
    here: ``api_key_secret`` names an entry of the secret store, ``api_key_env`` an environment
    variable; the provider reads the value when a run starts."""

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key_secret: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    max_output_tokens: int = 4_096
    stream: bool = True
    profile: str | None = None  # the profile these settings came from
    key_table: str = "[llm]"  # the table that named the API key, for messages about it


@dataclass(frozen=True, kw_only=True, slots=True)
class LlmSettings:
    """``[llm]`` and its profiles. ``profile`` names the profile used when a run names none."""

    default: ModelSettings = field(default_factory=ModelSettings)
    profile: str | None = None
    profiles: dict[str, ModelSettings] = field(default_factory=dict)

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
        return found


@dataclass(frozen=True, kw_only=True, slots=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSettings:
    """``[agent]``: the agent loop's defaults. Budgets apply per run unless a run names its own."""

    session: str = "main"
    max_tool_definitions: int = 40
    max_parallel_tool_calls: int = 4
    taint: str = "ask"
    trusted_output: tuple[str, ...] = ()
    max_turns: int = 20
    max_tool_calls: int = 50
    max_input_tokens: int = 500_000
    max_output_tokens: int = 50_000
    max_cost_usd: float | None = None
    deadline_s: float = 600.0
    prices: dict[str, Price] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class HubSource:
    """One ``[[hub.sources]]``: a registry folder or server.json documents (``path``), or a hub
    server (``url``, with the secret-store entry of its publisher token)."""

    name: str
    path: Path | None = None
    url: str | None = None
    token_secret: str | None = None
    format: str = "auto"


@dataclass(frozen=True, kw_only=True, slots=True)
class BuiltinSettings:
    """``[builtins.NAME]``: one bundled tool (``github``, ``web_fetch``, ``web_search``,
    ``llm_context``) or an API they share (``brave``): whether it is registered, the base URL it
    calls (the person's permission for exactly that origin), and how it is narrowed
    (docs/builtins.md)."""

    enabled: bool = False
    base_url: str | None = None
    actions: tuple[str, ...] | None = None
    toolsets: tuple[str, ...] | None = None
    read_only: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class HubSettings:
    """``[hub]``: the catalog sources and what one artifact may weigh (docs/hub.md)."""

    sources: tuple[HubSource, ...] = ()
    max_archive_bytes: int = 64 * 1024 * 1024
    max_unpacked_bytes: int = 256 * 1024 * 1024
    max_files: int = 2_000
    download_timeout_s: float = 120.0
    signing_key: str = "hub_signing_key"


@dataclass(frozen=True, kw_only=True, slots=True)
class HookSettings:
    """One ``[[hooks]]`` table: ``POST /hooks/NAME``. ``secret`` names an entry of the secret store
    (the bearer token, the ``whsec_...`` key, or GitHub's HMAC key), never the value. With neither
    ``skill`` nor ``message`` a delivery runs every eligible skill whose ``webhook:`` trigger
    matches its event."""

    name: str
    auth: str  # bearer | standard | github
    secret: str
    skill: str | None = None
    message: str | None = None
    events: tuple[str, ...] = ()
    params: dict[str, str] = field(default_factory=dict)
    session: str | None = None
    max_body_bytes: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class JobSettings:
    """One ``[[jobs]]`` table: a scheduled run kept in the store like ``pincer cron add``'s."""

    name: str
    cron: str | None = None
    at: str | None = None
    every: str | None = None
    tz: str | None = None
    skill: str | None = None
    message: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    max_concurrent: int | None = None
    retries: int | None = None
    jitter_s: float | None = None
    enabled: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class TriggersSettings:
    """``[triggers]``: webhook limits, replay memory, the run queue, the scheduler's defaults."""

    enabled: bool = True
    hook_max_body_bytes: int = 262_144
    signature_tolerance_s: float = 300.0
    max_failures_per_minute: int = 20
    delivery_retention_days: float = 30.0
    payload_record_bytes: int = 8_192
    max_queued: int = 10_000
    max_running: int = 8
    misfire_grace_s: float = 86_400.0
    retries: int = 3
    retry_backoff_s: float = 30.0
    retry_backoff_max_s: float = 3_600.0
    max_concurrent: int = 1
    jitter_s: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    home: Path
    workspace: Path
    approval_timeout_s: float = 120.0
    approval_when_no_elicitation: str = "wait"
    audit_synchronous: str = "normal"
    max_output_bytes: int = 100_000
    idempotency_ttl_s: float = 300.0
    idempotency_max_entries: int = 10_000
    idempotency_required: bool = False
    allow_private_network: bool = False
    tool_timeout_s: float = 30.0
    max_call_depth: int = 4
    sandbox_backend: str = "auto"
    sandbox_main_session_on_host: bool = False
    sandbox_use_workspace: bool = False
    sandbox_container_image: str | None = None
    sandbox_workdir_max_bytes: int = 256 * 1024 * 1024
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
    hooks: tuple[HookSettings, ...] = ()
    jobs: tuple[JobSettings, ...] = ()
    builtins: Mapping[str, BuiltinSettings] = field(default_factory=dict)

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
    return ConfigError(
        f"{source}: {key}: {first['msg']}{more}",
        hint="fix that key; the README's config.toml section shows every setting",
    )


def parse_config(text: str, *, home: Path, source: str = CONFIG_FILENAME) -> Config:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}", hint="fix the syntax at that line") from exc
    try:
        data = _File.model_validate(raw)
    except ValidationError as exc:
        raise _describe(exc, source) from None
    return _to_config(data, home=home, source=source)


# [builtins.NAME] sections: the bundled tools, and an API several of them call (base_url only).
BUILTIN_TOOLS = ("github", "web_fetch", "web_search", "llm_context")
BUILTIN_SHARED = ("brave",)


def _to_config(data: _File, *, home: Path, source: str) -> Config:
    for name in data.builtins:
        if name not in BUILTIN_TOOLS + BUILTIN_SHARED:
            known = ", ".join(f"[builtins.{n}]" for n in BUILTIN_TOOLS + BUILTIN_SHARED)
            raise ConfigError(f"{source}: [builtins.{name}] is not a built-in pincer knows", hint=f"use one of {known}")
    grants = []
    for index, g in enumerate(data.grants):
        if not g.effects and g.default is None:
            raise ConfigError(
                f"{source}: grants.{index}: grant for {g.tool!r} sets neither effects nor default",
                hint='add effects = { network = "allow" } or default = "allow"',
            )
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
    workspace = Path(data.workspace.path).expanduser() if data.workspace.path else home / "workspace"
    credential_capabilities = _credential_capabilities(data.credentials, source) if data.credentials else None
    return Config(
        home=home,
        workspace=workspace,
        approval_timeout_s=data.approvals.timeout_s,
        approval_when_no_elicitation=data.approvals.when_no_elicitation,
        audit_synchronous=data.audit.synchronous,
        max_output_bytes=data.output.max_bytes,
        idempotency_ttl_s=data.idempotency.ttl_s,
        idempotency_max_entries=data.idempotency.max_entries,
        idempotency_required=data.idempotency.required,
        allow_private_network=data.network.allow_private,
        tool_timeout_s=data.tools.timeout_s,
        max_call_depth=data.tools.max_depth,
        sandbox_backend=data.sandbox.backend,
        sandbox_main_session_on_host=data.sandbox.main_session_on_host,
        sandbox_use_workspace=data.sandbox.use_workspace,
        sandbox_container_image=data.sandbox.container_image,
        sandbox_workdir_max_bytes=data.sandbox.workdir_max_bytes,
        grants=tuple(grants),
        sessions=sessions,
        limits=tuple(
            (pattern, RateLimit(calls_per_minute=lim.calls_per_minute, calls_per_hour=lim.calls_per_hour))
            for pattern, lim in data.limits.items()
        ),
        credentials=tuple(
            CredentialRule(
                secret=c.secret,
                location=c.location,
                name=c.name,
                prefix=c.prefix,
                host_patterns=tuple(c.host_patterns),
                path_patterns=tuple(c.path_patterns),
            )
            for c in data.credentials
        ),
        credential_capabilities=credential_capabilities,
        gateway=_to_gateway(data.gateway),
        skills=_to_skills(data.skills, home=home),
        llm=_to_llm(data.llm, source),
        agent=_to_agent(data.agent),
        hub=_to_hub(data.hub, home=home, source=source),
        builtins={
            name: BuiltinSettings(
                enabled=b.enabled,
                base_url=b.base_url,
                actions=tuple(b.actions) if b.actions is not None else None,
                toolsets=tuple(b.toolsets) if b.toolsets is not None else None,
                read_only=b.read_only,
            )
            for name, b in data.builtins.items()
        },
        triggers=TriggersSettings(**data.triggers.model_dump()),
        hooks=_to_hooks(data.hooks, source),
        jobs=_to_jobs(data.jobs, source),
    )


def _to_llm(llm: _Llm, source: str) -> LlmSettings:
    default = ModelSettings(
        provider=llm.provider,
        model=llm.model,
        base_url=llm.base_url,
        api_key_secret=llm.api_key_secret,
        api_key_env=llm.api_key_env,
        timeout_s=llm.timeout_s,
        max_retries=llm.max_retries,
        max_output_tokens=llm.max_output_tokens,
        stream=llm.stream,
    )
    profiles: dict[str, ModelSettings] = {}
    for name, p in llm.profiles.items():
        given = {key: value for key, value in p.model_dump().items() if value is not None}
        if given.get("provider", llm.provider) != llm.provider:
            # A profile of another provider inherits neither [llm]'s URL (another wire format)
            # nor its key (sending one provider's key to another would leak it).
            for key in ("base_url", "api_key_secret", "api_key_env"):
                given.setdefault(key, None)
        names_key = given.get("api_key_secret") or given.get("api_key_env")
        key_table = f"[llm.profiles.{name}]" if names_key else "[llm]"
        profiles[name] = replace(default, **given, profile=name, key_table=key_table)
    if llm.profile is not None and llm.profile not in profiles:
        raise ConfigError(
            f"{source}: llm.profile: no profile named {llm.profile!r}",
            hint="define it as a [llm.profiles.NAME] table, or remove llm.profile",
        )
    return LlmSettings(default=default, profile=llm.profile, profiles=profiles)


def _to_agent(a: _Agent) -> AgentSettings:
    return AgentSettings(
        session=a.session,
        max_tool_definitions=a.max_tool_definitions,
        max_parallel_tool_calls=a.max_parallel_tool_calls,
        taint=a.taint,
        trusted_output=tuple(a.trusted_output),
        max_turns=a.max_turns,
        max_tool_calls=a.max_tool_calls,
        max_input_tokens=a.max_input_tokens,
        max_output_tokens=a.max_output_tokens,
        max_cost_usd=a.max_cost_usd,
        deadline_s=a.deadline_s,
        prices={
            model: Price(
                input_per_mtok=price.input_per_mtok,
                output_per_mtok=price.output_per_mtok,
                cached_input_per_mtok=price.cached_input_per_mtok,
            )
            for model, price in a.prices.items()
        },
    )


def _to_hub(h: _Hub, *, home: Path, source: str) -> HubSettings:
    sources = []
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
        path = None
        if s.path is not None:
            expanded = Path(s.path).expanduser()
            path = expanded if expanded.is_absolute() else home / expanded
        sources.append(HubSource(name=s.name, path=path, url=s.url, token_secret=s.token_secret, format=s.format))
    return HubSettings(
        sources=tuple(sources),
        max_archive_bytes=h.max_archive_bytes,
        max_unpacked_bytes=h.max_unpacked_bytes,
        max_files=h.max_files,
        download_timeout_s=h.download_timeout_s,
        signing_key=h.signing_key,
    )


def _to_hooks(hooks: list[_Hook], source: str) -> tuple[HookSettings, ...]:
    seen: set[str] = set()
    out = []
    for index, h in enumerate(hooks):
        if h.name in seen:
            raise ConfigError(
                f"{source}: hooks.{index}.name: a second hook named {h.name!r}",
                hint="give every [[hooks]] table its own name (it is the path POST /hooks/NAME)",
            )
        seen.add(h.name)
        out.append(
            HookSettings(
                name=h.name, auth=h.auth, secret=h.secret, skill=h.skill, message=h.message, events=tuple(h.events),
                params=dict(h.params), session=h.session, max_body_bytes=h.max_body_bytes,
            )
        )  # fmt: skip
    return tuple(out)


def _to_jobs(jobs: list[_Job], source: str) -> tuple[JobSettings, ...]:
    if not jobs:
        return ()
    # Only a config that has jobs pays for the cron parser.
    from pincer.schedule import schedule_from

    seen: set[str] = set()
    out = []
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
        out.append(JobSettings(**j.model_dump()))
    return tuple(out)


def _to_skills(s: _Skills, *, home: Path) -> SkillsSettings:
    return SkillsSettings(
        enabled=s.enabled,
        extra_dirs=tuple(
            (home / Path(d).expanduser()) if not Path(d).expanduser().is_absolute() else Path(d).expanduser()
            for d in s.extra_dirs
        ),
        max_candidates_per_root=s.max_candidates_per_root,
        max_loaded_per_root=s.max_loaded_per_root,
        max_file_bytes=s.max_file_bytes,
        max_selected=s.max_selected,
        max_selected_tokens=s.max_selected_tokens,
        catalog_max_skills=s.catalog_max_skills,
        catalog_max_chars=s.catalog_max_chars,
        max_render_chars=s.max_render_chars,
        tool_separator=s.tool_separator,
        npm_registry=s.npm_registry,
        pip_index=s.pip_index,
        auto_install_deps=s.auto_install_deps,
        trust_workspace=s.trust_workspace,
        config=dict(s.config),
    )


def _to_gateway(g: _Gateway) -> GatewaySettings:
    return GatewaySettings(
        host=g.host,
        port=g.port,
        allow_remote=g.allow_remote,
        session=g.session,
        max_body_bytes=g.max_body_bytes,
        allowed_hosts=tuple(h.lower() for h in g.allowed_hosts),
        allowed_origins=tuple(o.lower().rstrip("/") for o in g.allowed_origins),
        tokens=tuple(GatewayToken(sha256=t.sha256, session=t.session) for t in g.tokens),
    )


def _credential_capabilities(credentials: list[_Credential], source: str) -> Capabilities:
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
            "host_patterns": c.host_patterns,
            "path_patterns": c.path_patterns,
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
