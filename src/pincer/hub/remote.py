"""A pincer hub server as a catalog source (``[[hub.sources]] url = "https://hub.example.com"``).

The server's search picks the rows; this side checks each (a name, a version) and scores it with
the same field weights as the local index, so no hub ranks its rows above another source's by
the score it claims. Resolving reads the item (its tags and versions) and
the version (manifest, signature, public key, archive sha256), so an install can check
everything before it unpacks. A yanked version is hidden from resolution by version range or
tag; only a lockfile that pins it exactly may install it. ``token`` (from the secret store entry
``token_secret``) is sent only where it is needed: publishing, tags, yanks.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from pincer.core.errors import ArtifactNotFound, HubUnavailable, ManifestError, UsageError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, ArtifactManifest, check_name, is_version, parse_version
from pincer.hub.download import CONNECT_TIMEOUT_S, download, http_client
from pincer.hub.index import field_score, query_words
from pincer.hub.sources import DOWNLOAD_TIMEOUT_S, CatalogEntry, Progress, Resolved

__all__ = ["RemoteSource", "API_TIMEOUT_S", "pick_version"]

API_TIMEOUT_S = 30.0


def pick_version(versions: list[dict[str, Any]], tags: dict[str, str], wanted: str | None, *, allow_yanked: bool = False) -> str:
    """The version ``wanted`` names: an exact version (yanked only with ``allow_yanked``), a tag,
    or None for ``latest`` (the tag, else the highest release that is not yanked)."""
    live = [v["version"] for v in versions if not v.get("yanked")]
    every = {v["version"]: v for v in versions}
    if wanted is not None and is_version(wanted):
        found = every.get(wanted)
        if found is None:
            raise ArtifactNotFound(f"there is no version {wanted}", hint=f"versions: {', '.join(live) or 'none'}")
        if found.get("yanked") and not allow_yanked:
            raise ArtifactNotFound(
                f"version {wanted} was yanked: it is kept for lockfiles that pin it, not for new installs",
                hint=f"install another version ({', '.join(live[-3:]) or 'none left'})",
            )
        return wanted
    tag = wanted or "latest"
    if tag in tags and tags[tag] in every and not every[tags[tag]].get("yanked"):
        return tags[tag]
    if wanted is not None and tag != "latest":
        raise ArtifactNotFound(f"there is no tag {tag!r}", hint=f"tags: {', '.join(sorted(tags)) or 'none'}")
    releases = sorted((parse_version(v) for v in live), reverse=True)
    stable = [v for v in releases if not v.is_prerelease]
    if not (stable or releases):
        raise ArtifactNotFound("it has no version that is not yanked", hint="ask its publisher")
    return str((stable or releases)[0])


class RemoteSource:
    def __init__(self, name: str, url: str, *, token: str | None = None, timeout_s: float = API_TIMEOUT_S) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    # -- HTTP ------------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                 auth: bool = False) -> dict[str, Any]:  # fmt: skip
        import httpx2

        headers = {}
        if auth:
            if not self.token:
                raise UsageError(
                    f"hub source {self.name!r} has no publisher token",
                    hint="store one with `pincer secrets set NAME` and name it in [[hub.sources]] token_secret",
                )
            headers["Authorization"] = f"Bearer {self.token}"
        url = f"{self.url}/api/v1{path}"
        try:
            with http_client(timeout_s=self.timeout_s, headers=headers) as client:
                response = client.request(method, url, params=params, json=json)
        except httpx2.HTTPError as exc:
            raise HubUnavailable(
                f"hub {self.name!r} ({self.url}) cannot be reached: {type(exc).__name__}",
                hint=f"check [[hub.sources]] url; connections time out after {CONNECT_TIMEOUT_S:g} s",
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            raw_error = body.get("error") if isinstance(body, dict) else None
            error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
            message = str(error.get("message") or f"HTTP {response.status_code}")
            hint = error.get("hint") if isinstance(error.get("hint"), str) else None
            if response.status_code == 404:
                raise ArtifactNotFound(f"hub {self.name!r}: {message}", hint=hint)
            from pincer.core.errors import error_class

            cls = error_class(error.get("code")) or HubUnavailable
            if response.status_code == 429:
                retry = response.headers.get("retry-after", "?")
                raise HubUnavailable(f"hub {self.name!r} is rate limiting (429): {message}", hint=f"try again in {retry} s")
            try:
                raise cls(f"hub {self.name!r}: {message}", hint=hint)
            except TypeError:  # an error class that takes other arguments
                raise HubUnavailable(f"hub {self.name!r}: {message}", hint=hint) from None
        if not isinstance(body, dict):
            raise HubUnavailable(f"hub {self.name!r} answered {path} with something that is not a JSON object")
        return body

    def _item_path(self, key: ArtifactKey) -> str:
        return f"/items/{key.kind.prefix}/{quote(key.name, safe='')}"

    # -- Source ----------------------------------------------------------------------------

    def entries(self) -> list[CatalogEntry]:
        return []

    def search(self, query: str, *, kind: ArtifactKind | None, limit: int) -> list[CatalogEntry] | None:
        params: dict[str, Any] = {"q": query, "limit": limit}
        if kind is not None:
            params["kind"] = kind.value
        body = self._request("GET", "/search", params=params)
        words = query_words(query)
        out = []
        for item in body.get("items", []):
            try:
                entry = _entry(item, self.name)
            except (KeyError, TypeError, ValueError, OverflowError, UsageError):
                continue  # a malformed row is skipped, never trusted
            # The score is ours, not the hub's: a score it claims would rank its rows above every
            # other source's in the merged list. A row that matches no query word is not listed.
            score = field_score(entry, words)
            if words and score <= 0:
                continue
            out.append(replace(entry, score=score))
        return out

    def item(self, key: ArtifactKey) -> dict[str, Any]:
        return self._request("GET", self._item_path(key))

    def versions(self, key: ArtifactKey) -> list[str]:
        body = self._request("GET", self._item_path(key) + "/versions")
        return [str(v["version"]) for v in body.get("versions", []) if isinstance(v, dict) and not v.get("yanked")]

    def resolve(self, key: ArtifactKey, wanted: str | None, *, allow_yanked: bool = False) -> Resolved:
        item = self.item(key)
        versions = [v for v in item.get("versions", []) if isinstance(v, dict) and isinstance(v.get("version"), str)]
        tags = {str(k): str(v) for k, v in (item.get("dist_tags") or {}).items()}
        try:
            version = pick_version(versions, tags, wanted, allow_yanked=allow_yanked)
        except ArtifactNotFound as exc:
            raise ArtifactNotFound(f"{key} on hub {self.name!r}: {exc.message}", hint=exc.hint) from None
        detail = self._request("GET", f"{self._item_path(key)}/versions/{quote(version, safe='')}")
        try:
            manifest = ArtifactManifest.from_json(detail.get("manifest"), source=f"{self.name}:{key}@{version}")
        except ManifestError as exc:
            raise HubUnavailable(f"hub {self.name!r} sent an unusable manifest for {key}@{version}: {exc.message}") from None
        if manifest.key != key or manifest.version != version:
            raise HubUnavailable(f"hub {self.name!r} sent the manifest of {manifest.key}@{manifest.version} for {key}@{version}")
        sha = detail.get("sha256")
        if not isinstance(sha, str) or len(sha) != 64:
            raise HubUnavailable(f"hub {self.name!r} sent no archive sha256 for {key}@{version}")
        return Resolved(
            key=key, version=version, source=self.name,
            archive_url=f"{self.url}/api/v1{self._item_path(key)}/versions/{quote(version, safe='')}/download",
            archive_sha256=sha, archive_size=detail.get("size") if isinstance(detail.get("size"), int) else None,
            manifest=manifest, signature=detail.get("signature") if isinstance(detail.get("signature"), str) else None,
            public_key=detail.get("public_key") if isinstance(detail.get("public_key"), str) else None,
            publisher=str(item.get("publisher") or ""), yanked=bool(detail.get("yanked")),
            description=manifest.description, requested=dict(manifest.capabilities),
            members=tuple(manifest.capabilities.get("members", ())) if manifest.kind is ArtifactKind.BUNDLE else (),
            verdict=str(detail.get("verdict") or "unscanned"),
            findings=tuple(f for f in detail.get("findings") or () if isinstance(f, dict)),
        )  # fmt: skip

    def fetch(self, resolved: Resolved, *, max_bytes: int, progress: Progress | None = None, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> bytes:
        if resolved.archive_url is None:
            raise HubUnavailable(f"{resolved.label} has no archive")
        return download(resolved.archive_url, max_bytes=max_bytes, progress=progress, timeout_s=timeout_s)

    # -- publishing ------------------------------------------------------------------------

    def publish(
        self, manifest: ArtifactManifest, archive: bytes, *, signature: str, public_key: str, force: bool = False
    ) -> dict[str, Any]:
        return self._request(
            "POST",
            "/publish",
            json={
                "manifest": manifest.to_json(),
                "signature": signature,
                "public_key": public_key,
                "archive": base64.b64encode(archive).decode("ascii"),
                "force": force,
            },
            auth=True,
        )

    def set_tag(self, key: ArtifactKey, tag: str, version: str) -> dict[str, Any]:
        return self._request("PUT", f"{self._item_path(key)}/tags/{quote(tag, safe='')}", json={"version": version}, auth=True)

    def yank(self, key: ArtifactKey, version: str) -> dict[str, Any]:
        return self._request("DELETE", f"{self._item_path(key)}/versions/{quote(version, safe='')}", auth=True)

    def star(self, key: ArtifactKey) -> dict[str, Any]:
        return self._request("POST", f"{self._item_path(key)}/star", auth=bool(self.token))


def _entry(item: dict[str, Any], source: str) -> CatalogEntry:
    version = item["version"]
    if not isinstance(version, str) or not is_version(version) or version != version.strip():
        raise ValueError("not a version")
    return CatalogEntry(
        kind=ArtifactKind(item["kind"]),
        name=check_name(item["name"]),
        version=version,
        source=source,
        display_name=str(item.get("display_name") or ""),
        description=str(item.get("description") or ""),
        keywords=tuple(str(k) for k in item.get("keywords") or []),
        tags=tuple(str(k) for k in item.get("tags") or []),
        signer=str(item.get("public_key") or ""),
        publisher=str(item.get("publisher") or ""),
        verdict=str(item.get("verdict") or "unscanned"),
        stars=int(item.get("stars") or 0),
        downloads=int(item.get("downloads") or 0),
    )

