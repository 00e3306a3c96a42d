"""Skills that disappeared without a word (issue 21, items 9-13), through ``pincer skills`` as a
subprocess with an isolated PINCER_HOME and HOME."""

from __future__ import annotations

from pathlib import Path

from tests.skills.conftest import write_skill
from tests.skills.test_cli import cli, doc, env, workspace

__all__ = ["env"]  # the fixture, imported for pytest


def test_list_counts_shadowed_skills_and_names_the_command_a_shadowing_skill_takes_away(env: dict[str, str]) -> None:
    """Before: ``skills list`` said "N skills" with no word of the shadowed ones (only ``--all``
    showed them), and shadowing the bundled code-review removed ``/review`` silently. The
    shadowing skills are the user's own ($PINCER_HOME/skills, trusted): a workspace skill no
    longer shadows a trusted one (issue 20 item 3)."""
    own = Path(env["PINCER_HOME"]) / "skills"
    write_skill(own, "code-review", "", "my own review\n")
    write_skill(own, "summarize-url", "triggers:\n  - command: /summarize", "mine\n")
    listed = cli(env, "list")
    assert listed.returncode == 0, listed.stderr
    assert "(2 shadowed: `--all` shows them)" in listed.stderr
    text = " ".join(listed.stderr.split())
    assert "/review is gone: code-review from bundled declared it" in text
    assert "/summarize is gone" not in text  # the shadowing skill declares it again
    everything = doc(cli(env, "list", "--all", "--json"))
    lost = {s["name"]: s["lost_commands"] for s in everything["shadowed"]}
    assert lost == {"code-review": ["/review"], "summarize-url": []}
    # with --all the shadowed ones are listed one by one, so the count is not repeated
    assert "shadowed: `--all`" not in cli(env, "list", "--all").stderr


def test_a_collection_one_level_too_deep_and_a_skill_file_of_another_case_are_reported(env: dict[str, str]) -> None:
    """Before: skills copied one level too deep (``skills/anthropic/<skill>/SKILL.md``) and a
    ``Skill.md`` loaded nothing, and ``skills check`` said "0 warnings, 0 errors". (A ``skill.md``
    loads, as the Agent Skills reference validator reads it: tests/skills/test_agentskills_spec.py.)"""
    collection = workspace(env) / "skills" / "anthropic"
    for name in ("pdf", "docx", "mcp-builder", "xlsx"):
        write_skill(collection, name)
    odd = workspace(env) / "skills" / "odd"
    odd.mkdir(parents=True)
    (odd / "Skill.md").write_text("---\nname: odd\ndescription: d\n---\nbody\n")
    checked = cli(env, "check")
    text = " ".join(checked.stderr.split())
    assert checked.returncode == 0, checked.stderr
    assert f"{collection} holds 4 skill folders one level down (docx, mcp-builder, pdf, ...)" in text
    assert f'add the folder as a root ([skills] extra_dirs = ["{collection}"])' in text  # the markup survives
    assert f"{odd / 'Skill.md'} is named Skill.md, and only SKILL.md or skill.md is read" in text and "rename it to SKILL.md" in text
    assert "3 skills, 2 warnings, 0 errors" in text
    document = doc(cli(env, "check", "--json"))
    assert sorted(m["path"] for m in document["misplaced"]) == [str(collection), str(odd / "Skill.md")]
    assert document["warning_count"] == 2
    listed = cli(env, "list")
    assert "holds 4 skill folders one level down" in " ".join(listed.stderr.split())
    # checking the one folder says the same of its file
    one = doc(cli(env, "check", str(odd), "--json"))
    assert [m["path"] for m in one["misplaced"]] == [str(odd / "Skill.md")]
    # the advice works: with the folder as a root, its skills load
    (Path(env["PINCER_HOME"]) / "config.toml").write_text(f'[skills]\nextra_dirs = ["{collection}"]\n')
    names = {row["name"] for row in doc(cli(env, "list", "--json"))["skills"]}
    assert {"pdf", "docx", "mcp-builder", "xlsx"} <= names


# anthropics/skills mcp-builder/SKILL.md (Apache-2.0), its frontmatter as published
MCP_BUILDER = (
    "description: Guide for creating high-quality MCP (Model Context Protocol) servers that enable LLMs to interact "
    "with external services through well-designed tools. Use when building MCP servers to integrate external APIs or "
    "services, whether in Python (FastMCP) or Node/TypeScript (MCP SDK).\nlicense: Complete terms in LICENSE.txt"
)


