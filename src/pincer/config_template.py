"""``config.toml`` as people read it: every key, its default and what it does, from the schema.

The keys, their types, bounds and defaults come from the pydantic schema in :mod:`pincer.config`
(``ConfigFile``); this module adds only the sentence per key (``KEYS``, or a field's ``description``)
and examples for keys without a default. ``pincer init`` writes :func:`render_template`,
``docs/config.md`` holds :func:`render_reference`; tests parse the one back and compare the other,
and fail for a schema key that has no sentence here, so neither can drift from the schema.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import re
import textwrap
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from pincer.config import ConfigFile
from pincer.core.effects import EffectKind

__all__ = [
    "KEYS",
    "SECTIONS",
    "KeyHelp",
    "SchemaKey",
    "render_reference",
    "render_settings",
    "render_template",
    "schema_keys",
    "toml_key",
    "toml_value",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyHelp:
    """What a key does; ``example`` is TOML for a key that has no default to show (a value, never
    ``key = value``: the template writes the key). ``table``: the name of the example table a
    ``[section.NAME]`` key is shown in when it belongs to one entry only (the browser's keys
    under ``[builtins.browser]``); ``one_of``: the keys of an array table one of which an entry
    needs (a job's schedule), shown so that uncommenting a table's lines makes a valid one."""

    help: str
    example: str | None = None
    table: str | None = None
    one_of: tuple[str, ...] = ()


# One line per key; "*" stands for a name of the user's (a session, a tool pattern).
KEYS: dict[str, KeyHelp] = {
    "approvals.timeout_s": KeyHelp(help="how long a call waits for an answer before it fails with approval_timeout"),
    "approvals.when_no_elicitation": KeyHelp(
        help="an MCP client that cannot show a question: wait keeps the call open (with progress notes saying how "
        "to answer), return answers at once with the approval id"
    ),
    "audit.synchronous": KeyHelp(
        help="the whole database's commits: normal survives a crash of pincer, not a power loss; full fsyncs "
        "every commit (survives power loss; audit commits then run in a writer thread, off the event loop)"
    ),
    "store.url": KeyHelp(
        help="PostgreSQL for several gateways (audit chain, approvals, grants, idempotency, runs); unset: SQLite "
        "under PINCER_HOME. Run `pincer db upgrade` before the gateways start; keep the password out of the url",
        example='"postgresql://pincer@127.0.0.1:5432/pincer"',
    ),
    "store.password_secret": KeyHelp(
        help="the secret (`pincer secrets set NAME`) holding the PostgreSQL password; unset: libpq reads PGPASSFILE",
        example='"pg_password"',
    ),
    "store.pool_size": KeyHelp(help="PostgreSQL connections per gateway, in each of its two pools"),
    "store.host_id": KeyHelp(
        help="this machine's name in the store (default: the host name); give each machine its own, "
        "and the gateways of one machine the same: a gateway whose heartbeat stops is taken over by the others",
        example='"gateway-2"',
    ),
    "cache.url": KeyHelp(
        help="Redis: rate limits counted exactly across every gateway; unset: each process counts its own",
        example='"redis://127.0.0.1:6379/0"',
    ),
    "output.max_bytes": KeyHelp(help="larger tool outputs are truncated with a marker"),
    "output.max_resource_bytes": KeyHelp(
        help="the most an upstream MCP server's resource or prompt read through the gateway may hold "
        "(an MCP App's page, a document); past it the content is replaced by a note"
    ),
    "idempotency.ttl_s": KeyHelp(help="how long a stored result answers a replay of the same idempotency key"),
    "idempotency.max_entries": KeyHelp(help="stored results kept at most; the oldest go first"),
    "idempotency.required": KeyHelp(
        help="refuse a side-effecting call that comes without an idempotency key (REST 428; MCP clients send "
        "none unless they set _meta pincer/idempotencyKey)"
    ),
    "tasks.enabled": KeyHelp(help="answer MCP clients that declare io.modelcontextprotocol/tasks with a task when a call waits (docs/tasks.md)"),
    "tasks.after_s": KeyHelp(help="a call still running after this long is handed back as a task; one waiting for a person at once"),
    "tasks.ttl_s": KeyHelp(help="how long a task and its result are kept after it was created (its ttlMs)"),
    "tasks.poll_interval_ms": KeyHelp(help="the pollIntervalMs a task suggests to its client"),
    "tasks.max_live_per_session": KeyHelp(help="unfinished tasks one session may hold; past it a call that would become a task is refused"),
    "tasks.only": KeyHelp(help="tools that run only as tasks: a client without the extension gets -32021", example='["build"]'),
    "network.allow_private": KeyHelp(help="let the http tool reach loopback, private and link-local addresses"),
    "openapi.max_document_bytes": KeyHelp(
        help="the largest OpenAPI document (and each file it refers to) `pincer openapi add` reads; "
        "GitHub's description is 13 MB"
    ),
    "openapi.max_request_bytes": KeyHelp(
        help="the largest request an OpenAPI tool sends, an uploaded file included"
    ),
    "tools.timeout_s": KeyHelp(help="per call, for every runtime; an MCP server's own timeout_s applies within it"),
    "tools.max_depth": KeyHelp(help="how deep tools may call tools (a WASM tool's tool-invoke)"),
    "tools.mcp_lean_calls": KeyHelp(
        help="`tools/call` to a running stdio or streamable HTTP MCP server goes past the MCP SDK's "
        "client session (less CPU per call; the same results, checked by `tests/runtimes/mcp/test_lean_equivalence.py`); "
        "false sends every call through the SDK's session"
    ),
    "tools.mcp_max_person_instances": KeyHelp(
        help="an MCP server whose env or headers name a secret of [secrets] per_person runs once per person; "
        "the most instances of one server (a new person closes the least recently used idle one first)"
    ),
    "tools.mcp_person_idle_s": KeyHelp(
        help="a person's own instance of such an MCP server is closed after this many seconds without a call"
    ),
    "workspace.path": KeyHelp(
        help="the directory read_file, write_file and list_dir work in (default: $PINCER_HOME/workspace)",
        example='"~/pincer-workspace"',
    ),
    "sandbox.backend": KeyHelp(help="what script tools and exec run in; auto picks the first that works here"),
    "sandbox.main_session_on_host": KeyHelp(
        help="the main session runs script tools on the host, without the sandbox (only when that session is you)"
    ),
    "sandbox.use_workspace": KeyHelp(help="mount the workspace at /work instead of a fresh scratch directory"),
    "sandbox.workdir_max_bytes": KeyHelp(
        help="the most a run may put in its /work (and TMPDIR) in all; a run that fills it fails",
        example="268435456",
    ),
    "sandbox.container_image": KeyHelp(
        help="the image docker/podman run commands in; auto tries them only when this is set",
        example='"debian:stable-slim"',
    ),
    "grants.tool": KeyHelp(help="a tool name or a * pattern, case-insensitive", example='"http"'),
    "grants.effects": KeyHelp(
        help=f"effect -> allow | ask | deny; the effects: {', '.join(EffectKind)}",
        example='{ network = "allow", use_secret = "allow" }', one_of=("effects", "default"),
    ),
    "grants.default": KeyHelp(help="allow | ask | deny for every effect the map does not name", example='"ask"', one_of=("effects", "default")),
    "grants.hosts": KeyHelp(help="hosts a network effect may reach (* wildcards)", example='["api.github.com", "*.githubusercontent.com"]'),
    "grants.expires": KeyHelp(help="after this time the grant no longer applies", example="2027-01-01T00:00:00Z"),
    "grants.max_invocations": KeyHelp(help="the grant is used up after this many calls", example="500"),
    "grants.sessions": KeyHelp(
        help="only these sessions (* wildcards, kind:main, kind:non-main); without it, every session",
        example='["kind:main"]',
    ),
    "sessions.*.kind": KeyHelp(help="main or non-main (the sandbox default lists)", example='"non-main"'),
    "sessions.*.allow": KeyHelp(
        help="tools (names, * patterns, group:NAME) this session may call; a non-empty list blocks the rest",
        example='["group:fs", "echo", "http"]',
    ),
    "sessions.*.deny": KeyHelp(help="tools this session may never call; deny wins", example='["write_file"]'),
    "limits.*.calls_per_minute": KeyHelp(help="calls of matching tools per rolling minute", example="30"),
    "limits.*.calls_per_hour": KeyHelp(help="calls of matching tools per rolling hour", example="500"),
    "credentials.secret": KeyHelp(help="the secret store entry to inject (`pincer secrets set NAME`)", example='"github_token"'),
    "credentials.location": KeyHelp(
        help="how it is sent: Authorization: Bearer, Basic, a header or a query parameter", example='"bearer"'
    ),
    "credentials.name": KeyHelp(help="the header or query parameter name (header and query_param)", example='"X-Api-Key"'),
    "credentials.prefix": KeyHelp(help="text put before the value, e.g. for a custom scheme", example='"token "'),
    "credentials.host_patterns": KeyHelp(help="hosts the credential is sent to", example='["api.github.com"]'),
    "credentials.path_patterns": KeyHelp(help="URL paths it is sent with (a trailing * is a prefix); empty: any", example='["/repos/*"]'),
    "skills.enabled": KeyHelp(help="load skills at all (SKILL.md files from the roots in docs/skills.md)"),
    "skills.extra_dirs": KeyHelp(help="more skill roots, searched after the others", example='["~/team-skills"]'),
    "skills.max_candidates_per_root": KeyHelp(help="skill folders looked at per root; more are reported, not read"),
    "skills.max_loaded_per_root": KeyHelp(help="skills loaded per root; more are reported, not loaded"),
    "skills.max_file_bytes": KeyHelp(help="a larger SKILL.md is skipped with an error naming it"),
    "skills.max_selected": KeyHelp(help="at most this many skills are chosen for one message"),
    "skills.max_selected_tokens": KeyHelp(help="the chosen skills' bodies fit in this many tokens"),
    "skills.catalog_max_skills": KeyHelp(help="skills listed in the <available_skills> catalog a model sees"),
    "skills.catalog_max_chars": KeyHelp(help="the catalog's size; past it a visible note says what was left out"),
    "skills.max_render_chars": KeyHelp(help="the most characters a skill's template may build, for its text and for every value on the way (string padding, joins, repeats); past it the render is refused"),
    "skills.tool_separator": KeyHelp(help='skill tools are named skill.capability ("."), or skill_capability ("_")'),
    "skills.npm_registry": KeyHelp(help="where skill dependencies from package.json come from"),
    "skills.pip_index": KeyHelp(help="where skill dependencies from requirements.txt come from"),
    "skills.auto_install_deps": KeyHelp(help="pincer serve installs missing skill dependencies in the background"),
    "skills.trust_workspace": KeyHelp(
        help="trust the workspace's skills, .agents/skills and .claude/skills (agents can write there; off: they are installed-level)"
    ),
    "skills.config": KeyHelp(
        help="values skills ask for with requires.config (dotted keys)", example="{ channels.slack = true }"
    ),
    "llm.provider": KeyHelp(help="the wire format: openai (Chat Completions, any OpenAI-compatible server) or anthropic (Messages)"),
    "llm.model": KeyHelp(help="the model runs use, as the provider names it", example='"gpt-4o-mini"'),
    "llm.base_url": KeyHelp(
        help="an OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter) or a proxy; unset: the provider's own API",
        example='"http://127.0.0.1:11434/v1"',
    ),
    "llm.api_key_secret": KeyHelp(
        help="the secret store entry holding the API key (`pincer secrets set NAME`, value from stdin)",
        example='"openai_api_key"',
    ),
    "llm.api_key_env": KeyHelp(
        help="or the environment variable holding it (never put the key itself in config.toml)", example='"OPENAI_API_KEY"'
    ),
    "llm.timeout_s": KeyHelp(help="per request to the model"),
    "llm.max_retries": KeyHelp(help="retries of a request that got 429 or 5xx or lost its stream, with backoff honouring Retry-After"),
    "llm.max_output_tokens": KeyHelp(help="the most a model may write in one turn"),
    "llm.stream": KeyHelp(help="stream the model's text and tool calls as they come (false: one response per turn)"),
    "llm.profile": KeyHelp(help="the profile runs use when they name none (pincer run --profile)", example='"local"'),
    "llm.profiles.*.provider": KeyHelp(help="as llm.provider; a profile of another provider inherits no URL or key", example='"anthropic"'),
    "llm.profiles.*.model": KeyHelp(help="as llm.model", example='"claude-sonnet-4-5"'),
    "llm.profiles.*.base_url": KeyHelp(help="as llm.base_url", example='"https://openrouter.ai/api/v1"'),
    "llm.profiles.*.api_key_secret": KeyHelp(help="as llm.api_key_secret", example='"anthropic_api_key"'),
    "llm.profiles.*.api_key_env": KeyHelp(help="as llm.api_key_env", example='"ANTHROPIC_API_KEY"'),
    "llm.profiles.*.timeout_s": KeyHelp(help="as llm.timeout_s", example="120"),
    "llm.profiles.*.max_retries": KeyHelp(help="as llm.max_retries", example="5"),
    "llm.profiles.*.max_output_tokens": KeyHelp(help="as llm.max_output_tokens", example="8192"),
    "llm.profiles.*.stream": KeyHelp(help="as llm.stream", example="false"),
    "agent.session": KeyHelp(help="the session a run's tool calls go through when the run names none (REST runs: the token's)"),
    "agent.max_tool_definitions": KeyHelp(
        help="past this many tools, the model gets the skill's own tools plus find_tools and load_tools instead of every definition"
    ),
    "agent.max_parallel_tool_calls": KeyHelp(help="tool calls of one turn that run at the same time"),
    "agent.taint": KeyHelp(
        help="after a run read untrusted output, its calls with external_write, financial, modify_* or execute_code: "
        "ask (even where a grant allows), deny, or off"
    ),
    "agent.trusted_output": KeyHelp(
        help="tool names or * patterns whose output counts as trusted (an MCP server you run yourself); "
        "pincer's echo, time and json are trusted already",
        example='["time_*"]',
    ),
    "agent.max_turns": KeyHelp(help="model requests per run (per message in pincer chat)"),
    "agent.max_tool_calls": KeyHelp(help="tool calls per run (per message in pincer chat)"),
    "agent.max_input_tokens": KeyHelp(help="input tokens per run, all turns together"),
    "agent.max_output_tokens": KeyHelp(help="output tokens per run, all turns together"),
    "agent.max_cost_usd": KeyHelp(
        help="USD per run, from the price table; a model with no price then refuses to run", example="0.50"
    ),
    "agent.deadline_s": KeyHelp(help="wall-clock seconds per run (per message in pincer chat)"),
    "agent.prices.*.input_per_mtok": KeyHelp(help="USD per million input tokens", example="2.5"),
    "agent.prices.*.output_per_mtok": KeyHelp(help="USD per million output tokens", example="10"),
    "agent.prices.*.cached_input_per_mtok": KeyHelp(help="USD per million cached input tokens (unset: the input price)", example="1.25"),
    "retention.approvals_days": KeyHelp(help="answered and expired approval requests are deleted this many days after they closed (answered, expired, or their caller gone; 0: kept)"),
    "retention.runs_days": KeyHelp(help="finished agent runs and their transcripts are deleted this many days after they ended (0: kept)"),
    "retention.webhook_payloads_days": KeyHelp(
        help="the payload a webhook delivered is cleared from its firing this many days after it arrived, once the "
        "firing ended (0: kept)"
    ),
    "telemetry.traces": KeyHelp(
        help="export OpenTelemetry traces over OTLP/HTTP: a span per tool call, agent run, model request, webhook "
        "delivery and upstream request (needs pip install 'pincer[telemetry]'; OTEL_* variables set headers, "
        "sampler and service name)"
    ),
    "telemetry.endpoint": KeyHelp(
        help="the OTLP/HTTP traces URL; unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, "
        "else http://localhost:4318/v1/traces",
        example='"http://127.0.0.1:4318/v1/traces"',
    ),
    "telemetry.record_content": KeyHelp(
        help="put tool arguments and results on the spans, leak-scanned and cut short; off: spans never hold them"
    ),
    "telemetry.content_max_chars": KeyHelp(help="with record_content: the most of each argument or result a span keeps"),
    "auth.token_sign_in": KeyHelp(help="the dashboard takes a token (the gateway's, or a person's) to sign in; false: only single sign-on"),
    "auth.oidc.*.kind": KeyHelp(help='"oidc" (OpenID Connect, with issuer) or "github" (GitHub\'s OAuth app sign-in; docs/teams.md)', example='"oidc"', table="google"),
    "auth.oidc.*.issuer": KeyHelp(help="(required) with kind oidc, the default: the OpenID Connect issuer; its /.well-known/openid-configuration is read", example='"https://accounts.google.com"', table="google"),
    "auth.oidc.*.client_id": KeyHelp(help="the client id registered with the provider", example='"pincer-dashboard"', table="google"),
    "auth.oidc.*.client_secret_name": KeyHelp(help="the secret holding the client secret (`pincer secrets set NAME`); unset: a public client", example='"google_client_secret"', table="google"),
    "auth.oidc.*.label": KeyHelp(help="the sign-in button's text (unset: the provider's name)", example='"Google"', table="google"),
    "auth.oidc.*.web_url": KeyHelp(help="kind github only: GitHub's web address, for GitHub Enterprise Server (unset: https://github.com; ignored by kind oidc)", example='"https://github.example.com"', table="google"),
    "auth.oidc.*.api_url": KeyHelp(help="kind github only: GitHub's REST API (unset: https://api.github.com; Enterprise Server: https://HOST/api/v3; ignored by kind oidc)", example='"https://github.example.com/api/v3"', table="google"),
    "auth.oidc.*.scopes": KeyHelp(help="the scopes asked for (unset: openid email profile; for github: read:user user:email read:org)", example='["openid", "email", "profile"]', table="google"),
    "auth.oidc.*.groups_claim": KeyHelp(help="the id_token claim listing the person's groups", table="google"),
    "auth.oidc.*.group_roles": KeyHelp(help="roles by group of the id_token (viewer, approver[:tool=GLOB,...], operator, admin); for github, by org:ORG or team:ORG/TEAM-SLUG", example='{ pincer-approvers = ["approver:tool=github_*"] }', table="google"),
    "auth.oidc.*.domain_roles": KeyHelp(help="roles by the domain of a verified email", example='{ "example.com" = ["viewer"] }', table="google"),
    "auth.oidc.*.email_roles": KeyHelp(help="roles by verified email", example='{ "alice@example.com" = ["admin"] }', table="google"),
    "auth.oidc.*.assume_email_verified": KeyHelp(
        help="trust the email claim without email_verified = true (only a directory whose emails users cannot edit)",
        example="false", table="google",
    ),
    "secrets.per_person": KeyHelp(
        help="secrets each person holds their own value of (`pincer secrets set NAME --person WHO`); a call gets its person's, a call of no person is refused; the rest are shared",
        example='["github_token"]',
    ),
    "telemetry.metrics": KeyHelp(help="serve Prometheus metrics at /metrics (a main session's token)"),
    "telemetry.metrics_port": KeyHelp(
        help="also serve /metrics on this 127.0.0.1 port, without a token; unset: only the gateway's /metrics",
        example="9464",
    ),
    "triggers.enabled": KeyHelp(help="pincer serve runs the scheduler and the run queue, and answers /hooks/NAME"),
    "triggers.hook_max_body_bytes": KeyHelp(help="a webhook delivery larger than this gets 413 before it is read whole"),
    "triggers.signature_tolerance_s": KeyHelp(help="a Standard Webhooks timestamp further than this from now gets 401"),
    "triggers.max_failures_per_minute": KeyHelp(
        help="an address with this many failed webhook deliveries in a minute gets 429 until they age out"
    ),
    "triggers.delivery_retention_days": KeyHelp(help="delivery ids are remembered this long (replays get the first answer)"),
    "triggers.payload_record_bytes": KeyHelp(help="a payload is recorded (redacted) in the store and the audit log up to this size"),
    "triggers.max_queued": KeyHelp(help="runs waiting to start at most; past it a webhook delivery gets 503 with Retry-After"),
    "triggers.max_running": KeyHelp(help="runs started by triggers that go on at the same time"),
    "triggers.misfire_grace_s": KeyHelp(
        help="a run missed while pincer was down runs once at start when it is at most this late; older ones are skipped"
    ),
    "triggers.retries": KeyHelp(help="a failed scheduled run is retried this many times"),
    "triggers.retry_backoff_s": KeyHelp(help="the first retry's delay; it doubles with each retry"),
    "triggers.retry_backoff_max_s": KeyHelp(help="retries wait at most this long"),
    "triggers.max_concurrent": KeyHelp(help="a job's runs going on at once; a run due meanwhile is skipped"),
    "triggers.jitter_s": KeyHelp(help="each scheduled run starts up to this many seconds late, at random"),
    "hooks.name": KeyHelp(help="the webhook's path: POST /hooks/NAME", example='"gh"'),
    "hooks.skill": KeyHelp(help="the skill a delivery runs (without skill and message: every skill whose webhook trigger matches)", example='"code-review"'),
    "hooks.message": KeyHelp(help="or a plain agent turn with this message (a template: {{ event }}, {{ payload.x }})", example='"New event: {{ event }}"'),
    "hooks.auth": KeyHelp(help="bearer (a token), standard (Standard Webhooks signatures) or github (X-Hub-Signature-256)", example='"github"'),
    "hooks.secret": KeyHelp(help="the secret store entry with the token, the whsec_ key or the HMAC key (`pincer secrets set NAME`)", example='"gh_hook_secret"'),
    "hooks.events": KeyHelp(help="only these events (names, globs, dot prefixes) start runs; others get 202 ignored", example='["github.pr.opened"]'),
    "hooks.params": KeyHelp(help="skill parameters from the payload, each a template", example='{ pr_url = "{{ payload.pull_request.html_url }}" }'),
    "hooks.session": KeyHelp(help="the session its runs use (default hook:NAME, a non-main session)", example='"hook:gh"'),
    "hooks.max_body_bytes": KeyHelp(help="this hook's body limit instead of [triggers] hook_max_body_bytes", example="1048576"),
    "jobs.name": KeyHelp(help="the job's name (pincer cron list shows it)", example='"morning-brief"'),
    "jobs.cron": KeyHelp(help="a cron expression: 5 fields, 6 with seconds first, or @daily, @hourly...", example='"0 9 * * 1-5"', one_of=("cron", "at", "every")),
    "jobs.at": KeyHelp(help="or one run at this ISO 8601 time (UTC unless it says otherwise)", example='"2027-01-01T09:00:00Z"', one_of=("cron", "at", "every")),
    "jobs.every": KeyHelp(help="or a run every interval", example='"30m"', one_of=("cron", "at", "every")),
    "jobs.tz": KeyHelp(help="the IANA time zone of the cron fields (default: this machine's)", example='"Europe/Berlin"'),
    "jobs.skill": KeyHelp(help="the skill to run", example='"release-notes"', one_of=("skill", "message")),
    "jobs.message": KeyHelp(help="the message the run starts with (alone: a plain agent turn)", example='"Summarize what changed yesterday"', one_of=("skill", "message")),
    "jobs.params": KeyHelp(help="the skill's parameters", example='{ since = "yesterday" }'),
    "jobs.session": KeyHelp(help="the session its runs use (default cron:NAME, a non-main session)", example='"main"'),
    "jobs.max_concurrent": KeyHelp(help="this job's limit instead of [triggers] max_concurrent", example="1"),
    "jobs.retries": KeyHelp(help="this job's retries instead of [triggers] retries", example="3"),
    "jobs.jitter_s": KeyHelp(help="this job's jitter instead of [triggers] jitter_s", example="60"),
    "jobs.enabled": KeyHelp(help="false keeps the job but does not run it"),
    "gateway.host": KeyHelp(help="where pincer serve listens; a non-loopback address also needs allow_remote = true"),
    "gateway.port": KeyHelp(help="0 picks a free port"),
    "gateway.allow_remote": KeyHelp(help="allow listening on a non-loopback address"),
    "gateway.session": KeyHelp(help="the session of the generated token (and of pincer mcp stdio)"),
    "gateway.max_body_bytes": KeyHelp(help="larger request bodies get 413"),
    "gateway.allowed_hosts": KeyHelp(help="Host names accepted besides 127.0.0.1, localhost and [::1]"),
    "gateway.allowed_origins": KeyHelp(help='browser Origins accepted, e.g. "https://console.example"'),
    "gateway.a2ui_catalogs": KeyHelp(help="more A2UI catalogs a canvas surface may name in catalogId: files (relative to the pincer home) or https URLs (docs/canvas.md)"),
    "gateway.canvas": KeyHelp(help="turn on the canvas tools (canvas, a2ui_push, a2ui_reset) and their pages at /ui/canvas/SESSION (docs/canvas.md)"),
    "gateway.tokens.sha256": KeyHelp(help="the sha256 of a token, never the token (`pincer token new` adds one)", example='"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"'),
    "gateway.tokens.session": KeyHelp(help="the session the token's calls run under", example='"ci-bot"'),
    "hub.max_archive_bytes": KeyHelp(help="a larger artifact download is stopped and refused"),
    "hub.max_unpacked_bytes": KeyHelp(help="an archive that unpacks to more is refused (zip bombs)"),
    "hub.max_files": KeyHelp(help="an archive with more files is refused"),
    "hub.download_timeout_s": KeyHelp(help="how long one artifact download may take"),
    "hub.signing_key": KeyHelp(help="the secret store entry holding your publisher key (`pincer hub keygen` writes it)"),
    "hub.sources.name": KeyHelp(help="how commands name the source (--source NAME)", example='"local"'),
    "hub.sources.path": KeyHelp(
        help="an IronClaw registry folder or MCP-Registry server.json documents (relative: to $PINCER_HOME)",
        example='"/path/to/registry"', one_of=("path", "url"),
    ),
    "hub.sources.url": KeyHelp(help="a pincer hub server (`pincer hub serve`)", example='"https://hub.example.com"', one_of=("path", "url")),
    "hub.sources.token_secret": KeyHelp(
        help="the secret store entry with your publisher token for that hub (publishing only)", example='"hub_token"'
    ),
    "hub.sources.format": KeyHelp(help="what a path holds; auto tells IronClaw folders from server.json documents"),
    "builtins.*.enabled": KeyHelp(help="register this built-in (docs/builtins.md lists them)"),
    "builtins.*.base_url": KeyHelp(
        help="the API it calls (GitHub Enterprise, a local server); permission for exactly that scheme, host and port",
        example='"https://ghe.example/api/v3"',
    ),
    "builtins.*.actions": KeyHelp(help="offer only these actions (unset: all)", example='["get_repo", "list_issues"]'),
    "builtins.*.toolsets": KeyHelp(help="offer only the actions of these families (github: repos, issues, pull_requests, search, actions, webhooks)", example='["issues"]'),
    "builtins.*.read_only": KeyHelp(help="drop every write action, whatever actions and toolsets say"),
    "builtins.*.authorization_url": KeyHelp(
        help="[builtins.google] and [builtins.slack]: the OAuth login's consent page (pincer auth setup NAME)",
        example='"https://accounts.google.com/o/oauth2/v2/auth"', table="google",
    ),
    "builtins.*.token_url": KeyHelp(
        help="[builtins.google] and [builtins.slack]: where codes and refresh tokens are exchanged",
        example='"https://oauth2.googleapis.com/token"', table="google",
    ),
    "builtins.*.revocation_url": KeyHelp(
        help="[builtins.google] and [builtins.slack]: where pincer auth revoke NAME revokes the login",
        example='"https://oauth2.googleapis.com/revoke"', table="google",
    ),
    "builtins.*.effects": KeyHelp(
        help="composio: each enabled action's effects, declared by you (an enabled action without them is an error)",
        example='{ SLACK_SEND_MESSAGE = ["network", "external_write"] }', table="composio",
    ),
    "builtins.*.idle_timeout_s": KeyHelp(help="browser only: close Chromium after this long without a call (unset: 300)", example="600", table="browser"),
    "builtins.*.max_snapshot_chars": KeyHelp(help="browser only: longest snapshot text returned (unset: 20000)", example="40000", table="browser"),
    "builtins.*.profile_dir": KeyHelp(help="browser only: where each launch's fresh Chromium profile is made, removed on close (unset: $PINCER_HOME/browser)", example='"browser"', table="browser"),
    "builtins.*.max_download_bytes": KeyHelp(help="browser only: largest download kept in the workspace (unset: 50 MiB)", example="10485760", table="browser"),
}

SECTIONS: dict[str, str] = {
    "approvals": "Calls that need a person's answer.",
    "audit": "The hash-chained audit log in $PINCER_HOME/pincer.db.",
    "store": "Where shared state lives: SQLite under $PINCER_HOME, or PostgreSQL for several gateways (docs/scale-out.md).",
    "cache": "Redis shared by several gateways: exact rate limits across them (docs/scale-out.md).",
    "output": "Limits on what a tool returns.",
    "idempotency": "Replays of calls made with an idempotency key.",
    "tasks": "MCP Tasks: calls that outlive their connection (docs/tasks.md).",
    "network": "The http tool's reach.",
    "openapi": "OpenAPI services (`pincer openapi add`; docs/openapi.md).",
    "tools": "Every tool call.",
    "workspace": "The files the file tools see.",
    "sandbox": "Where script tools and exec run.",
    "grants": "Grants: what a tool may do without asking. One [[grants]] table per rule; the most specific match applies.",
    "sessions": "Session policies by session name; a session not named here is non-main with the sandbox defaults.",
    "limits": "Rate limits by tool name or * pattern.",
    "credentials": "Secrets the http tool injects into requests to matching hosts; the caller never sees them.",
    "gateway": "pincer serve and pincer mcp stdio.",
    "skills": "Skills: SKILL.md files in every dialect (docs/skills.md).",
    "gateway.tokens": "More gateway tokens, each with its session.",
    "llm": "The model the agent loop talks to (pincer run, pincer chat, REST runs); docs/agent.md.",
    "llm.profiles": "Named model settings (pincer run --profile NAME); unset keys come from [llm].",
    "agent": "The agent loop: tool sets, taint, parallel calls and the budgets of each run.",
    "agent.prices": "Prices per model (the table's name is the model, or a prefix of it); built-in ones cover well-known models.",
    "hub": "The hub: where tools and skills are installed from, and what one artifact may weigh (docs/hub.md).",
    "hub.sources": "Catalog sources, searched together: a registry folder (path) or a hub server (url).",
    "triggers": "Triggers: commands, schedules and webhooks that start skill runs (docs/triggers.md).",
    "secrets": "Secrets each person holds their own value of (docs/teams.md); the others are shared.",
    "retention": "How long finished approvals, runs and webhook payloads stay in the store (the audit log leaves it only through `pincer audit archive`).",
    "telemetry": "Traces and metrics for operators: OpenTelemetry spans over OTLP/HTTP, Prometheus /metrics (docs/operations.md).",
    "hooks": "Webhooks: one [[hooks]] table per POST /hooks/NAME, authenticated by its own secret.",
    "jobs": "Scheduled jobs kept in config.toml (pincer cron add keeps them in the store).",
    "builtins": "The bundled tools, and the APIs or logins several of them share (brave, dune: base_url only; google: "
    "the one login of the six Google tools); docs/builtins.md, docs/browser.md.",
}

# Names shown for the "*" of a map, in examples.
_MAP_EXAMPLE_NAMES = {"sessions": "ci-bot", "limits": "http", "llm.profiles": "local", "agent.prices": '"my-model"',
                      "builtins": "github"}


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaKey:
    """One key of config.toml as the schema defines it."""

    path: str  # "approvals.timeout_s", "grants.tool", "sessions.*.kind"
    section: str  # "approvals", "grants", "sessions", "gateway.tokens"
    shape: str  # "table" ([section]), "array" ([[section]]) or "map" ([section.NAME])
    name: str
    type: str  # as a person reads it: "number", "true | false", "auto | bwrap | ..."
    default: Any  # PydanticUndefined when the key is required
    bounds: str  # "> 0, <= 86400" or ""
    help: str
    example: str | None
    table: str | None = None  # KeyHelp.table
    one_of: tuple[str, ...] = ()  # KeyHelp.one_of

    @property
    def is_required(self) -> bool:
        return self.default is PydanticUndefined

    @property
    def default_toml(self) -> str | None:
        """The default as TOML, or None when there is nothing to write (required, or no value)."""
        if self.is_required or self.default is None:
            return None
        return toml_value(self.default)


def schema_keys() -> list[SchemaKey]:
    """Every key of config.toml in file order; ``KeyError`` names a key with no sentence in KEYS."""
    return list(_walk(ConfigFile, prefix="", section="", shape="table"))


def _walk(model: type[BaseModel], *, prefix: str, section: str, shape: str) -> Iterator[SchemaKey]:
    nested: list[tuple[str, type[BaseModel], str]] = []
    for name, field in model.model_fields.items():
        inner, kind = _nested_model(field.annotation)
        if inner is not None:
            nested.append((name, inner, kind))
            continue
        path = f"{prefix}{name}"
        described = _help(path, field)
        yield SchemaKey(
            path=path, section=section, shape=shape, name=name, type=_type_name(field.annotation),
            default=_default(field), bounds=_bounds(field), help=described.help, example=described.example,
            table=described.table, one_of=described.one_of,
        )  # fmt: skip
    for name, inner, kind in nested:
        here = f"{prefix}{name}"
        if kind == "map":
            yield from _walk(inner, prefix=f"{here}.*.", section=here, shape="map")
        else:
            yield from _walk(inner, prefix=f"{here}.", section=here, shape=kind)


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """A section model, a list of them (an array of tables) or a map of them, else (None, "")."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "table"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, tuple) and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], "array"
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return args[1], "map"
    return None, ""


def _help(path: str, field: FieldInfo) -> KeyHelp:
    if path in KEYS:
        return KEYS[path]
    if field.description:
        return KeyHelp(help=field.description)
    raise KeyError(f"config key {path} has no help: add it to KEYS in pincer/config_template.py")


def _default(field: FieldInfo) -> Any:
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def _bounds(field: FieldInfo) -> str:
    found: dict[str, Any] = {}
    for item in field.metadata:
        for attr in ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern"):
            if getattr(item, attr, None) is not None:
                found[attr] = getattr(item, attr)
    parts = [f"{sign} {_number(found[attr])}" for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")) if attr in found]
    low, high = found.get("min_length"), found.get("max_length")
    one, many = ("entry", "entries") if _is_list(field.annotation) else ("character", "characters")
    if low is not None or high is not None:
        parts.append(f"{low or 0}-{high} {many}" if high is not None else f"at least {low} {one if low == 1 else many}")
    if "pattern" in found:
        parts.append(f"matching {found['pattern']}")
    return ", ".join(parts)


def _is_list(annotation: Any) -> bool:
    """A TOML array: ``list[X]`` or ``tuple[X, ...]`` (sections keep arrays as tuples), optional or not."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in get_args(annotation) if a is not type(None))
    return get_origin(annotation) in (list, tuple)


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        named = [_type_name(a) for a in args if a is not type(None)]
        return " | ".join(named)
    if origin is Literal:
        return " | ".join(str(a) for a in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        key = args[0]
        key_name = key.__name__.removesuffix("Kind").lower() if isinstance(key, type) and issubclass(key, enum.Enum) else _type_name(key)
        return f"table of {key_name} = {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(str(m.value) for m in annotation)
    names = {bool: "true | false", int: "integer", float: "number", str: "string", Path: "string"}
    if annotation in names:
        return names[annotation]
    return getattr(annotation, "__name__", str(annotation)).replace("datetime", "date-time")


def toml_value(value: Any) -> str:
    """A value as TOML text: scalars, date-times, lists of them, and tables of them (inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return toml_value(value.value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 120, as people write it; the schema takes it as 120.0
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string uses JSON's escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_key(key: Any) -> str:
    """A table key: bare when TOML allows it, else quoted."""
    text = str(key.value if isinstance(key, enum.Enum) else key)
    return text if _BARE_KEY.fullmatch(text) else json.dumps(text, ensure_ascii=False)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def render_settings(data: ConfigFile) -> str:
    """The settings in force (``pincer config show``) as config.toml: every key with its value,
    defaults included, in the same order as the template; parses back to the same settings."""
    lines: list[str] = ["# the settings in force: config.toml with every default filled in"]
    dumped = data.model_dump()
    keys = schema_keys()
    for section in dict.fromkeys(k.section for k in keys):
        group = [k for k in keys if k.section == section]
        shape = group[0].shape
        value: Any = dumped
        for part in section.split("."):
            value = value[part]
        if shape == "table":
            lines += ["", f"[{section}]"]
            lines += [f"{k.name} = {toml_value(value[k.name])}" for k in group if value[k.name] is not None]
        elif shape == "array":
            for entry in value:
                lines += ["", f"[[{section}]]"]
                lines += [f"{k.name} = {toml_value(entry[k.name])}" for k in group if entry[k.name] is not None]
        else:
            for name, entry in value.items():
                lines += ["", f"[{section}.{toml_key(name)}]"]
                lines += [f"{k.name} = {toml_value(entry[k.name])}" for k in group if entry[k.name] is not None]
    return "\n".join(lines) + "\n"


_WIDTH = 38  # where the trailing "# what it does" comments line up in the template
_LINE_CHARS = 100


def render_template() -> str:
    """The commented config.toml ``pincer init`` writes: every key at its default, commented out,
    so the file changes nothing until a line is uncommented (and later defaults still apply)."""
    lines = [
        "# pincer settings: $PINCER_HOME/config.toml. Written by `pincer init`.",
        "#",
        "# Every setting is shown at its default, commented out: uncomment a line to change it.",
        "# Unknown keys are errors (a typo must not change your policy silently); every error names",
        "# the key. Check the file with `pincer config check`; docs/config.md lists every key.",
    ]
    keys = schema_keys()
    for section in dict.fromkeys(k.section for k in keys):
        group = [k for k in keys if k.section == section]
        shape = group[0].shape
        lines += ["", f"# {SECTIONS.get(section, section)}"]
        if shape == "table":
            lines.append(f"[{section}]")
            for key in group:
                value = key.default_toml if key.default_toml is not None else key.example
                lines.append(_with_comment(f"# {key.name} = {value}", _describe(key)))
        else:
            # A map's keys that belong to one entry only get an example table of that entry, so
            # that each line uncommented with its table header makes a valid file.
            name = _MAP_EXAMPLE_NAMES.get(section, "NAME")
            for table in dict.fromkeys(k.table or name for k in group):
                header = f"[[{section}]]" if shape == "array" else f"[{section}.{table}]"
                lines.append(f"# {header}" if table == name else f"#\n# {header}")
                for key in group:
                    if (key.table or name) == table:
                        value = key.example if key.example is not None else key.default_toml
                        lines.append(_with_comment(f"# {key.name} = {value}", _describe(key)))
    return "\n".join(lines) + "\n"


def _describe(key: SchemaKey) -> str:
    text = key.help
    if key.is_required:
        text = f"(required) {text}"
    elif key.one_of:
        text = f"(one of {', '.join(key.one_of)}) {text}"
    elif key.default is None and key.shape == "table":
        text = f"{text}; unset by default"
    return text


def _with_comment(line: str, comment: str) -> str:
    """``line`` with ``comment`` after it, wrapped into aligned ``#`` lines past _LINE_CHARS."""
    if len(line) >= _WIDTH:  # a long example: its comment goes on the lines below
        return "\n".join([line, *(f"{'#'.ljust(_WIDTH)} # {part}" for part in _wrap(comment))])
    first, *rest = _wrap(comment)
    return "\n".join([f"{line.ljust(_WIDTH)} # {first}", *(f"{'#'.ljust(_WIDTH)} # {part}" for part in rest)])


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, width=_LINE_CHARS - _WIDTH - 3, break_on_hyphens=False) or [""]


def render_reference() -> str:
    """The key reference of docs/config.md: one table per section, generated from the schema."""
    out: list[str] = []
    keys = schema_keys()
    for section in dict.fromkeys(k.section for k in keys):
        group = [k for k in keys if k.section == section]
        shape = group[0].shape
        header = {"table": f"[{section}]", "array": f"[[{section}]]", "map": f"[{section}.NAME]"}[shape]
        out += [f"### `{header}`", "", SECTIONS.get(section, ""), "", "| key | type | default | what it does |", "| --- | --- | --- | --- |"]
        for key in group:
            if key.is_required:
                default = "required"
            elif key.default_toml is None:
                default = "unset"
            else:
                default = f"`{key.default_toml}`"
            kind = key.type + (f" ({key.bounds})" if key.bounds else "")
            out.append(f"| `{key.name}` | {_cell(kind)} | {_cell(default)} | {_cell(key.help)} |")
        out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
