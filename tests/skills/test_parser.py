"""The pure SKILL.md parser: every dialect read into one Skill, warnings for spec violations,
our error (with file and line) for what cannot be read, and nothing else for any input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import SkillError
from pincer.skills import Dialect, ParamType, Trigger, Trust, parse_skill

P = Path("/skills/demo/SKILL.md")


def parse(text: str, path: Path = P, **kwargs):
    return parse_skill(text.encode(), path=path, **kwargs)


def warnings_of(skill) -> list[str]:
    return [str(w) for w in skill.warnings]


# -- the corpus --------------------------------------------------------------------------------


def test_every_openclaw_skill_in_the_corpus_loads_with_its_name_and_description(corpus: Path) -> None:
    folder = corpus / "openclaw-skills-2026-04"
    files = sorted(folder.glob("*/SKILL.md"))
    assert len(files) == 53
    for path in files:
        skill = parse_skill(path.read_bytes(), path=path)
        assert skill.name == path.parent.name, path
        assert skill.description and len(skill.description) <= 1024, path
        assert skill.warnings == (), (path, warnings_of(skill))
    weather = parse_skill((folder / "weather/SKILL.md").read_bytes(), path=folder / "weather/SKILL.md")
    assert weather.dialect is Dialect.OPENCLAW and weather.requires.bins == ("curl",)
    assert weather.emoji == "☔" and weather.homepage == "https://wttr.in/:help"
    assert weather.install[0]["formula"] == "curl"
    coding = parse_skill((folder / "coding-agent/SKILL.md").read_bytes(), path=folder / "coding-agent/SKILL.md")
    assert coding.requires.any_bins == ("claude", "codex", "opencode", "pi")
    discord = parse_skill((folder / "discord/SKILL.md").read_bytes(), path=folder / "discord/SKILL.md")
    assert discord.tools == ("message",) and discord.requires.config == ("channels.discord.token",)
    voice = parse_skill((folder / "voice-call/SKILL.md").read_bytes(), path=folder / "voice-call/SKILL.md")
    assert voice.skill_key == "voice-call"
    gh = parse_skill((folder / "gh-issues/SKILL.md").read_bytes(), path=folder / "gh-issues/SKILL.md")
    assert gh.primary_env == "GH_TOKEN" and gh.user_invocable


def test_a_skill_without_frontmatter_is_named_by_its_folder_and_described_by_its_first_paragraph(corpus: Path) -> None:
    path = corpus / "openclaw-skills-2026-04" / "canvas" / "SKILL.md"
    skill = parse_skill(path.read_bytes(), path=path)
    assert skill.name == "canvas" and skill.dialect is Dialect.PLAIN
    assert skill.description == "Display HTML content on connected OpenClaw nodes (Mac app, iOS, Android)."
    assert skill.warnings == ()


# -- one table per dialect ------------------------------------------------------------------------

PINCER = """---
name: demo
version: 1.2.0
description: Review code
tags: [dev, review]
tools: [read_file, "list_*"]
parameters:
  - name: path
    type: string
    description: what to review
    required: true
  - name: depth
    type: integer
    default: 2
  - name: mode
    type: string
    enum: [fast, deep]
triggers:
  - webhook: github.pull_request.opened
  - command: /review
  - schedule: "0 9 * * 1"
  - manual
  - {type: webhook, event: push}
  - {type: command, name: check}
---
Review {{ path }}.
"""

IRONCLAW = """---
name: demo
description: Deploy things
activation:
  keywords: [deploy, ship it]
  exclude_keywords: [rollback]
  patterns: ['deploy (to|on) \\w+']
  tags: [ops]
  max_context_tokens: 1200
  setup_marker: .deployed
requires:
  bins: [git]
  env: [DEPLOY_TOKEN]
  config: [deploy.target]
  skills: [base]
credentials:
  - name: deploy_token
    provider: github
---
body
"""

OPENCLAW_LEGACY = """---
name: demo
description: Old clawdbot skill
metadata: {"clawdbot": {"emoji": "🦞", "requires": {"bins": ["jq"], "anyBins": ["rg", "grep"], "env": ["K"]}, "os": ["linux"], "always": true, "primaryEnv": "K"}}
user-invocable: false
disable-model-invocation: true
command-dispatch: tool
command-tool: exec
command-arg-mode: raw
homepage: https://example.com
---
Use {baseDir}/run.sh
"""

AGENT_SKILLS = """---
name: demo
description: Extract tables from PDF files.
license: Apache-2.0
compatibility: Requires python3 and pdfplumber
metadata:
  author: example-org
  version: "1.0"