def test_select_reads_descriptions_and_says_which_match_is_not_offered(env: dict[str, str]) -> None:
    """Before: ``skills select "create an MCP server for the Stripe API"`` found nothing although
    mcp-builder's description says exactly that (selection never read descriptions), and a skill
    that would have matched but was ineligible was not mentioned."""
    write_skill(workspace(env) / "skills", "mcp-builder", MCP_BUILDER, "# MCP server development guide\n")
    write_skill(workspace(env) / "skills", "stripe-ops", "description: Operate Stripe API servers for payments\n"
                "requires: {bins: [no-such-stripe-cli]}")  # fmt: skip
    chosen = cli(env, "select", "create an MCP server for the Stripe API")
    assert chosen.returncode == 0, chosen.stderr
    name, score, reasons = chosen.stdout.splitlines()[0].split("\t")
    assert name == "mcp-builder" and 0 < int(score) <= 8, chosen.stdout  # below one whole keyword (10)
    assert reasons.startswith("description ") and "mcp" in reasons and "server" in reasons
    assert "stripe-ops would match" in chosen.stderr and "needs no-such-stripe-cli on PATH" in chosen.stderr
    document = doc(cli(env, "select", "create an MCP server for the Stripe API", "--json"))
    assert [s["name"] for s in document["selected"]] == ["mcp-builder"]
    assert [(s["name"], s["why_not"]) for s in document["not_offered"]] == [("stripe-ops", "needs no-such-stripe-cli on PATH")]
    # a declared keyword still outweighs a description: code-review's "review" beats any wording
    ranked = doc(cli(env, "select", "review the MCP server code", "--json"))["selected"]
    assert ranked[0]["name"] == "code-review"
    # one shared word is not enough
    assert doc(cli(env, "select", "what is a server", "--json"))["selected"] == []


IRONCLAW_DEPLOY = """\
version: 0.2.0
tools: [shell, http, read_file]
activation:
  keywords: [deploy, release]
  exclude_keywords: [rollback]
  patterns: ["deploy (to|on) \\\\w+"]
  tags: [ops]
  max_context_tokens: 1500
requires:
  bins: [git]
  env: [DEPLOY_TOKEN]
triggers:
  - command: /deploy
  - schedule: "0 9 * * 1"
"""


def test_show_prints_everything_declared_and_warns_of_tools_nothing_here_offers(env: dict[str, str]) -> None:
    """Before: ``skills show`` left out activation, requires and triggers (only ``--json`` had
    them), and an IronClaw body relying on ``shell`` and CodeAct's ``FINAL(...)`` loaded with no
    warning."""
    body = "Run `shell` with `git push`, then call http(url=...).\n\n```python\nFINAL(answer)\n```\n"
    write_skill(workspace(env) / "skills", "deploy", IRONCLAW_DEPLOY, body)
    shown = cli(env, "show", "deploy")
    assert shown.returncode == 0, shown.stderr
    text = shown.stderr
    for line in (
        "trigger: command: /deploy", "trigger: schedule: 0 9 * * 1", "activation keywords: deploy, release",
        "activation exclude_keywords: rollback", "activation patterns: deploy (to|on) \\w+", "activation tags: ops",
        "activation max_context_tokens: 1500", "requires bins: git", "requires env: DEPLOY_TOKEN", "tools: shell, http, read_file",
    ):  # fmt: skip
        assert line in text, (line, text)
    flat = " ".join(text.split())
    assert "tools: names 'shell', and no tool here has that name" in flat
    assert "'http', and no tool" not in flat and "'read_file', and no tool" not in flat  # pincer's builtins
    assert "uses CodeAct's FINAL(...), which pincer does not execute" in flat
    assert "relies on the shell tool (the shell tool of IronClaw and OpenClaw)" in flat
    data = doc(cli(env, "show", "deploy", "--json"))
    assert any("CodeAct" in w for w in data["warnings"]) and data["activation"]["keywords"] == ["deploy", "release"]
    checked = doc(cli(env, "check", "--json"))
    (deploy,) = [s for s in checked["skills"] if s["name"] == "deploy"]
    assert sum("no tool here has that name" in w["message"] for w in deploy["warnings"]) == 2
    # pincer's bundled skills use only tools pincer has
    assert all(not s["warnings"] for s in checked["skills"] if s["name"] != "deploy"), checked["skills"]
