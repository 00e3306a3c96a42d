"""The github built-in's behaviour through the call chain: input checks, rate limits, pagination,
redirects, a missing token, the token echoed back, narrowing, effects per action."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pincer.builtins.catalog import bundled_tools
from pincer.builtins.github import ACTIONS, check_git_ref, check_repo_path, github_tool
from pincer.config import BuiltinSettings
from pincer.core.effects import EffectKind
from pincer.core.errors import ConfigError, UsageError
from pincer.core.values import CallRequest
from tests.builtins.conftest import TOKEN, github_config, pincer_on
from tests.builtins.fakegithub import FakeGitHub

pytestmark = pytest.mark.anyio

_OR = {"owner": "octocat", "repo": "hello-world"}
_WRITES = {a.name for a in ACTIONS if a.writes}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"action": "get_file_content", **_OR, "path": "../../etc/passwd"}, "'..' segments"),
        ({"action": "get_file_content", **_OR, "path": "docs//x"}, "empty segments"),
        ({"action": "get_file_content", **_OR, "path": "a", "ref": "main..evil"}, "'..'"),
        ({"action": "get_combined_status", **_OR, "ref": "refs:heads"}, "':'"),
        ({"action": "get_combined_status", **_OR, "ref": "x?y"}, "'?'"),
        ({"action": "get_combined_status", **_OR, "ref": "x[1]"}, "'['"),
        ({"action": "get_combined_status", **_OR, "ref": "x\\y"}, "'\\\\'"),
        ({"action": "get_combined_status", **_OR, "ref": "HEAD^"}, "'^'"),
        ({"action": "get_combined_status", **_OR, "ref": "HEAD~1"}, "'~'"),
        ({"action": "get_combined_status", **_OR, "ref": "main@{1}"}, "'@{'"),
        ({"action": "create_branch", **_OR, "branch": "x.lock", "from_ref": "main"}, "not a valid ref"),
        ({"action": "get_repo", "owner": "octo/cat", "repo": "x"}, "not a valid name"),
        ({"action": "get_repo", "owner": "..", "repo": "x"}, "not a valid name"),
        ({"action": "trigger_workflow", **_OR, "workflow_id": "../ci.yml", "ref": "main"}, "workflow_id"),
    ],
)
async def test_bad_paths_and_refs_are_refused_before_any_request(
    tmp_path: Path, fake_github: FakeGitHub, args: dict[str, Any], words: str
) -> None:
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args=args))
    assert not result.ok
    assert words in result.error["message"], result.error
    assert fake_github.requests == []


def test_ref_and_path_checks_accept_ordinary_names() -> None:
    for ref in ("main", "feature/x", "v1.2.0", "refs/heads/main", "3d21ec53a331a6f037a91c368710b99387d012c1"):
        check_git_ref(ref, "ref")
    check_repo_path("docs/guide/intro.md")
    with pytest.raises(UsageError):
        check_git_ref("", "ref")


async def test_primary_rate_limit_names_the_reset_time(tmp_path: Path, fake_github: FakeGitHub) -> None:
    reset = int(time.time()) + 1800
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-limit": "5000", "x-ratelimit-reset": str(reset)}
    fake_github.script.append((403, headers, {"message": "API rate limit exceeded"}))
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert not result.ok and result.error["code"] == "api_rate_limited"
    import datetime as dt

    when = dt.datetime.fromtimestamp(reset, tz=dt.UTC).isoformat().replace("+00:00", "Z")
    assert when in result.error["message"] and "5000" in result.error["message"]
    assert len(fake_github.requests) == 1  # never retried


async def test_secondary_rate_limit_is_waited_out_once(tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.script.append((403, {"retry-after": "1"}, {"message": "You have exceeded a secondary rate limit"}))
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert result.ok, result.error
    assert len(fake_github.requests) == 2


async def test_a_second_secondary_limit_is_the_error(tmp_path: Path, fake_github: FakeGitHub) -> None:
    refusal = (429, {"retry-after": "1"}, {"message": "secondary rate limit"})
    fake_github.script.extend([refusal, refusal])
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert not result.ok and result.error["code"] == "api_rate_limited"
    assert "secondary" in result.error["message"] and len(fake_github.requests) == 2


async def test_pagination_reads_githubs_link_header(tmp_path: Path, fake_github: FakeGitHub) -> None:
    link = f'<{fake_github.base_url}/repos/octocat/hello-world/issues?page=3>; rel="next", <x?page=9>; rel="last"'
    fake_github.script.append((200, {"Link": link}, [{"number": 1, "title": "t", "state": "open"}]))
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "list_issues", **_OR, "page": 2, "limit": 1}))
    assert result.ok, result.error
    assert result.output["next_page"] == 3 and result.output["count"] == 1
    assert fake_github.requests[0].query == {"state": ["open"], "per_page": ["1"], "page": ["2"]}


async def test_a_redirect_is_not_followed(tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.script.append((301, {"Location": "http://169.254.169.254/latest/meta-data/"}, None))
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert not result.ok and result.error["code"] == "egress_denied"
    assert "redirect not followed" in result.error["message"]
    assert len(fake_github.requests) == 1


async def test_without_a_token_the_error_says_how_to_set_one(tmp_path: Path, fake_github: FakeGitHub) -> None:
    async with pincer_on(tmp_path, github_config(fake_github)) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert not result.ok
    assert "pincer auth setup github" in result.error["hint"]
    assert fake_github.requests == []


async def test_a_token_echoed_back_is_redacted(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """The fake API copies the Authorization header into its answer (and into an error body):
    the leak scanner redacts the injected value from both."""
    fake_github.echo_auth = True
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        ok = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
        fake_github.script.append((500, {}, {"message": "boom"}))
        failed = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert ok.ok, ok.error
    assert "echo: Bearer" in ok.output["description"] and TOKEN not in json.dumps(ok.output)
    assert "REDACTED" in ok.output["description"]
    assert not failed.ok and "echo: Bearer" in failed.error["message"]
    assert TOKEN not in json.dumps(failed.error)
    assert TOKEN.encode() not in (tmp_path / "pincer.db").read_bytes()


def test_read_only_leaves_no_write_action_and_wins_over_actions() -> None:
    tool = github_tool(read_only=True, actions=["get_repo", "create_issue", "close_issue"])
    assert tool.spec.input_schema["properties"]["action"]["enum"] == ["get_repo"]
    assert EffectKind.EXTERNAL_WRITE not in tool.spec.effects
    assert tool.spec.side_effecting is False
    every = github_tool(read_only=True).spec.input_schema["properties"]["action"]["enum"]
    assert every and not set(every) & _WRITES
    assert "create_issue" not in json.dumps(github_tool(read_only=True).spec.input_schema)


def test_toolsets_narrow_to_their_families() -> None:
    enum = github_tool(toolsets=["issues"]).spec.input_schema["properties"]["action"]["enum"]
    assert set(enum) == {"list_issues", "get_issue", "create_issue", "close_issue", "list_issue_comments",
                         "create_issue_comment"}


def test_unknown_actions_toolsets_and_sections_are_config_errors() -> None:
    with pytest.raises(UsageError, match=r"\[builtins.github\] actions"):
        github_tool(actions=["get_repo", "delete_everything"])
    with pytest.raises(UsageError, match="toolsets"):
        github_tool(toolsets=["gists"])
    with pytest.raises(ConfigError, match=r"\[builtins.githup\]"):
        bundled_tools({"githup": BuiltinSettings(enabled=True)})


def test_effects_per_action() -> None:
    spec = github_tool().spec
    assert spec.call_effects is not None and spec.call_effects.arg == "action"
    table = spec.call_effects.table
    assert table["get_repo"] == frozenset({EffectKind.NETWORK, EffectKind.USE_SECRET})
    assert EffectKind.EXTERNAL_WRITE in table["create_issue"] and EffectKind.EXTERNAL_WRITE in table["close_issue"]
    assert table["handle_webhook"] == frozenset()
    assert spec.output_trusted is False


async def test_a_read_grant_lets_reads_run_and_writes_ask(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """[[grants]] tool = "github" effects = { network = "allow", use_secret = "allow" }: get_repo
    runs, create_issue (external_write) is asked about, and nothing is sent for it."""
    grant = 'effects = { network = "allow", use_secret = "allow" }'
    asked: list[Any] = []
    async with pincer_on(tmp_path, github_config(fake_github, grant=grant), secrets={"github_token": TOKEN}) as pincer:

        async def deny(approval: Any) -> None:
            asked.append(approval)
            await pincer.dispatcher.answer(approval.id, "deny", by="test")

        read = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}), on_approval=deny)
        write = await pincer.call(
            CallRequest(tool="github", args={"action": "create_issue", **_OR, "title": "x"}), on_approval=deny
        )
    assert read.ok, read.error
    assert not write.ok and write.error["code"] == "approval_denied", write.error
    assert len(asked) == 1 and "external_write" in asked[0].effects
    assert [r.operation_id for r in fake_github.requests] == ["repos/get"]


def test_an_unknown_builtins_section_is_a_config_error(tmp_path: Path) -> None:
    from pincer.config import parse_config

    with pytest.raises(ConfigError, match=r"\[builtins.githb\] is not a built-in") as caught:
        parse_config("[builtins.githb]\nenabled = true\n", home=tmp_path)
    assert "[builtins.github]" in (caught.value.hint or "")


async def test_outputs_are_trimmed_to_what_a_model_needs(tmp_path: Path, fake_github: FakeGitHub) -> None:
    """GitHub's repository object carries ~40 URL templates and node ids; the answer keeps the
    facts, html_url, and the owner as a login."""
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": "get_repo", **_OR}))
    assert result.ok, result.error
    repo = result.output
    assert repo["full_name"] == "octocat/Hello-World" and repo["owner"] == "octocat"
    assert "html_url" in repo and not [k for k in repo if k.endswith("_url") and k != "html_url"]
    assert "node_id" not in json.dumps(repo)
