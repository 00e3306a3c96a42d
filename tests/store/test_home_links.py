"""store/home_links.py against the kernel: random folders and links laid on a real disk, and every
link the view lets in resolves (``os.path.realpath``) inside a shared root.

The view is what decides whether a shared link row is written into a home (issue 34, item 5:
chains of links that each looked inside led out), so it must never be more generous than the
kernel: a link it says is inside is inside, however the links in front of it are arranged.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.store.home_links import LinkView

FOLDERS = ("skills", "installed/skills", "hub/artifacts")
FILES = ("pincer.lock",)
NAMES = ("a", "b", "c")
PARTS = (".", "..", "..", "a", "b", "c", "skills", "installed", "hub", "artifacts", "secret.key")

_rel = st.tuples(st.sampled_from(FOLDERS), st.lists(st.sampled_from(NAMES), min_size=1, max_size=3)).map(
    lambda t: "/".join((t[0], *t[1]))
)
_target = st.lists(st.sampled_from(PARTS), min_size=1, max_size=5).map("/".join)


def _inside(home: str, where: str) -> bool:
    return any(where == os.path.join(home, root) or where.startswith(os.path.join(home, root) + os.sep)
               for root in FOLDERS + FILES)  # fmt: skip


def _lay(home: Path, folders: list[str], links: dict[str, str]) -> dict[str, str]:
    """The folders, then the links whose place is free (no link above them, nothing there); the
    links laid."""
    for folder in [*FOLDERS, *folders]:
        os.makedirs(home / folder, exist_ok=True)
    (home / "secret.key").write_text("k")
    laid: dict[str, str] = {}
    for rel, target in links.items():
        if any(rel.startswith(other + "/") for other in laid) or os.path.lexists(home / rel):
            continue
        if any(other.startswith(rel + "/") for other in [*folders, *laid]):
            continue
        os.makedirs((home / rel).parent, exist_ok=True)
        os.symlink(target, home / rel)
        laid[rel] = target
    return laid


@settings(max_examples=300, deadline=None)
@given(folders=st.lists(_rel, max_size=4), links=st.dictionaries(_rel, _target, min_size=1, max_size=6))
def test_a_link_the_view_lets_in_resolves_inside_on_the_disk(folders: list[str], links: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(os.path.realpath(tmp)) / "home"
        home.mkdir()
        laid = _lay(home, folders, links)
        view = LinkView(home, folders=FOLDERS, files=FILES)
        leading_out = view.problems()
        for rel in laid:
            if rel in leading_out:
                continue
            try:
                where = os.path.realpath(home / rel, strict=True)
            except FileNotFoundError:  # dangling: where the kernel would look (missing names walked through)
                where = os.path.realpath(home / rel)
            except OSError as exc:  # a loop the view let in
                raise AssertionError(f"{rel} -> {laid[rel]!r} is a loop on the disk ({exc}); links: {laid}") from None
            assert _inside(str(home), where), f"{rel} -> {laid[rel]!r} resolves to {where}; links: {laid}"


def test_a_folder_link_of_the_operator_is_taken_as_placed_but_not_climbed_out_of(tmp_path: Path) -> None:
    """``skills`` kept elsewhere by the operator (a link on this machine): links inside it are
    fine, a ``..`` out of it is not the home's ``..``."""
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere" / "skills"
    home.mkdir()
    elsewhere.mkdir(parents=True)
    (home / "skills").symlink_to(elsewhere)
    (elsewhere / "notes").mkdir()
    (elsewhere / "fine").symlink_to("notes")
    (elsewhere / "out").symlink_to("../installed/skills")  # home/installed/skills by the text; elsewhere/installed by the disk
    problems = LinkView(home, folders=FOLDERS, files=FILES).problems()
    assert set(problems) == {"skills/out"}, problems
    assert "a link on this machine" in problems["skills/out"]
