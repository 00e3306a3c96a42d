"""A person connects their own per-person credential on the dashboard (``/ui/credentials``),
through a real ``pincer serve``: the page lists the secrets of ``[secrets] per_person`` with
whether this person holds a value (never the value); a pasted value is stored as theirs, by the
same act ``pincer secrets set NAME --person WHO`` makes, and removed again.

Attack first: no field or path lets a person set or remove another's value (a ``person`` field
is ignored: the sign-in's person is the one), a name outside ``per_person`` is refused with a
400 naming it, a sign-in with the shared gateway token (nobody's) is refused, a request without
the CSRF token changes nothing, and the value is in no page after the submit, no audit record,
no server output and no file of the home but the encrypted store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from pincer.secrets.store import SecretStore
from tests.acts.support import audit_rows, last_id, rows_after
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import WAIT_S, csrf_of, dashboard_config, pincer_cli, sign_in
from tests.people.test_people_paths import add_person

GINA_VALUE = "gina-own-github-token-4e8b1f0a9c7d2e63"
BO_VALUE = "bo-own-github-token-7a2c5e9f1b3d8046"
MALLORY_VALUE = "gina-would-get-this-3f9a1c7e5b2d8064"


def _config() -> str:
    return dashboard_config() + '\n[secrets]\nper_person = ["github_token", "slack_token"]\n'


def _held(home: Path) -> dict[tuple[str, str], str | None]:
    with SecretStore.open(home) as store:
        return {(i.person, i.name): store.find_for(i.person, i.name) for i in store.person_names()}


def test_a_person_sets_and_removes_only_their_own_value_and_it_is_never_shown(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(_config())
    gina_token = add_person(pincer_home, "gina", "viewer")
    bo_token = add_person(pincer_home, "bo", "viewer")
    assert pincer_cli(pincer_home, "secrets", "set", "github_token", "--person", "bo", stdin=BO_VALUE).returncode == 0
    assert pincer_cli(pincer_home, "secrets", "set", "other_token", stdin="a-shared-value-0000").returncode == 0
    with pincer_serve(pincer_home) as server:
        base = server.info["url"]
        with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as gina, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as bo:  # fmt: skip
            assert sign_in(gina, gina_token).status_code == 303 and sign_in(bo, bo_token).status_code == 303
            page = gina.get("/ui/credentials")
            assert page.status_code == 200 and 'href="/ui/credentials"' in page.text
            assert "github_token" in page.text and "slack_token" in page.text and "other_token" not in page.text
            assert 'type="password" name="value"' in page.text and not re.search(r"<script(?![^>]*\bsrc=)", page.text)
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert BO_VALUE not in page.text and "Remove" not in page.text  # bo's value is not gina's
            csrf = csrf_of(page.text)
            before = last_id(pincer_home)

            # Without the CSRF token: nothing stored.
            assert gina.post("/ui/credentials/github_token", data={"value": GINA_VALUE}).status_code == 403
            # A name that is not per person: 400 naming [secrets] per_person, nothing stored.
            refused = gina.post("/ui/credentials/other_token", data={"csrf_token": csrf, "value": GINA_VALUE})
            assert refused.status_code == 400 and "[secrets] per_person" in refused.text, refused.text
            assert GINA_VALUE not in refused.text
            assert gina.post("/ui/credentials/bad%20name", data={"csrf_token": csrf, "value": GINA_VALUE}).status_code == 400
            assert gina.post("/ui/credentials/github_token", data={"csrf_token": csrf, "value": "  "}).status_code == 400
            assert rows_after(pincer_home, before) == []

            # gina sets hers; a person field naming bo is nobody's business: it is gina's.
            done = gina.post("/ui/credentials/github_token", data={"csrf_token": csrf, "value": GINA_VALUE, "person": "bo"},
                             follow_redirects=True)  # fmt: skip
            assert done.status_code == 200 and "credential set" in done.text, done.text
            assert GINA_VALUE not in done.text and BO_VALUE not in done.text
            assert _held(pincer_home)[("gina", "github_token")] == GINA_VALUE
            assert _held(pincer_home)[("bo", "github_token")] == BO_VALUE

            # bo's page shows his, not gina's; bo cannot remove gina's (the path names no person).
            bo_page = bo.get("/ui/credentials").text
            assert GINA_VALUE not in bo_page and BO_VALUE not in bo_page
            removed = bo.post("/ui/credentials/github_token/remove", data={"csrf_token": csrf_of(bo_page), "person": "gina"})
            assert removed.status_code == 303
            assert ("bo", "github_token") not in _held(pincer_home)
            assert _held(pincer_home)[("gina", "github_token")] == GINA_VALUE
            # Removing a value bo no longer holds: 400, nothing else touched.
            again = bo.post("/ui/credentials/github_token/remove", data={"csrf_token": csrf_of(bo_page)})
            assert again.status_code == 400 and "bo has no value" in again.text, again.text
            assert _held(pincer_home)[("gina", "github_token")] == GINA_VALUE

            # gina's own value is replaced by hers only, and every later page keeps it hidden.
            replaced = gina.post("/ui/credentials/github_token", data={"csrf_token": csrf, "value": MALLORY_VALUE})
            assert replaced.status_code == 303
            later = gina.get("/ui/credentials").text
            assert "Remove" in later and all(v not in later for v in (GINA_VALUE, MALLORY_VALUE, BO_VALUE))
        server_output = "".join(server.stderr_lines.queue)
    acts = rows_after(pincer_home, before)
    assert [(r["kind"], r["tool"], r["outcome"], r["caller"], json.loads(r["args"])) for r in acts] == [
        ("secret", "github_token", "set", "ui:gina", {"person": "gina"}),
        ("secret", "github_token", "removed", "ui:bo", {"person": "bo"}),
        ("secret", "github_token", "replaced", "ui:gina", {"person": "gina"}),
    ]
    every_record = json.dumps(audit_rows(pincer_home))
    for value in (GINA_VALUE, BO_VALUE, MALLORY_VALUE):
        assert value not in every_record and value not in server_output
        assert [p.name for p in pincer_home.rglob("*") if p.is_file() and value.encode() in p.read_bytes()] == []
    # The CLI removes through the same act: one record naming the secret and the person.
    mark = last_id(pincer_home)
    assert pincer_cli(pincer_home, "secrets", "rm", "github_token", "--person", "gina").returncode == 0
    assert _held(pincer_home) == {}
    (cli_act,) = rows_after(pincer_home, mark)
    assert (cli_act["tool"], cli_act["outcome"], json.loads(cli_act["args"])) == ("github_token", "removed", {"person": "gina"})
    assert pincer_cli(pincer_home, "audit", "verify").returncode == 0


def test_a_sign_in_with_the_shared_gateway_token_has_no_credentials_to_connect(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(_config())
    add_person(pincer_home, "gina", "viewer")
    assert pincer_cli(pincer_home, "secrets", "set", "github_token", "--person", "gina", stdin=GINA_VALUE).returncode == 0
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as owner:
        assert sign_in(owner, server.token).status_code == 303
        page = owner.get("/ui/credentials")
        assert page.status_code == 403 and "shared token) is nobody" in page.text, page.text
        assert 'href="/ui/credentials"' not in owner.get("/ui/approvals").text
        before = last_id(pincer_home)
        csrf = csrf_of(owner.get("/ui/approvals").text)
        for path, data in (("/ui/credentials/github_token", {"value": MALLORY_VALUE, "person": "gina"}),
                           ("/ui/credentials/github_token/remove", {"person": "gina"})):  # fmt: skip
            refused = owner.post(path, data={"csrf_token": csrf, **data})
            assert refused.status_code == 403 and "shared token) is nobody" in refused.text, refused.text
    assert rows_after(pincer_home, before) == []
    assert _held(pincer_home) == {("gina", "github_token"): GINA_VALUE}
