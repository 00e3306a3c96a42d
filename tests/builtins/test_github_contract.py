"""Contract tests: each github action through the whole call chain against a local server that
validates every request, and its own answers, with GitHub's OpenAPI description (npm
``@octokit/openapi``). The token is injected host-side and absent from every output and the audit."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from pincer.builtins.github import ACTIONS
from pincer.core.values import CallRequest
from tests.builtins.conftest import TOKEN, github_config, pincer_on
from tests.builtins.fakegithub import FakeGitHub, validate_exchange

pytestmark = pytest.mark.anyio

_OR = {"owner": "octocat", "repo": "hello-world"}
_IDENT = {"name": "Mona", "email": "mona@example.com"}

# One call per action, with every field it takes where that is sensible; the operation GitHub's
# description must know it by.
CALLS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "get_repo": (_OR, ("repos/get",)),
    "create_repo": ({"name": "infra", "description": "d", "private": True, "auto_init": True,
                     "gitignore_template": "Python", "license_template": "mit"}, ("repos/create-for-authenticated-user",)),
    "list_repos": ({"username": "octocat", "page": 2, "limit": 5}, ("repos/list-for-user",)),
    "fork_repo": ({**_OR, "organization": "octo-org", "name": "fork", "default_branch_only": True}, ("repos/create-fork",)),
    "list_branches": ({**_OR, "protected": True, "limit": 10}, ("repos/list-branches",)),
    "create_branch": ({**_OR, "branch": "feature-x", "from_ref": "main"}, ("git/get-ref", "git/create-ref")),
    "get_file_content": ({**_OR, "path": "docs/README.md", "ref": "main"}, ("repos/get-content",)),
    "create_or_update_file": ({**_OR, "path": "docs/new.md", "message": "docs: add", "content": "hello",
                               "branch": "main", "committer": _IDENT, "author": _IDENT},
                              ("repos/create-or-update-file-contents",)),
    "delete_file": ({**_OR, "path": "docs/old.md", "message": "docs: drop", "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
                     "branch": "main", "committer": _IDENT}, ("repos/delete-file",)),
    "get_combined_status": ({**_OR, "ref": "main"}, ("repos/get-combined-status-for-ref",)),
    "list_releases": ({**_OR, "page": 1, "limit": 2}, ("repos/list-releases",)),
    "create_release": ({**_OR, "tag_name": "v1.0.0", "target_commitish": "main", "name": "v1", "body": "notes",
                        "draft": False, "prerelease": False, "generate_release_notes": True}, ("repos/create-release",)),
    "list_issues": ({**_OR, "state": "all", "limit": 3}, ("issues/list-for-repo",)),
    "get_issue": ({**_OR, "issue_number": 1347}, ("issues/get",)),
    "create_issue": ({**_OR, "title": "Found a bug", "body": "details", "labels": ["bug"]}, ("issues/create",)),
    "close_issue": ({**_OR, "issue_number": 1347, "state_reason": "completed"}, ("issues/update",)),
    "list_issue_comments": ({**_OR, "issue_number": 1347, "limit": 5}, ("issues/list-comments",)),
    "create_issue_comment": ({**_OR, "issue_number": 1347, "body": "thanks"}, ("issues/create-comment",)),
    "list_pull_requests": ({**_OR, "state": "open"}, ("pulls/list",)),
    "get_pull_request": ({**_OR, "pr_number": 42}, ("pulls/get",)),
    "create_pull_request": ({**_OR, "title": "Amazing", "head": "octocat:feature", "base": "main", "body": "b",
                             "draft": True}, ("pulls/create",)),
    "get_pull_request_files": ({**_OR, "pr_number": 42}, ("pulls/list-files",)),
    "create_pr_review": ({**_OR, "pr_number": 42, "body": "LGTM", "event": "APPROVE"}, ("pulls/create-review",)),
    "list_pull_request_comments": ({**_OR, "pr_number": 42}, ("pulls/list-review-comments",)),
    "reply_pull_request_comment": ({**_OR, "pr_number": 42, "comment_id": 7, "body": "fixed"},
                                   ("pulls/create-reply-for-review-comment",)),
    "get_pull_request_reviews": ({**_OR, "pr_number": 42}, ("pulls/list-reviews",)),
    "merge_pull_request": ({**_OR, "pr_number": 42, "commit_title": "t", "commit_message": "m",
                            "merge_method": "squash"}, ("pulls/merge",)),
    "search_repositories": ({"query": "tetris language:assembly", "sort": "stars", "order": "desc"},
                            ("search/repos",)),
    "search_code": ({"query": "addClass repo:jquery/jquery", "limit": 5}, ("search/code",)),
    "search_issues_pull_requests": ({"query": "is:pr author:@me", "page": 2}, ("search/issues-and-pull-requests",)),
    "trigger_workflow": ({**_OR, "workflow_id": "ci.yml", "ref": "main", "inputs": {"debug": "true"}},
                         ("actions/create-workflow-dispatch",)),
    "get_workflow_runs": ({**_OR, "workflow_id": "ci.yml", "limit": 5}, ("actions/list-workflow-runs",)),
    "handle_webhook": ({"webhook": {"headers": {"X-GitHub-Event": "issues", "X-GitHub-Delivery": "d1"},
                                    "body_json": {"action": "opened", "issue": {"number": 1, "title": "t"}}}}, ()),
}


def test_the_table_covers_every_action() -> None:
    assert sorted(CALLS) == sorted(a.name for a in ACTIONS)
    assert len(ACTIONS) == 33  # IronClaw's 32 and close_issue


@pytest.mark.parametrize("action", sorted(CALLS))
async def test_each_action_speaks_githubs_api(
    tmp_path: Path, fake_github: FakeGitHub, action: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    args, operations = CALLS[action]
    async with pincer_on(tmp_path, github_config(fake_github), secrets={"github_token": TOKEN}) as pincer:
        result = await pincer.call(CallRequest(tool="github", args={"action": action, **args}))
        records = await pincer.audit.records()
    assert result.ok, result.error
    assert fake_github.errors == []
    assert tuple(r.operation_id for r in fake_github.requests) == operations
    for request in fake_github.requests:
        assert request.headers.get("Authorization") == f"Bearer {TOKEN}"  # injected on the way out
        assert request.headers.get("X-GitHub-Api-Version") == "2022-11-28"
    assert records and records[-1].tool == "github" and records[-1].outcome == "ok"
    assert TOKEN not in json.dumps(result.output)
    assert TOKEN not in json.dumps([dataclasses.asdict(r) for r in records], default=str)
    assert TOKEN not in caplog.text
    assert TOKEN.encode() not in (tmp_path / "pincer.db").read_bytes()


def test_the_checker_refuses_a_wrong_shape() -> None:
    """The contract check itself: a wrong path, method, parameter or body fails it."""
    assert any("request" in p for p in validate_exchange("POST", "/repos/octocat/hello-world/issues", b'{"titel": "x"}', 201, b"{}"))
    assert any("request" in p for p in validate_exchange("GET", "/repos/octocat/hello-world/issues?state=sideways", b"", 200, b"[]"))
    assert any("request" in p for p in validate_exchange("DELETE", "/search/code?q=x", b"", 200, b"{}"))
    assert any("body field 'lables'" in p for p in validate_exchange(
        "POST", "/repos/octocat/hello-world/issues", b'{"title": "x", "lables": ["bug"]}', 201, b"{}"))
    assert any("query parameter 'perpage'" in p for p in validate_exchange(
        "GET", "/repos/octocat/hello-world/issues?perpage=5", b"", 200, b"[]"))
    assert any("response" in p for p in validate_exchange("GET", "/repos/octocat/hello-world", b"", 200, b'{"id": "not a number"}'))
