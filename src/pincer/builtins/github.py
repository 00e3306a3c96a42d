"""The ``github`` built-in: IronClaw's 32 actions (repositories, issues, pull requests and reviews,
branches, files, releases, workflow runs, search, webhook normalisation) plus ``close_issue``, with
IronClaw's input checks: no ``..``/empty path segments, git refs refused with ``..``, ``:``, ``?``,
``[``, ``\\``, ``^``, ``~``, ``@{``, ``//``, a leading or trailing ``/`` or ``.``, ``.lock``.

The token (secret ``github_token``) is injected by the egress client as ``Authorization:
Bearer``; this module never reads it. ``[builtins.github] base_url`` points it at GitHub
Enterprise (``https://ghe.example/api/v3``) or a local server.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from pincer.builtins.actions import Action
from pincer.builtins.api import segment
from pincer.builtins.api_tool import ApiTool
from pincer.builtins.github_api import GITHUB_HEADERS, GitHubApi
from pincer.builtins.tool import bundled_manifest
from pincer.builtins.trim import trim
from pincer.core.capabilities import Capabilities
from pincer.core.errors import UsageError

__all__ = ["ACTIONS", "FIELDS", "github_tool", "check_args", "DEFAULT_BASE_URL"]

DEFAULT_HOST = "api.github.com"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
DEFAULT_LIMIT = 30  # IronClaw's config.default_limit / max_limit
MAX_LIMIT = 100
MAX_TEXT_LENGTH = 65_536

_S = {"type": "string"}
_N = {"type": "integer", "minimum": 1}
_B = {"type": "boolean"}
_IDENTITY = {
    "type": "object",
    "properties": {"name": _S, "email": _S},
    "required": ["name", "email"],
    "additionalProperties": False,
}

FIELDS: dict[str, dict[str, Any]] = {
    "owner": {**_S, "description": "Repository owner (user or organisation)"},
    "repo": {**_S, "description": "Repository name"},
    "name": {**_S, "description": "Name of the new repository, release or fork"},
    "description": _S,
    "private": _B,
    "auto_init": _B,
    "gitignore_template": _S,
    "license_template": _S,
    "org": {**_S, "description": "Organisation to create the repository in (default: the token's user)"},
    "state": {"type": "string", "enum": ["open", "closed", "all"]},
    "state_reason": {"type": "string", "enum": ["completed", "not_planned"]},
    "page": {**_N, "description": "Page number (1-based); answers give next_page"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Items per page (default 30)"},
    "title": _S,
    "body": _S,
    "labels": {"type": "array", "items": _S},
    "issue_number": _N,
    "pr_number": _N,
    "comment_id": _N,
    "head": _S,
    "base": _S,
    "draft": _B,
    "event": {"type": "string", "enum": ["APPROVE", "REQUEST_CHANGES", "COMMENT"]},
    "ref": {**_S, "description": "Branch, tag or commit SHA"},
    "commit_title": _S,
    "commit_message": _S,
    "merge_method": {"type": "string", "enum": ["merge", "squash", "rebase"]},
    "username": _S,
    "query": {**_S, "description": "GitHub search syntax, e.g. 'repo:owner/name is:open label:bug'"},
    "sort": _S,
    "order": {"type": "string", "enum": ["asc", "desc"]},
    "protected": _B,
    "branch": _S,
    "from_ref": {**_S, "description": "Branch or tag to start from (heads/NAME, tags/NAME or a branch name)"},
    "path": {**_S, "description": "File path in the repository, e.g. docs/README.md"},
    "message": {**_S, "description": "Commit message"},
    "content": {**_S, "description": "New file content (plain text; pincer encodes it)"},
    "sha": {**_S, "description": "Blob SHA of the file being replaced or deleted"},
    "committer": _IDENTITY,
    "author": _IDENTITY,
    "tag_name": _S,
    "target_commitish": _S,
    "prerelease": _B,
    "generate_release_notes": _B,
    "workflow_id": {**_S, "description": "Workflow file name (ci.yml) or numeric id"},
    "inputs": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
    "organization": _S,
    "default_branch_only": _B,
    "webhook": {
        "type": "object",
        "properties": {"headers": {"type": "object", "additionalProperties": _S}, "body_json": {}},
        "additionalProperties": False,
    },
}

_OR = ("owner", "repo")
_PAGE = ("page", "limit")
_SEARCH = ("page", "limit", "sort", "order")
_IDENTITIES = ("committer", "author")


# ------------------------------------------------------------------------------------------ checks


def check_args(action: str, args: Mapping[str, Any]) -> None:
    """IronClaw's input checks for one action's fields; UsageError naming the field."""
    for name in ("owner", "repo", "username", "org", "organization"):
        if name in args:
            segment(args[name], name)
    if "workflow_id" in args:
        wid = str(args["workflow_id"])
        if "/" in wid or ".." in wid or ":" in wid or not wid:
            raise UsageError(
                f"workflow_id {wid[:80]!r} must be a workflow file name or numeric id",
                hint='pass e.g. "ci.yml" or 12345',
            )
    if "path" in args:
        check_repo_path(str(args["path"]))
    for name in ("ref", "branch", "from_ref", "base", "head", "target_commitish"):
        if name in args and not (name == "head" and ":" in str(args[name]) and action == "create_pull_request"):
            check_git_ref(str(args[name]), name)
    if "tag_name" in args:
        check_git_ref(str(args["tag_name"]), "tag_name")
    for name, value in args.items():
        if isinstance(value, str) and len(value) > MAX_TEXT_LENGTH:
            raise UsageError(f"{name} is longer than {MAX_TEXT_LENGTH} characters", hint=f"shorten {name}")


def check_repo_path(path: str) -> None:
    if len(path) > MAX_TEXT_LENGTH:
        raise UsageError(f"path is longer than {MAX_TEXT_LENGTH} characters", hint="shorten path")
    for part in path.split("/"):
        if part == "..":
            raise UsageError(
                "path: '..' segments are refused (rule: no path traversal)", hint="pass a path inside the repository"
            )
        if not part:
            raise UsageError(
                "path: empty segments are refused ('//', a leading or trailing '/')", hint="write docs/file.md"
            )


_REF_REFUSED = ("..", ":", "?", "[", "\\", "^", "~", "@{", "//")


def check_git_ref(ref: str, field: str) -> None:
    bad = next((s for s in _REF_REFUSED if s in ref), None)
    if (
        not ref
        or bad is not None
        or ref.startswith(("/", "."))
        or ref.endswith(("/", ".", ".lock"))
        or any(ord(c) < 32 or c == " " or ord(c) == 127 for c in ref)
    ):
        why = f"contains {bad!r}" if bad else "is not a valid ref name"
        raise UsageError(
            f"{field} {ref[:80]!r} {why} (rule: git ref names)",
            hint=f"pass a branch, tag or commit SHA as {field}, e.g. main or v1.2.0",
        )


def _repo(a: Mapping[str, Any]) -> str:
    return f"/repos/{segment(a['owner'], 'owner')}/{segment(a['repo'], 'repo')}"


def _encode_path(path: str) -> str:
    check_repo_path(path)
    return "/".join(segment_path(p) for p in path.split("/"))


def segment_path(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="-_.")


def _paging(a: Mapping[str, Any]) -> dict[str, Any]:
    return {"per_page": min(int(a.get("limit") or DEFAULT_LIMIT), MAX_LIMIT), "page": a.get("page")}


def _pick(a: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {n: a[n] for n in names if a.get(n) is not None}


def _listing(items: Any, next_page: str | None, key: str = "items") -> dict[str, Any]:
    data = trim(items)
    return {
        key: data,
        "count": len(data) if isinstance(data, list) else None,
        "next_page": int(next_page) if next_page else None,
    }


# ----------------------------------------------------------------------------------------- handlers


async def _get(api: GitHubApi, path: str, query: Mapping[str, Any] | None = None) -> Any:
    data, _ = await api.call("GET", path, query=query)
    return trim(data)


async def _list(api: GitHubApi, path: str, a: Mapping[str, Any], **query: Any) -> dict[str, Any]:
    data, next_page = await api.call("GET", path, query={**query, **_paging(a)})
    return _listing(data, next_page)


async def _send(api: GitHubApi, method: str, path: str, body: Any, ok: tuple[int, ...] = (200, 201, 202)) -> Any:
    data, _ = await api.call(method, path, json=body, ok=ok)
    return trim(data) if data is not None else {"ok": True}


async def get_repo(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _get(api, _repo(a))


async def create_repo(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    body = _pick(a, "name", "description", "private", "auto_init", "gitignore_template", "license_template")
    path = f"/orgs/{segment(a['org'], 'org')}/repos" if a.get("org") else "/user/repos"
    return await _send(api, "POST", path, body)


async def list_issues(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/issues", a, state=a.get("state") or "open")


async def create_issue(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _send(api, "POST", f"{_repo(a)}/issues", _pick(a, "title", "body", "labels"))


async def get_issue(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _get(api, f"{_repo(a)}/issues/{int(a['issue_number'])}")


async def close_issue(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    body = {"state": "closed", **_pick(a, "state_reason")}
    return await _send(api, "PATCH", f"{_repo(a)}/issues/{int(a['issue_number'])}", body)


async def list_issue_comments(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/issues/{int(a['issue_number'])}/comments", a)


async def create_issue_comment(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _send(api, "POST", f"{_repo(a)}/issues/{int(a['issue_number'])}/comments", _pick(a, "body"))


async def list_pull_requests(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/pulls", a, state=a.get("state") or "open")


async def create_pull_request(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _send(api, "POST", f"{_repo(a)}/pulls", _pick(a, "title", "head", "base", "body", "draft"))


async def get_pull_request(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _get(api, f"{_repo(a)}/pulls/{int(a['pr_number'])}")


async def get_pull_request_files(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/pulls/{int(a['pr_number'])}/files", a)


async def create_pr_review(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _send(api, "POST", f"{_repo(a)}/pulls/{int(a['pr_number'])}/reviews", _pick(a, "body", "event"))


async def list_pull_request_comments(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/pulls/{int(a['pr_number'])}/comments", a)


async def reply_pull_request_comment(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    path = f"{_repo(a)}/pulls/{int(a['pr_number'])}/comments/{int(a['comment_id'])}/replies"
    return await _send(api, "POST", path, _pick(a, "body"))


async def get_pull_request_reviews(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/pulls/{int(a['pr_number'])}/reviews", a)


async def get_combined_status(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _get(api, f"{_repo(a)}/commits/{segment_path(str(a['ref']))}/status")


async def merge_pull_request(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    body = _pick(a, "commit_title", "commit_message", "merge_method")
    return await _send(api, "PUT", f"{_repo(a)}/pulls/{int(a['pr_number'])}/merge", body)


async def list_repos(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"/users/{segment(a['username'], 'username')}/repos", a)


async def _search(api: GitHubApi, kind: str, a: Mapping[str, Any]) -> Any:
    query = {"q": a["query"], **_paging(a), **_pick(a, "sort", "order")}
    data, next_page = await api.call("GET", f"/search/{kind}", query=query)
    out = _listing((data or {}).get("items", []), next_page)
    out["total_count"] = (data or {}).get("total_count")
    out["incomplete_results"] = (data or {}).get("incomplete_results")
    return out


async def search_repositories(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _search(api, "repositories", a)


async def search_code(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _search(api, "code", a)


async def search_issues_pull_requests(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _search(api, "issues", a)


async def list_branches(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/branches", a, **_pick(a, "protected"))


def _ref_lookup(ref: str) -> str:
    """IronClaw's normalize_ref_lookup: refs/heads/x -> heads/x, a bare name -> heads/name."""
    check_git_ref(ref, "from_ref")
    for prefix, short in (("refs/heads/", "heads/"), ("refs/tags/", "tags/")):
        if ref.startswith(prefix):
            return short + ref[len(prefix) :]
    if ref.startswith("refs/"):
        raise UsageError("from_ref: only refs/heads/* and refs/tags/* are supported", hint="pass a branch or tag name")
    return ref if ref.startswith(("heads/", "tags/")) else f"heads/{ref}"