allowed-tools: Bash(python:*) Read Write
---
See references/REFERENCE.md.
"""

CLAUDE = """---
name: demo
description: Fix a GitHub issue
when_to_use: When the user names an issue number
argument-hint: "[issue-number]"
arguments: [issue, branch]
disable-model-invocation: true
allowed-tools: Bash(gh:*)
---
Fix issue $ARGUMENTS[0] on $branch in ${CLAUDE_SKILL_DIR}.
"""


def test_pincer_dialect_reads_parameters_triggers_tools() -> None:
    skill = parse(PINCER)
    assert skill.dialect is Dialect.PINCER and skill.version == "1.2.0"
    assert skill.tags == ("dev", "review") and skill.tools == ("read_file", "list_*")
    assert [(p.name, p.type, p.required, p.default) for p in skill.parameters] == [
        ("path", ParamType.STRING, True, None),
        ("depth", ParamType.INTEGER, False, 2),
        ("mode", ParamType.STRING, False, None),
    ]
    assert skill.parameters[2].enum == ("fast", "deep")
    assert skill.triggers == (
        Trigger(kind="webhook", value="github.pull_request.opened"),
        Trigger(kind="command", value="/review"),
        Trigger(kind="schedule", value="0 9 * * 1"),
        Trigger(kind="manual"),
        Trigger(kind="webhook", value="push"),
        Trigger(kind="command", value="/check"),
    )
    assert skill.warnings == ()


def test_ironclaw_dialect_reads_activation_requires_credentials() -> None:
    skill = parse(IRONCLAW)
    assert skill.dialect is Dialect.IRONCLAW
    a = skill.activation
    assert a.keywords == ("deploy", "ship it") and a.exclude_keywords == ("rollback",)
    assert a.patterns == ("deploy (to|on) \\w+",) and a.tags == ("ops",)
    assert a.max_context_tokens == 1200 and a.setup_marker == ".deployed"
    r = skill.requires
    assert (r.bins, r.env, r.config, r.skills) == (("git",), ("DEPLOY_TOKEN",), ("deploy.target",), ("base",))
    assert skill.credentials[0]["name"] == "deploy_token"


def test_openclaw_legacy_clawdbot_json_form_and_its_flags() -> None:
    skill = parse(OPENCLAW_LEGACY)
    assert skill.dialect is Dialect.OPENCLAW
    assert skill.requires.bins == ("jq",) and skill.requires.any_bins == ("rg", "grep") and skill.requires.env == ("K",)
    assert skill.requires.os == ("linux",) and skill.always and skill.emoji == "🦞" and skill.primary_env == "K"
    assert not skill.user_invocable and not skill.model_invocable
    assert (skill.command_dispatch, skill.command_tool, skill.command_arg_mode) == ("tool", "exec", "raw")
    assert skill.homepage == "https://example.com"


def test_openclaw_metadata_as_a_json_string() -> None:
    text = "---\nname: demo\ndescription: d\nmetadata: '{\"openclaw\": {\"requires\": {\"bins\": [\"op\"]},}}'\n---\n"
    skill = parse(text)
    assert skill.dialect is Dialect.OPENCLAW and skill.requires.bins == ("op",)


def test_agent_skills_spec_fields() -> None:
    skill = parse(AGENT_SKILLS)
    assert skill.dialect is Dialect.AGENT_SKILLS
    assert skill.license == "Apache-2.0" and skill.compatibility == "Requires python3 and pdfplumber"
    assert skill.metadata == {"author": "example-org", "version": "1.0"}
    assert skill.tools == ("Bash(python:*)", "Read", "Write")
    assert skill.warnings == ()


def test_claude_code_fields_and_named_arguments() -> None:
    skill = parse(CLAUDE)
    assert skill.dialect is Dialect.CLAUDE
    assert skill.when_to_use == "When the user names an issue number" and skill.argument_hint == "[issue-number]"
    assert [p.name for p in skill.parameters] == ["issue", "branch"]
    assert not skill.model_invocable and skill.user_invocable
    assert parse("---\nname: demo\ndescription: d\n---\nDo $ARGUMENTS\n", claude_root=True).dialect is Dialect.CLAUDE


def test_seed_capability_sections_become_declared_capabilities() -> None:
    text = """---
