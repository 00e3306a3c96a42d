"""Issue 20 item 9: a ClawHavoc-style credential stealer was only "medium".

``fixtures/env_harvest/`` holds the held-out ``env-harvest`` skill in five variants: a script
that takes the whole environment (``dict(os.environ)``, ``os.environ.copy()``, ``{**os.environ}``,
``json.dumps(os.environ...)``, ``{...process.env}``), reads ``~/.ssh/id_rsa``, ``~/.aws/credentials``
or Chrome's Login Data (``expanduser``, ``Path.home() / ".ssh"``, ``os.homedir()``) and POSTs
them out (requests, httpx, urllib, fetch), once with the reading and the sending in two scripts.
On main the rules were per line: ``requests-dict``, ``urllib-dumps-chrome`` and
``split-across-files`` were ``medium credential-harvesting``, ``pincer scan`` exited 0, the hub
server published them without a word and a signed copy installed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pincer.core.errors import PincerError
from pincer.hub.scanner import Severity, scan_path
from tests.hub.conftest import Publisher, RunningHub, cli, running_hub

FIXTURES = Path(__file__).parent / "fixtures" / "env_harvest"
VARIANTS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


@pytest.fixture
def hub_server(tmp_path: Path) -> object:
    with running_hub(tmp_path / "hub-home") as hub:
        yield hub


@pytest.fixture
def publisher(hub_server: RunningHub) -> Publisher:
    from pincer.hub.remote import RemoteSource
    from pincer.hub.signing import generate_key

    token = hub_server.token("mallory")
    return Publisher(name="mallory", key=generate_key(), token=token, remote=RemoteSource("team", hub_server.url, token=token))


def test_there_are_five_variants() -> None:
    assert len(VARIANTS) == 5, VARIANTS


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_is_a_high_credential_harvesting_finding(variant: str) -> None:
    """Failed on main for requests-dict, urllib-dumps-chrome and split-across-files (medium)."""
    report = scan_path(FIXTURES / variant)
    high = [f for f in report.findings if f.severity is Severity.HIGH and f.rule == "credential-harvesting"]
    assert high, [(f.file, f.line, f.severity.value, f.message) for f in report.findings]
    assert all(f.file.startswith("scripts/") and f.line >= 1 for f in high)


def test_the_split_variant_names_the_script_that_sends() -> None:
    report = scan_path(FIXTURES / "split-across-files")
    (finding,) = [f for f in report.findings if f.severity is Severity.HIGH]
    assert finding.file == "scripts/collect.py" and "scripts/sync.py" in finding.message, finding


@pytest.mark.parametrize("variant", ["requests-dict", "split-across-files"])
def test_pincer_scan_exits_1(tmp_path: Path, variant: str) -> None:
    """Failed on main: exit 0, verdict medium."""
    done = cli(tmp_path / "home", "scan", str(FIXTURES / variant), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["verdict"] == "high"


BENIGN = {
    "scripts/weather.py": "import os\nimport requests\n\nkey = os.environ.get('WEATHER_API_KEY')\n"
    "print(requests.get('https://api.weather.example/v1', params={'key': key}, timeout=10).json())\n",
    "scripts/env.sh": "#!/bin/sh\nexport LANG=C\ncurl -fsS https://api.example.com/status\n",
    "scripts/keys.py": "from pathlib import Path\n\nprint((Path.home() / '.ssh' / 'id_ed25519.pub').exists())\n",
}


def test_a_script_that_reads_one_variable_and_calls_an_api_is_not_high(tmp_path: Path) -> None:
    skill = tmp_path / "weather"
    for rel, text in {**BENIGN, "SKILL.md": "---\nname: weather\ndescription: Weather\n---\nAsk it.\n"}.items():
        (skill / rel).parent.mkdir(parents=True, exist_ok=True)
        (skill / rel).write_text(text)
    report = scan_path(skill)
    high = [(f.file, f.message) for f in report.findings if f.severity is Severity.HIGH]
    # keys.py names ~/.ssh but sends nothing; only a send in *some* script of the skill makes it
    # high, so the skill as a whole is: a stealer may well split the two. Alone, each is not.
    assert [file for file, _ in high] == ["scripts/keys.py"], high
    for rel in ("scripts/weather.py", "scripts/env.sh"):
        alone = tmp_path / rel.replace("/", "_")
        alone.write_text(BENIGN[rel])
        assert not scan_path(alone).has_high, rel


def test_the_hub_refuses_to_publish_it_and_a_forced_publish_says_so(
    tmp_path: Path, hub_server: RunningHub, publisher: Publisher
) -> None:
    """Failed on main: the hub published the stealer (verdict medium) without a word."""
    import httpx

    folder = tmp_path / "env-harvest"
    shutil.copytree(FIXTURES / "requests-dict", folder)
    with pytest.raises(PincerError) as refused:
        publisher.publish_path(folder)
    assert refused.value.code == "scan_blocked" and "high-severity" in refused.value.message
    assert "--force" in (refused.value.hint or "")
    with httpx.Client(base_url=f"{hub_server.url}/api/v1", timeout=30, trust_env=False) as client:
        assert client.get("/items/skills/env-harvest-requests-dict").status_code == 404  # nothing was stored
    published = publisher.publish_path(folder, force=True)
    assert published["forced"] is True and published["verdict"] == "high"
    with httpx.Client(base_url=f"{hub_server.url}/api/v1", timeout=30, trust_env=False) as client:
        item = client.get("/items/skills/env-harvest-requests-dict").json()
        assert [v["forced"] for v in item["versions"]] == [True]
        detail = client.get("/items/skills/env-harvest-requests-dict/versions/1.0.0").json()
        assert detail["forced"] is True and any(f["severity"] == "high" for f in detail["findings"])


def test_installing_a_signed_copy_is_refused_without_force(tmp_path: Path, hub_server: RunningHub, publisher: Publisher) -> None:
    """Failed on main: a copy signed by a trusted publisher installed (its scan was medium)."""
    publisher.publish_path(FIXTURES / "requests-dict", force=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[[hub.sources]]\nname = "team"\nurl = "{hub_server.url}"\n')
    assert cli(home, "hub", "trust", "add", "mallory", publisher.key.public).returncode == 0
    done = cli(home, "install", "skills/env-harvest-requests-dict", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "scan_blocked" in done.stdout and "credential-harvesting" in done.stdout
    assert not (home / "installed" / "skills" / "env-harvest-requests-dict").exists()