def _branch_ref(branch: str) -> str:
    check_git_ref(branch, "branch")
    if branch.startswith("refs/heads/"):
        return branch
    if branch.startswith(("refs/", "tags/")):
        raise UsageError("branch: only a branch name (or refs/heads/NAME) is allowed", hint="pass e.g. feature-x")
    return "refs/heads/" + branch.removeprefix("heads/")


async def create_branch(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    lookup = "/".join(segment_path(p) for p in _ref_lookup(str(a["from_ref"])).split("/"))
    found, _ = await api.call("GET", f"{_repo(a)}/git/ref/{lookup}")
    sha = ((found or {}).get("object") or {}).get("sha")
    if not isinstance(sha, str):
        raise UsageError(
            f"from_ref {a['from_ref']!r} did not resolve to a commit", hint="pass an existing branch or tag"
        )
    return await _send(api, "POST", f"{_repo(a)}/git/refs", {"ref": _branch_ref(str(a["branch"])), "sha": sha})


async def get_file_content(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    data, _ = await api.call("GET", f"{_repo(a)}/contents/{_encode_path(str(a['path']))}", query=_pick(a, "ref"))
    if isinstance(data, Mapping) and data.get("encoding") == "base64" and isinstance(data.get("content"), str):
        out = {k: data.get(k) for k in ("type", "name", "path", "sha", "size", "html_url")}
        try:
            raw = base64.b64decode(data["content"], validate=False)
            out["content"] = raw.decode("utf-8")
            out["encoding"] = "utf-8"
        except (binascii.Error, UnicodeDecodeError):
            out["content"] = data["content"]
            out["encoding"] = "base64"
        return trim(out)
    return _listing(data, None, key="entries") if isinstance(data, list) else trim(data)


async def create_or_update_file(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    body = _pick(a, "message", "sha", "branch", *_IDENTITIES)
    body["content"] = base64.b64encode(str(a["content"]).encode("utf-8")).decode("ascii")
    data, _ = await api.call("PUT", f"{_repo(a)}/contents/{_encode_path(str(a['path']))}", json=body)
    return trim(data)


async def delete_file(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    body = _pick(a, "message", "sha", "branch", *_IDENTITIES)
    data, _ = await api.call("DELETE", f"{_repo(a)}/contents/{_encode_path(str(a['path']))}", json=body)
    return trim(data)


async def list_releases(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _list(api, f"{_repo(a)}/releases", a)


async def create_release(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    fields = ("tag_name", "target_commitish", "name", "body", "draft", "prerelease", "generate_release_notes")
    return await _send(api, "POST", f"{_repo(a)}/releases", _pick(a, *fields))


async def trigger_workflow(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    path = f"{_repo(a)}/actions/workflows/{segment_path(str(a['workflow_id']))}/dispatches"
    await api.call("POST", path, json=_pick(a, "ref", "inputs"), ok=(200, 204))
    return {"ok": True, "workflow_id": a["workflow_id"], "ref": a["ref"]}


async def get_workflow_runs(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    path = f"{_repo(a)}/actions/runs"
    if a.get("workflow_id"):
        path = f"{_repo(a)}/actions/workflows/{segment_path(str(a['workflow_id']))}/runs"
    data, next_page = await api.call("GET", path, query=_paging(a))
    runs = [
        {
            k: r.get(k)
            for k in (
                "id",
                "name",
                "status",
                "conclusion",
                "head_branch",
                "head_sha",
                "event",
                "run_number",
                "created_at",
                "updated_at",
                "html_url",
            )
        }
        for r in (data or {}).get("workflow_runs", [])
        if isinstance(r, Mapping)
    ]
    out = _listing(runs, next_page)
    out["total_count"] = (data or {}).get("total_count")
    return out


async def fork_repo(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    return await _send(api, "POST", f"{_repo(a)}/forks", _pick(a, "organization", "name", "default_branch_only"))


async def handle_webhook(api: GitHubApi, a: Mapping[str, Any]) -> Any:
    """A delivery (headers + parsed body) as one system event; no request is made. The signature
    is checked where deliveries arrive ([[hooks]] auth = "github"), not here."""
    hook = a.get("webhook") or {}
    headers = {str(k).lower(): str(v) for k, v in (hook.get("headers") or {}).items()}
    body = hook.get("body_json")
    event = headers.get("x-github-event", "unknown")
    payload: dict[str, Any] = {"delivery": headers.get("x-github-delivery")}
    if isinstance(body, Mapping):
        payload["action"] = body.get("action")
        for key in ("repository", "sender", "issue", "pull_request", "release", "workflow_run", "comment"):
            if isinstance(body.get(key), Mapping):
                item = body[key]
                payload[key] = {
                    k: trim(item.get(k))
                    for k in ("full_name", "login", "number", "title", "state", "html_url", "body")
                    if k in item
                }
    return {"accepted": True, "emit_events": [{"source": "github", "event_type": event, "payload": payload}]}


# ----------------------------------------------------------------------------------------- the table


def _a(
    name: str,
    toolset: str,
    handler: Any,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    *,
    writes: bool = False,
    description: str,
) -> Action:
    return Action(
        name=name,
        toolset=toolset,
        handler=handler,
        required=required,
        optional=optional,
        writes=writes,
        description=description,
    )


ACTIONS: tuple[Action, ...] = (
    _a("get_repo", "repos", get_repo, _OR, description="a repository's details"),
    _a(
        "create_repo",
        "repos",
        create_repo,
        ("name",),
        ("description", "private", "auto_init", "gitignore_template", "license_template", "org"),
        writes=True,
        description="create a repository (for the token's user or an org)",
    ),
    _a("list_repos", "repos", list_repos, ("username",), _PAGE, description="a user's repositories"),
    _a(
        "fork_repo",
        "repos",
        fork_repo,
        _OR,
        ("organization", "name", "default_branch_only"),
        writes=True,
        description="fork a repository",
    ),
    _a("list_branches", "repos", list_branches, _OR, ("protected", *_PAGE), description="branches"),
    _a(
        "create_branch",
        "repos",
        create_branch,
        (*_OR, "branch", "from_ref"),
        writes=True,
        description="create a branch from another branch or tag",
    ),
    _a(
        "get_file_content",
        "repos",
        get_file_content,
        (*_OR, "path"),
        ("ref",),
        description="a file's text (or a directory listing)",
    ),
    _a(
        "create_or_update_file",
        "repos",
        create_or_update_file,
        (*_OR, "path", "message", "content"),
        ("sha", "branch", *_IDENTITIES),
        writes=True,
        description="commit a file (updates need sha)",
    ),
    _a(
        "delete_file",
        "repos",
        delete_file,
        (*_OR, "path", "message", "sha"),
        ("branch", *_IDENTITIES),
        writes=True,
        description="delete a file in a commit",
    ),
    _a("get_combined_status", "repos", get_combined_status, (*_OR, "ref"), description="CI status of a ref"),
    _a("list_releases", "repos", list_releases, _OR, _PAGE, description="releases"),
    _a(
        "create_release",
        "repos",
        create_release,
        (*_OR, "tag_name"),
        ("target_commitish", "name", "body", "draft", "prerelease", "generate_release_notes"),
        writes=True,
        description="create a release",
    ),
    _a("list_issues", "issues", list_issues, _OR, ("state", *_PAGE), description="issues (and PRs) of a repository"),
    _a("get_issue", "issues", get_issue, (*_OR, "issue_number"), description="one issue"),
    _a(
        "create_issue",
        "issues",
        create_issue,
        (*_OR, "title"),
        ("body", "labels"),
        writes=True,
        description="open an issue",
    ),
    _a(
        "close_issue",
        "issues",
        close_issue,
        (*_OR, "issue_number"),
        ("state_reason",),
        writes=True,
        description="close an issue",
    ),
    _a(
        "list_issue_comments",
        "issues",
        list_issue_comments,
        (*_OR, "issue_number"),
        _PAGE,
        description="comments of an issue or PR",
    ),
    _a(
        "create_issue_comment",
        "issues",
        create_issue_comment,
        (*_OR, "issue_number", "body"),
        writes=True,
        description="comment on an issue or PR",
    ),
    _a(
        "list_pull_requests",
        "pull_requests",
        list_pull_requests,
        _OR,
        ("state", *_PAGE),
        description="pull requests of a repository",
    ),
    _a("get_pull_request", "pull_requests", get_pull_request, (*_OR, "pr_number"), description="one pull request"),
    _a(
        "create_pull_request",
        "pull_requests",
        create_pull_request,
        (*_OR, "title", "head", "base"),
        ("body", "draft"),
        writes=True,
        description="open a pull request",
    ),
    _a(
        "get_pull_request_files",
        "pull_requests",
        get_pull_request_files,
        (*_OR, "pr_number"),
        _PAGE,
        description="files a pull request changes",
    ),
    _a(
        "create_pr_review",
        "pull_requests",
        create_pr_review,
        (*_OR, "pr_number", "body", "event"),
        writes=True,
        description="review a pull request (APPROVE, REQUEST_CHANGES or COMMENT)",
    ),
    _a(
        "list_pull_request_comments",
        "pull_requests",
        list_pull_request_comments,
        (*_OR, "pr_number"),
        _PAGE,
        description="review comments of a pull request",
    ),
    _a(
        "reply_pull_request_comment",
        "pull_requests",
        reply_pull_request_comment,
        (*_OR, "pr_number", "comment_id", "body"),
        writes=True,
        description="reply to a review comment",
    ),
    _a(
        "get_pull_request_reviews",
        "pull_requests",
        get_pull_request_reviews,
        (*_OR, "pr_number"),
        _PAGE,
        description="reviews of a pull request",
    ),
    _a(
        "merge_pull_request",
        "pull_requests",
        merge_pull_request,
        (*_OR, "pr_number"),
        ("commit_title", "commit_message", "merge_method"),
        writes=True,
        description="merge a pull request",
    ),
    _a("search_repositories", "search", search_repositories, ("query",), _SEARCH, description="search repositories"),
    _a("search_code", "search", search_code, ("query",), _SEARCH, description="search code"),
    _a(
        "search_issues_pull_requests",
        "search",
        search_issues_pull_requests,
        ("query",),
        _SEARCH,
        description="search issues AND pull requests (e.g. 'is:pr author:@me')",
    ),
    _a(
        "trigger_workflow",
        "actions",
        trigger_workflow,
        (*_OR, "workflow_id", "ref"),
        ("inputs",),
        writes=True,
        description="dispatch a workflow run",
    ),
    _a("get_workflow_runs", "actions", get_workflow_runs, _OR, ("workflow_id", *_PAGE), description="workflow runs"),
    Action(
        name="handle_webhook",
        toolset="webhooks",
        handler=handle_webhook,
        required=("webhook",),
        effects=frozenset(),
        description="normalise a GitHub webhook delivery into an event (no request)",
    ),
)

DESCRIPTION = (
    "GitHub: repositories, issues, pull requests and reviews, branches, files, releases, workflow runs. "
    "Search has exactly three actions: search_repositories, search_code and search_issues_pull_requests "
    "(the last covers both issues and PRs; use 'is:pr author:@me' for your own). list_issues and "
    "list_pull_requests need owner + repo. Lists take page and limit and answer next_page. "
    "The token is added by pincer; the tool never sees it."
)


def manifest() -> Capabilities:
    return bundled_manifest("github")


GITHUB = ApiTool(
    name="github", description=DESCRIPTION, actions=ACTIONS, fields=FIELDS, hosts=(DEFAULT_HOST,),
    base_url_key="[builtins.github] base_url", headers=GITHUB_HEADERS, client=GitHubApi, check=check_args,
)  # fmt: skip
github_tool = GITHUB.tool