name: demo
description: counts
capabilities:
  word_count:
    effects: [read_filesystem]
---
# Demo

## capability: word_count
Count the words of a text.

### Inputs
- text (string, required): the text to count
- unique (boolean): count distinct words only

### Outputs
- count (integer): how many words

## capability: shout
Upper-case a text.

Inputs:
- text: string - what to shout
"""
    skill = parse(text)
    assert skill.dialect is Dialect.PINCER
    count, shout = skill.capabilities
    assert count.name == "word_count" and count.description == "Count the words of a text."
    assert [(f.name, f.type, f.required) for f in count.inputs] == [("text", ParamType.STRING, True), ("unique", ParamType.BOOLEAN, False)]
    assert [(f.name, f.type) for f in count.outputs] == [("count", ParamType.INTEGER)]
    assert count.effects == ("read_filesystem",)
    assert [(f.name, f.type, f.description) for f in shout.inputs] == [("text", ParamType.STRING, "what to shout")]


def test_capabilities_json_beside_the_skill_fills_in_commands() -> None:
    data = b'{"capabilities": [{"name": "fetch", "command": ["/usr/bin/curl", "{url}"], "network": "allowlist", "allow_hosts": ["example.com"], "inputs": [{"name": "url", "type": "string", "required": true}]}]}'
    skill = parse_skill(b"---\nname: demo\ndescription: d\n---\n", path=P, capabilities_json=data)
    (fetch,) = skill.capabilities
    assert fetch.command == ("/usr/bin/curl", "{url}") and fetch.network == "allowlist" and fetch.allow_hosts == ("example.com",)
    broken = parse_skill(b"---\nname: demo\ndescription: d\n---\n", path=P, capabilities_json=b"{nope")
    assert broken.capabilities == () and any("capabilities.json" in w for w in warnings_of(broken))


# -- warnings, never failures -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frontmatter", "folder", "needle"),
    [
        ("name: Demo_Skill\ndescription: d", "Demo_Skill", "breaks the Agent Skills rule"),
        ("name: demo-\ndescription: d", "demo-", "breaks the Agent Skills rule"),
        ("name: de--mo\ndescription: d", "de--mo", "breaks the Agent Skills rule"),
        ("name: other\ndescription: d", "demo", "differs from its folder name 'demo'"),
        ("name: " + "a" * 65 + "\ndescription: d", "a" * 65, "at most 64"),
        ("name: demo\ndescription: " + "x" * 1100, "demo", "at most 1024"),
        ("name: demo\ndescription: d\ncompatibility: " + "c" * 501, "demo", "1-500"),
        ("description: d", "demo", "name: missing; the folder name 'demo' is used"),
        ("name: demo", "demo", "description: missing"),
        ("name: demo\ndescription: d\nparameters: nope", "demo", "parameters: expected a list"),
        ("name: demo\ndescription: d\nparameters: [{name: x, type: decimal}]", "demo", "unknown type 'decimal'"),
        ("name: demo\ndescription: d\nparameters: [{name: x, type: integer, default: abc}]", "demo", "is not a integer"),
        ("name: demo\ndescription: d\ntriggers: [{hourly: yes}]", "demo", "is not a trigger"),
        ("name: demo\ndescription: d\ntriggers: ['schedule: every day']", "demo", "not a 5- or 6-field cron"),
        ("name: demo\ndescription: d\nactivation: {patterns: ['(a+)+$']}", "demo", "nests quantifiers"),
        ("name: demo\ndescription: d\nactivation: {patterns: ['[unclosed']}", "demo", "not a valid regular expression"),
        ("name: demo\ndescription: d\nactivation: {keywords: [" + ",".join(f"k{i}" for i in range(25)) + "]}", "demo", "only the first 20"),
        ("name: demo\ndescription: d\nactivation: {patterns: [a, b, c, d, e, f]}", "demo", "only the first 5"),
        ("name: demo\ndescription: d\nactivation: {tags: [" + ",".join(f"t{i}" for i in range(12)) + "]}", "demo", "only the first 10"),
        ("name: demo\ndescription: d\nmetadata: {openclaw: {os: [plan9]}}", "demo", "unknown platform 'plan9'"),
        ("name: [not, text]\ndescription: d", "demo", "cannot name a skill"),
        ("name: demo\ndescription: d\nuser-invocable: maybe", "demo", "expected true or false"),
    ],
)
def test_spec_violations_are_warnings_on_a_loaded_skill(frontmatter: str, folder: str, needle: str) -> None:
    skill = parse(f"---\n{frontmatter}\n---\nBody text.\n", path=Path(f"/skills/{folder}/SKILL.md"))
    assert any(needle in w for w in warnings_of(skill)), warnings_of(skill)
    assert skill.name


def test_unknown_keys_are_ignored() -> None:
    skill = parse("---\nname: demo\ndescription: d\nflavour: strawberry\nnested: {deep: [1, 2]}\n---\n")
    assert skill.warnings == () and skill.frontmatter["flavour"] == "strawberry"


def test_an_unquoted_colon_is_read_leniently_with_a_warning() -> None:
    skill = parse("---\nname: demo\ndescription: Use when: the user asks\n---\nbody\n")
    assert skill.description == "Use when: the user asks"
    assert any("not strict YAML" in w for w in warnings_of(skill))


# -- errors name the file and the line ----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "line", "needle"),
    [
        (b"---\nname: demo\ndescription: [unclosed\nversion: 1\n---\n", 4, "not valid YAML"),
        (b"---\nname: demo\n  bad: indent\n---\n", 3, "not valid YAML"),
        (b"---\nname: demo\ndescription: d\n", 1, "never closed"),
        (b"---\n- a\n- b\n---\n", 2, "must be a mapping"),
        (b"---\nname: demo\n\x00\n---\n", 3, "binary"),
        (b"---\nname: demo\ndescription: caf\xe9\n---\n", 3, "not UTF-8"),
        (b"---\na: &x [1]\nb: *x\n---\n", 2, "anchors or aliases"),
    ],
)
def test_a_file_that_cannot_be_read_raises_with_file_and_line(data: bytes, line: int, needle: str) -> None:
    with pytest.raises(SkillError) as caught:
        parse_skill(data, path=P)
    assert caught.value.line == line, caught.value
    assert needle in caught.value.message and str(P) in caught.value.message


def test_a_file_over_the_size_limit_is_refused() -> None:
    with pytest.raises(SkillError, match="larger than the 262,144 byte limit"):
        parse_skill(b"---\nname: demo\n---\n" + b"x" * 262_144, path=P)


def test_alias_bombs_and_deep_nesting_are_refused_quickly() -> None:
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n---\n"
    with pytest.raises(SkillError, match="aliases"):
        parse(bomb)
    with pytest.raises(SkillError, match="too large or too deeply nested|not valid YAML"):
        parse("---\nx: " + "[" * 200 + "]" * 200 + "\n---\n")


def test_trust_and_root_are_carried() -> None:
    skill = parse(PINCER, root="installed", trust=Trust.INSTALLED)
    assert skill.trust is Trust.INSTALLED and skill.root == "installed"
    assert len(skill.content_hash) == 64 and skill.body_line == 26


# -- property tests: a skill or our error, never anything else ------------------------------------

_yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=40),
    st.sampled_from(["yes", "~", "2020-01-01", "1e999", "0x1f", "&a", "*a", "!!python/object", ": x", "'", '"', "{", "["]),
)  # fmt: skip
_yaml_values = st.recursive(
    _yaml_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["name", "description", "version", "tags", "tools", "parameters", "triggers", "activation", "requires", "metadata",
     "allowed-tools", "arguments", "user-invocable", "disable-model-invocation", "capabilities", "license",
     "compatibility", "credentials", "homepage"]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_keys, _yaml_values, max_size=8), st.text(max_size=200))
def test_arbitrary_frontmatter_values_load_or_raise_our_error(fields: dict, body: str) -> None:
    import json

    lines = [f"{key}: {json.dumps(value, default=str)}" for key, value in fields.items()]
    text = "---\n" + "\n".join(lines) + "\n---\n" + body
    try:
        skill = parse(text)
    except SkillError:
        return
    assert skill.name and isinstance(skill.description, str)
    skill.to_dict()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_arbitrary_bytes_load_or_raise_our_error(data: bytes) -> None:
    try:
        parse_skill(data, path=P)
    except SkillError:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("-:\n '\"[]{}&*!|>#%@`,?ab1.\t\\")), max_size=300))
def test_arbitrary_yaml_like_text_loads_or_raises_our_error(text: str) -> None:
    try:
        parse("---\n" + text + "\n---\nbody")
    except SkillError:
        pass
