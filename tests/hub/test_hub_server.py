"""The hub server on 127.0.0.1:0 (issue 15 item 3): publish, search, items, versions, the
deterministic download, tags, yanks, stars, ownership, rate limits and the upload limit."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import httpx
import pytest

from pincer.hub.publish import build_artifact
from pincer.hub.server.app import HubLimits
from pincer.hub.signing import generate_key, sign_manifest
from tests.hub.conftest import Publisher, RunningHub, running_hub, write_skill


def _client(hub: RunningHub, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=f"{hub.url}/api/v1", headers=headers, timeout=30, trust_env=False)


def test_publish_search_item_versions_download(tmp_path: Path, hub_server: RunningHub, publisher: Publisher) -> None:
    skill = write_skill(tmp_path, "code-review", description="Reviews pull requests for bugs")
    published = publisher.publish_path(skill, keywords=("review", "github"), tags=("development",))
    assert published["key"] == "skills/code-review" and published["latest"] == "1.0.0" and published["verdict"] == "clean"
    with _client(hub_server) as client:
        found = client.get("/search", params={"q": "review"}).json()["items"]
        assert [i["key"] for i in found] == ["skills/code-review"]
        assert found[0]["publisher"] == "alice" and found[0]["public_key"] == publisher.key.public
        assert client.get("/search", params={"q": "review", "kind": "tool"}).json()["items"] == []
        item = client.get("/items/skills/code-review").json()
        assert item["publisher"] == "alice" and item["dist_tags"] == {"latest": "1.0.0"} and item["keywords"] == ["review", "github"]
        assert [v["version"] for v in client.get("/items/skills/code-review/versions").json()["versions"]] == ["1.0.0"]
        detail = client.get("/items/skills/code-review/versions/1.0.0").json()
        assert detail["manifest"]["fingerprint"] == published["fingerprint"] and detail["signature"]
        one = client.get("/items/skills/code-review/versions/1.0.0/download")
        two = client.get("/items/skills/code-review/versions/1.0.0/download")
        assert one.status_code == 200 and one.headers["content-type"] == "application/gzip"
        assert one.content == two.content and hashlib.sha256(one.content).hexdigest() == detail["sha256"]
        assert client.get("/items/skills/code-review").json()["downloads"] == 2
        assert client.get("/items/skills/nope").status_code == 404
        assert client.get("/items/widgets/x").status_code == 422  # not a kind: the document says which are
        assert client.get("/items/skills/code-review/versions/not-a-version").status_code == 404


def test_the_same_content_publishes_to_the_same_bytes(tmp_path: Path, hub_server: RunningHub, publisher: Publisher) -> None:
    """The hub repacks what it is sent: an archive with other times and order stores the same bytes."""
    import gzip
    import io
    import tarfile

    skill = write_skill(tmp_path, "same")
    built = build_artifact(skill)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("SKILL.md")
        data = (skill / "SKILL.md").read_bytes()
        info.size, info.mtime, info.uname = len(data), 1_700_000_000, "someone"
        tar.addfile(info, io.BytesIO(data))
    sloppy = gzip.compress(raw.getvalue(), mtime=12345)
    assert sloppy != built.archive
    first = publisher.publish(built)
    other = build_artifact(write_skill(tmp_path / "v2", "same", version="1.0.0"))
    assert other.archive == built.archive  # packing is deterministic on the client too
    signature = sign_manifest(built.manifest, publisher.key.private)
    with _client(hub_server, publisher.token) as client:
        manifest = {**built.manifest.to_json(), "version": "1.0.1"}
        from pincer.hub.artifact import ArtifactManifest

        again = ArtifactManifest.from_json(manifest)
        response = client.post("/publish", json={"manifest": manifest, "signature": sign_manifest(again, publisher.key.private),
                                                 "public_key": publisher.key.public, "archive": base64.b64encode(sloppy).decode()})  # fmt: skip
        assert response.status_code == 201, response.text
        assert response.json()["sha256"] == first["sha256"]
        assert signature  # the 1.0.0 signature stays what it was


def test_versions_are_immutable_and_names_belong_to_their_publisher(tmp_path: Path, hub_server: RunningHub,
                                                                    publisher: Publisher) -> None:  # fmt: skip
    skill = write_skill(tmp_path, "mine")
    built = build_artifact(skill)
    publisher.publish(built)
    body = {"manifest": built.manifest.to_json(), "signature": sign_manifest(built.manifest, publisher.key.private),
            "public_key": publisher.key.public, "archive": base64.b64encode(built.archive).decode()}  # fmt: skip
    with _client(hub_server, publisher.token) as client:
        again = client.post("/publish", json=body)
        assert again.status_code == 409 and again.json()["error"]["code"] == "version_exists"
    bob = hub_server.token("bob")
    key = generate_key()
    other = build_artifact(write_skill(tmp_path / "b", "mine", version="2.0.0"))
    with _client(hub_server, bob) as client:
        stolen = client.post("/publish", json={"manifest": other.manifest.to_json(), "signature": sign_manifest(other.manifest, key.private),
                                               "public_key": key.public, "archive": base64.b64encode(other.archive).decode()})  # fmt: skip
        assert stolen.status_code == 403 and "belongs to publisher 'alice'" in stolen.json()["error"]["message"]
        assert client.put("/items/skills/mine/tags/latest", json={"version": "1.0.0"}).status_code == 403
        assert client.delete("/items/skills/mine/versions/1.0.0").status_code == 403
    with _client(hub_server) as anonymous:
        refused = anonymous.post("/publish", json=body)
        assert refused.status_code == 401 and "pincer hub token new" in refused.json()["error"]["hint"]
    with _client(hub_server, "phub_not-a-token") as wrong:
        assert wrong.post("/publish", json=body).status_code == 401


def test_bad_signatures_and_archives_that_are_not_their_manifest_are_refused(tmp_path: Path, hub_server: RunningHub,
                                                                             publisher: Publisher) -> None:  # fmt: skip
    built = build_artifact(write_skill(tmp_path, "signed"))
    other = build_artifact(write_skill(tmp_path / "o", "signed", body="Something else entirely.\n"))
    good_sig = sign_manifest(built.manifest, publisher.key.private)
    cases = [
        ({"signature": sign_manifest(built.manifest, generate_key().private)}, 403, "signature_refused"),
        ({"archive": base64.b64encode(other.archive).decode()}, 409, "integrity_mismatch"),
        ({"archive": "not base64!"}, 400, "usage_error"),
        ({"manifest": {**built.manifest.to_json(), "fingerprint": "sha256:" + "0" * 64}}, 422, "manifest_error"),
    ]
    base = {"manifest": built.manifest.to_json(), "signature": good_sig, "public_key": publisher.key.public,
            "archive": base64.b64encode(built.archive).decode()}  # fmt: skip
    with _client(hub_server, publisher.token) as client:
        for change, status, code in cases:
            response = client.post("/publish", json={**base, **change})
            assert (response.status_code, response.json()["error"]["code"]) == (status, code), response.text
        assert client.get("/items/skills/signed").status_code == 404  # nothing half-published


def test_tags_move_yanks_hide_and_stars_count_once(tmp_path: Path, hub_server: RunningHub, publisher: Publisher) -> None:
    for version in ("1.0.0", "1.1.0", "2.0.0-beta.1"):
        publisher.publish_path(write_skill(tmp_path / version, "tagged", version=version, body=f"v{version}\n"))
    with _client(hub_server, publisher.token) as client:
        assert client.get("/items/skills/tagged").json()["dist_tags"] == {"latest": "1.1.0"}  # a prerelease does not move latest
        moved = client.put("/items/skills/tagged/tags/latest", json={"version": "1.0.0"})  # rollback for everyone
        assert moved.json()["dist_tags"]["latest"] == "1.0.0"
        assert client.put("/items/skills/tagged/tags/beta", json={"version": "2.0.0-beta.1"}).status_code == 200
        assert client.put("/items/skills/tagged/tags/1.0.0", json={"version": "1.0.0"}).status_code == 400
        client.put("/items/skills/tagged/tags/latest", json={"version": "1.1.0"})
        yanked = client.delete("/items/skills/tagged/versions/1.1.0").json()
        assert yanked["yanked"] is True and yanked["dist_tags"]["latest"] == "1.0.0"
        assert client.put("/items/skills/tagged/tags/latest", json={"version": "1.1.0"}).status_code == 400
        versions = client.get("/items/skills/tagged/versions").json()["versions"]
        assert {v["version"]: v["yanked"] for v in versions} == {"1.0.0": False, "1.1.0": True, "2.0.0-beta.1": False}
        assert client.get("/items/skills/tagged/versions/1.1.0/download").status_code == 200  # kept for lockfiles
        assert client.post("/items/skills/tagged/star").json()["stars"] == 1
        assert client.post("/items/skills/tagged/star").json()["stars"] == 1
    with _client(hub_server) as anonymous:
        assert anonymous.post("/items/skills/tagged/star").json()["stars"] == 2
        assert anonymous.get("/search", params={"q": "tagged"}).json()["items"][0]["version"] == "1.0.0"


def test_rate_limits_answer_429_with_retry_after_per_address_and_per_token(tmp_path: Path) -> None:
    with running_hub(tmp_path / "hub", limits=HubLimits(address_requests_per_minute=5, token_requests_per_minute=8)) as hub:
        token = hub.token("alice")
        with _client(hub) as client:
            answers = [client.get("/search") for _ in range(6)]
        assert [a.status_code for a in answers] == [200] * 5 + [429]
        assert answers[0].headers["RateLimit-Limit"] == "5" and answers[0].headers["RateLimit-Remaining"] == "4"
        assert int(answers[0].headers["RateLimit-Reset"]) <= 60
        last = answers[-1]
        assert int(last.headers["Retry-After"]) >= 1 and last.json()["error"]["code"] == "budget_exceeded"
        with _client(hub, token) as client:  # a publisher has a budget of its own
            tokened = [client.get("/search") for _ in range(9)]
        assert [a.status_code for a in tokened] == [200] * 8 + [429]
        assert tokened[0].headers["RateLimit-Limit"] == "8"


def test_uploads_over_the_limit_get_413_before_they_are_read(tmp_path: Path) -> None:
    with running_hub(tmp_path / "hub", limits=HubLimits(max_upload_bytes=4096)) as hub:
        token = hub.token("alice")
        with _client(hub, token) as client:
            big = client.post("/publish", content=b"{" + b" " * 10_000 + b"}", headers={"content-type": "application/json"})
            assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"

            def chunks():  # no content-length: the stream is cut off at the limit
                for _ in range(10):
                    yield b" " * 1000

            streamed = client.post("/publish", content=chunks(), headers={"content-type": "application/json"})
            assert streamed.status_code == 413


def test_the_openapi_document_describes_every_route(hub_server: RunningHub) -> None:
    with _client(hub_server) as client:
        document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = set(document["paths"])
    assert {
        "/api/v1/search", "/api/v1/items/{kind}/{name}", "/api/v1/items/{kind}/{name}/versions",
        "/api/v1/items/{kind}/{name}/versions/{version}", "/api/v1/items/{kind}/{name}/versions/{version}/download",
        "/api/v1/publish", "/api/v1/items/{kind}/{name}/tags/{tag}", "/api/v1/items/{kind}/{name}/star",
    } <= paths  # fmt: skip
    assert "delete" in document["paths"]["/api/v1/items/{kind}/{name}/versions/{version}"]
    import schemathesis

    loaded = schemathesis.openapi.from_dict(document)  # validates the document against the OpenAPI schema
    assert len(list(loaded.get_all_operations())) == 9


@pytest.mark.parametrize("host", ["0.0.0.0"])
def test_the_hub_listens_on_loopback_unless_told(tmp_path: Path, host: str) -> None:
    import anyio

    from pincer.core.errors import UsageError
    from pincer.hub.server.serve import serve_hub

    with pytest.raises(UsageError, match="loopback-only"):
        anyio.run(lambda: serve_hub(tmp_path / "hub", host=host, port=0))
