"""Each person's own GitHub token on a team's store (issue 41, item 3): two gateways of two
machines (two homes) on one PostgreSQL, a local server speaking GitHub's API shapes. Each
person connected their token on each machine (secrets stay in each home's secrets.db); every
call carries its person's token, never the other's, on either gateway, and nothing of a token
reaches the shared audit log."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from tests.backends import postgres_server
from tests.builtins import fakegithub
from tests.gateway.scale_out_support import PINCER_BIN, cli, env_for, gateways, rows, upgrade
from tests.people.test_people_scale_out import AUDIT_KEY

WAIT_S = 90.0
TOKENS = {"gina": "ghp_ginaOwnToken0123456789abcdefABCDEF", "bo": "ghp_boOwnToken0123456789abcdefABCDEFGH"}


def _home(root: Path, name: str, url: str, github: str) -> Path:
    home = root / name
    home.mkdir()
    (home / "config.toml").write_text(f"""
[store]
url = "{url}"

[triggers]
enabled = false

[secrets]
per_person = ["github_token"]

[builtins.github]
enabled = true
base_url = "{github}"

[[grants]]
tool = "github"
effects = {{ network = "allow", use_secret = "allow" }}
""")
    key = home / "audit.key"
    key.write_text(AUDIT_KEY + "\n")
    key.chmod(0o600)
    return home


def _connect(home: Path, person: str) -> None:
    done = subprocess.run([str(PINCER_BIN), "auth", "setup", "github", "--person", person, "--no-check"],
                          input=TOKENS[person], capture_output=True, text=True, env=env_for(home), timeout=WAIT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_each_persons_call_carries_their_own_token_on_either_gateway_of_one_store(tmp_path: Path) -> None:
    url = postgres_server().new_database()
    with fakegithub.serve() as fake:
        one, two = _home(tmp_path, "one", url, fake.base_url), _home(tmp_path, "two", url, fake.base_url)
        upgrade(one)
        bearer = {}
        for person in TOKENS:
            assert cli(one, "people", "add", person, "--role", "viewer").returncode == 0
            made = cli(two, "people", "token", person, "--json")  # the other machine's CLI
            assert made.returncode == 0, made.stderr
            bearer[person] = json.loads(made.stdout)["token"]
            for home in (one, two):
                _connect(home, person)
        args = {"args": {"action": "get_repo", "owner": "octocat", "repo": "hello-world"}}
        sent = []
        with gateways([one, two]) as (first, second):
            for gateway, person in ((first, "bo"), (second, "gina"), (first, "gina"), (second, "bo")):
                answer = httpx.post(gateway.url + "/api/v1/tools/github/call", json=args, trust_env=False,
                                    headers={"Authorization": f"Bearer {bearer[person]}"}, timeout=WAIT_S)  # fmt: skip
                assert answer.status_code == 200, answer.text
                assert not any(t in answer.text for t in TOKENS.values())
                sent.append(person)
    assert [r.headers["Authorization"] for r in fake.requests] == [f"Bearer {TOKENS[p]}" for p in sent]
    calls = rows(url, "SELECT person FROM audit WHERE kind = 'call' AND tool = 'github' ORDER BY id")
    assert [p for (p,) in calls] == sent
    assert not any(t in json.dumps(rows(url, "SELECT * FROM audit"), default=str) for t in TOKENS.values())
