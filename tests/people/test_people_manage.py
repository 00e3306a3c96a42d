"""People managed over REST (``/api/v1/people``) and the dashboard (``/ui/people``), through a
real ``pincer serve``: the same acts and records as ``pincer people`` (store/people_acts.py).
Attack first: a viewer, an approver and an operator get 403 on every route, with nothing changed
or recorded; the last admin can be neither removed nor demoted, on REST, the dashboard or the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.acts.support import last_id, rows_after
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import AGENT_TOKEN, WAIT_S, csrf_of, dashboard_config, pincer_cli, sign_in
from tests.people.test_people_paths import add_person


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _people(home: Path) -> dict[str, list[str]]:
    return {p["name"]: p["roles"] for p in json.loads(pincer_cli(home, "people", "list", "--json").stdout)}


def test_only_an_admin_manages_people_on_rest_and_the_dashboard(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config())
    tokens = {name: add_person(pincer_home, name, role) for name, role in
              (("ann", "admin"), ("vera", "viewer"), ("gina", "approver"), ("olga", "operator"))}  # fmt: skip
    before, people = last_id(pincer_home), _people(pincer_home)
    with pincer_serve(pincer_home) as server:
        with httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as api:
            for name in ("vera", "gina", "olga"):
                who = _bearer(tokens[name])
                for method, path, body in (
                    ("GET", "/people", None), ("POST", "/people", {"name": "eve", "roles": ["admin"]}),
                    ("PUT", f"/people/{name}/roles", {"roles": ["admin"]}), ("DELETE", "/people/ann", None),
                ):  # fmt: skip
                    refused = api.request(method, path, json=body, headers=who)
                    assert refused.status_code == 403, (name, method, path, refused.text)
                    assert "may not manage people" in refused.json()["error"]["message"]
            # A configured non-main session is no admin either.
            assert api.get("/people", headers=_bearer(AGENT_TOKEN)).status_code == 403
        for name in ("vera", "gina", "olga"):
            with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as ui:
                assert sign_in(ui, tokens[name]).status_code == 303
                page = ui.get("/ui/people")
                assert page.status_code == 403 and "ann" not in page.text.split("<main", 1)[1], (name, page.text)
                assert 'href="/ui/people"' not in ui.get("/ui/").text  # not in the menu
                csrf = csrf_of(page.text)
                for path, form in (("/ui/people", {"name": "eve", "roles": "admin"}), (f"/ui/people/{name}/roles", {"roles": "admin"}),
                                   ("/ui/people/ann/remove", {})):  # fmt: skip
                    refused = ui.post(path, data={**form, "csrf_token": csrf})
                    assert refused.status_code == 403, (name, path, refused.text)
    assert rows_after(pincer_home, before) == [] and _people(pincer_home) == people


def test_an_admin_adds_sets_and_removes_people_as_the_cli_does_and_the_last_admin_stays(pincer_home: Path) -> None:
    ann = add_person(pincer_home, "ann", "admin")
    before = last_id(pincer_home)
    with pincer_serve(pincer_home) as server:
        with httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as api:
            who = _bearer(ann)
            added = api.post("/people", json={"name": "pat", "roles": ["viewer"], "email": "pat@example.test"}, headers=who)
            assert added.status_code == 201 and added.json()["roles"] == ["viewer"], added.text
            assert api.post("/people", json={"name": "pat", "roles": ["viewer"]}, headers=who).status_code == 400
            bad = api.post("/people", json={"name": "rex", "roles": ["boss"]}, headers=who)
            assert bad.status_code == 400 and "unknown role 'boss'" in bad.text
            assert api.put("/people/pat/roles", json={"roles": ["approver:tool=github_*"]}, headers=who).status_code == 200
            assert [p["name"] for p in api.get("/people", headers=who).json()["people"]] == ["ann", "pat"]
            # The last admin: not removed, not demoted.
            refused = api.delete("/people/ann", headers=who)
            assert refused.status_code == 400 and "last admin" in refused.text, refused.text
            refused = api.put("/people/ann/roles", json={"roles": ["viewer"]}, headers=who)
            assert refused.status_code == 400 and "last admin" in refused.text, refused.text
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as ui:
            assert sign_in(ui, ann).status_code == 303
            page = ui.get("/ui/people")
            assert page.status_code == 200 and "approver:tool=github_*" in page.text
            csrf = csrf_of(page.text)
            assert ui.post("/ui/people", data={"name": "quinn", "roles": "viewer\napprover:tool=a,session=b", "csrf_token": csrf}).status_code == 303
            assert ui.post("/ui/people/quinn/roles", data={"roles": "operator", "csrf_token": csrf}).status_code == 303
            refused = ui.post("/ui/people/ann/remove", data={"csrf_token": csrf})
            assert refused.status_code == 400 and "last admin" in refused.text
            refused = ui.post("/ui/people/ann/roles", data={"roles": "viewer", "csrf_token": csrf})
            assert refused.status_code == 400 and "last admin" in refused.text
            assert ui.post("/ui/people/pat/remove", data={"confirm": "1"}).status_code == 403  # no CSRF token
            assert ui.post("/ui/people/pat/remove", data={"csrf_token": csrf}).status_code == 303
    refused = pincer_cli(pincer_home, "people", "remove", "ann")
    assert refused.returncode != 0 and "last admin" in refused.stderr and "hint" in refused.stderr
    refused = pincer_cli(pincer_home, "people", "roles", "ann", "--role", "operator")
    assert refused.returncode != 0 and "last admin" in refused.stderr
    assert _people(pincer_home) == {"ann": ["admin"], "quinn": ["operator"]}
    acts = rows_after(pincer_home, before)
    assert [(r["outcome"], r["tool"], r["caller"], r["person"]) for r in acts] == [
        ("added", "pat", "rest:ann", "ann"), ("roles-set", "pat", "rest:ann", "ann"),
        ("added", "quinn", "ui:ann", "ann"), ("roles-set", "quinn", "ui:ann", "ann"), ("removed", "pat", "ui:ann", "ann"),
    ]  # fmt: skip
    assert {r["kind"] for r in acts} == {"person"}
    # With a second admin, the first may go (the CLI, the owner, removes her).
    assert pincer_cli(pincer_home, "people", "roles", "quinn", "--admin").returncode == 0
    assert pincer_cli(pincer_home, "people", "remove", "ann").returncode == 0
    assert pincer_cli(pincer_home, "audit", "verify").returncode == 0


def test_an_admin_removes_a_person_over_rest_and_their_token_stops(pincer_home: Path) -> None:
    ann = add_person(pincer_home, "ann", "admin")
    pat = add_person(pincer_home, "pat", "viewer")
    # pat's own credential goes with pat on this path too (a person re-added under the name
    # must not be handed it): the CLI's rule, kept over REST.
    config = pincer_home / "config.toml"
    config.write_text((config.read_text() if config.exists() else "") + "\n[secrets]\nper_person = [\"api_key\"]\n")
    assert pincer_cli(pincer_home, "secrets", "set", "api_key", "--person", "pat", stdin="pats-own-key\n").returncode == 0
    before = last_id(pincer_home)
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as api:
        assert api.get("/approvals", headers=_bearer(pat)).status_code == 200
        removed = api.delete("/people/pat", headers=_bearer(ann))
        assert removed.status_code == 200 and removed.json() == {"removed": "pat", "tokens": 1, "credentials": 1}, removed.text
        assert api.get("/approvals", headers=_bearer(pat)).status_code == 401
        missing = api.delete("/people/pat", headers=_bearer(ann))
        assert missing.status_code in (400, 404) and "no person named 'pat'" in missing.text
    (act,) = rows_after(pincer_home, before)
    assert (act["kind"], act["outcome"], act["tool"], act["caller"], act["person"]) == ("person", "removed", "pat", "rest:ann", "ann")
    assert _people(pincer_home) == {"ann": ["admin"]}
