"""People on a team's store: two gateways of two machines (two homes) on one PostgreSQL. A
person made by the CLI of one machine signs in on the other; a token revoked on one is refused
by both at once; an answer given on one is recorded as the person's in the one chain."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import httpx

from tests.backends import postgres_server
from tests.gateway.scale_out_support import cli, gateways, rows, upgrade

WAIT_S = 90.0
AUDIT_KEY = base64.b64encode(hashlib.sha256(b"the team's audit key").digest()).decode()


def _home(root: Path, name: str, url: str) -> Path:
    home = root / name
    home.mkdir()
    (home / "config.toml").write_text(f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n')
    key = home / "audit.key"  # a team's gateways share the audit key (docs/scale-out.md)
    key.write_text(AUDIT_KEY + "\n")
    key.chmod(0o600)
    return home


def test_a_person_and_their_token_hold_on_every_gateway_of_the_store(tmp_path: Path) -> None:
    url = postgres_server().new_database()
    one, two = _home(tmp_path, "one", url), _home(tmp_path, "two", url)
    upgrade(one)
    assert cli(one, "people", "add", "gina", "--role", "approver").returncode == 0
    made = cli(one, "people", "token", "gina", "--json")
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)
    headers = {"Authorization": f"Bearer {token['token']}"}
    with gateways([one, two]) as (first, second):
        for gateway in (first, second):
            assert httpx.get(gateway.url + "/api/v1/approvals", headers=headers, trust_env=False, timeout=WAIT_S).status_code == 200
        assert cli(two, "people", "revoke", token["id"]).returncode == 0  # the other machine's CLI
        for gateway in (first, second):
            assert httpx.get(gateway.url + "/api/v1/approvals", headers=headers, trust_env=False, timeout=WAIT_S).status_code == 401
    acts = rows(url, "SELECT caller, outcome, tool FROM audit WHERE kind = 'person' ORDER BY id")
    assert [(outcome, tool) for _, outcome, tool in acts] == [("added", "gina"), ("token-created", "gina"), ("token-revoked", "gina")]
    assert token["token"] not in json.dumps(rows(url, "SELECT * FROM audit") + rows(url, "SELECT * FROM person_tokens"))
    assert cli(one, "audit", "verify").returncode == 0
