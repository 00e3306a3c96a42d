"""Where the links of a shared home lead, resolved the way the kernel resolves them.

A link row of the shared registry (store/home_share.py) is written into a home only when, in the
home as it will be with that row written, it and every other link of the shared roots still lead
into a shared root. "Lead" is the kernel's walk, not the text: one component after the other,
every link met on the way followed (those on the disk and those of the rows written in the same
sync), ``..`` taken from where the walk physically is. A lexical check of one row is not enough:
``skills/l2 -> .`` is the skills folder, so ``skills/l3 -> l2/..`` is PINCER_HOME itself although
``skills/l2/..`` reads as ``skills``; and a row that is harmless alone can turn a link already on
the disk outwards (``skills/q -> p/../../skills/x`` is inside while ``p`` is two folders deep, and
leaves the home once a row makes ``p`` the skills folder).

What counts as leading out: ending anywhere but a shared root (PINCER_HOME itself included); a
link to an absolute path; ``..`` above the home, or out of a folder that is a link on this
machine (an operator who keeps ``skills`` elsewhere: its ``..`` is not the home); a loop, or a
chain of more than :data:`MAX_LINK_FOLLOWS` links (the kernel's own limit); going through a link
whose shared copy was refused in the same sync. The folders down to and including each shared
root are taken as this machine has them (the operator places them); below a root, a file or a
missing name is walked through as a folder (a later row may make it one), so a link that dangles
today is checked as if it resolved.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LinkView", "MAX_LINK_FOLLOWS"]

MAX_LINK_FOLLOWS = 40  # Linux's MAXSYMLINKS: a longer chain is ELOOP to the kernel too


class _LeadsOut(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


@dataclass(kw_only=True, slots=True)
class _State:
    links: dict[str, str | None]  # path -> link target, or None: no link there (over the disk)
    cleared: set[str]  # paths whose contents on the disk no longer count (replaced, unlinked)
    refused: set[str]  # links whose shared copy was refused in this sync


class LinkView:
    """A home's links as they are on the disk, with the rows of one sync laid over them."""

    def __init__(self, home: Path, *, folders: tuple[str, ...], files: tuple[str, ...]) -> None:
        self.home = home
        self._folders = folders
        self._roots = folders + files
        # Taken as the machine has them: the folders above each root, and the folder roots.
        self._fixed = {"", *folders, *(a for root in self._roots for a in _ancestors(root))}
        self._state = _State(links={}, cleared=set(), refused=set())
        self._disk: dict[str, str | None] = {}
        self._on_disk = self._disk_links()

    # -- what a path is ------------------------------------------------------------------------

    def in_roots(self, rel: str) -> bool:
        return any(rel == root or rel.startswith(root + "/") for root in self._roots)

    def target(self, rel: str) -> str | None:
        """The target of the link at ``rel`` (None: no link there)."""
        if rel in self._state.links:
            return self._state.links[rel]
        if rel in self._fixed or any(a in self._state.cleared for a in _ancestors(rel)):
            return None
        if rel not in self._disk:
            try:
                self._disk[rel] = os.readlink(self.home / rel)
            except OSError:  # not a link, or nothing there
                self._disk[rel] = None
        return self._disk[rel]

    def _disk_links(self) -> list[str]:
        found: list[str] = []
        for root in self._roots:
            top = self.home / root
            if root not in self._folders:
                if os.path.islink(top):
                    found.append(root)
                continue
            for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
                for name in [*dirnames, *filenames]:
                    if os.path.islink(os.path.join(dirpath, name)):
                        found.append(Path(dirpath, name).relative_to(self.home).as_posix())
        return found

    def links(self) -> list[str]:
        """Every link of the shared roots, as the view has them."""
        candidates = {*self._on_disk, *(p for p, t in self._state.links.items() if t is not None)}
        return sorted(p for p in candidates if self.target(p) is not None)

    # -- where a link leads ------------------------------------------------------------------

    def where(self, rel: str) -> str:
        """The link-free path the link at ``rel`` leads to; _LeadsOut when it leads out."""
        target = self.target(rel)
        if target is None:
            return rel
        stack = rel.split("/")[:-1]
        todo: deque[str] = deque()
        follows = 0
        self._follow(rel, target, stack, todo)
        while todo:
            part = todo.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if not stack:
                    raise _LeadsOut("climbs out of PINCER_HOME")
                here = "/".join(stack)
                if here in self._fixed and here and os.path.islink(self.home / here):
                    raise _LeadsOut(f"climbs out of {here}, a link on this machine (its '..' is not in PINCER_HOME)")
                stack.pop()
                continue
            stack.append(part)
            here = "/".join(stack)
            if here in self._state.refused:
                raise _LeadsOut(f"goes through {here}, a link whose shared copy was refused")
            found = self.target(here)
            if found is not None:
                follows += 1
                if follows >= MAX_LINK_FOLLOWS:
                    raise _LeadsOut(f"is a loop of links (more than {MAX_LINK_FOLLOWS} followed)")
                stack.pop()
                self._follow(here, found, stack, todo)
        end = "/".join(stack)
        if not self.in_roots(end):
            raise _LeadsOut(f"leads to {end or 'PINCER_HOME itself'}, outside the shared registry files")
        return end

    @staticmethod
    def _follow(rel: str, target: str, stack: list[str], todo: deque[str]) -> None:
        if not target or target.startswith("/") or "\x00" in target:
            raise _LeadsOut(f"leads to {target!r} (through {rel}), not a path in PINCER_HOME: outside the shared registry files")
        todo.extendleft(reversed(target.split("/")))

    def problems(self) -> dict[str, str]:
        """Every link of the view that leads out, with why."""
        found: dict[str, str] = {}
        for rel in self.links():
            try:
                self.where(rel)
            except _LeadsOut as out:
                found[rel] = out.why
        return found

    # -- the rows of a sync ----------------------------------------------------------------------

    def admit(self, path: str, kind: str, target: str, *, known: Iterable[str]) -> str | None:
        """Lay the row (``kind`` file | link | gone) over the view when no link leads out with it
        that did not before; else why not, and the view is left as it was. ``known``: links not
        counted (those that led out before the sync, those the sync removes)."""
        saved = _State(links=dict(self._state.links), cleared=set(self._state.cleared), refused=set(self._state.refused))
        if not self._apply(path, kind, target):
            return None
        skip = set(known)
        new = {rel: why for rel, why in self.problems().items() if rel not in skip or rel == path}
        if not new:
            return None
        self._state = saved
        if path in new:
            return f"it is a link to {target!r}, which {new[path]}"
        rel, why = next(iter(sorted(new.items())))
        return f"with it, {rel} (a link to {self.target(rel)!r}) {why}"

    def lay(self, path: str, kind: str, target: str) -> None:
        """Lay the row over the view unchecked (the home as the rows of a sync claim it will be)."""
        self._apply(path, kind, target)

    def refuse(self, path: str) -> None:
        """The shared copy of the link at ``path`` was refused: a link through it is refused too."""
        self._state.refused.add(path)

    def _apply(self, path: str, kind: str, target: str) -> bool:
        """What writing the row does to the links (home_share's _write: a link or a file in a
        folder's place unlinked first, a folder in the row's place removed); whether any changed."""
        changed = False
        for folder in _ancestors(path):
            if folder not in self._fixed and self.target(folder) is not None:
                self._state.links[folder] = None
                self._state.cleared.add(folder)
                changed = True
        if kind == "link":
            self._state.links[path] = target
            self._state.cleared.add(path)
            return True
        if kind == "file":
            below = [rel for rel in self.links() if rel == path or rel.startswith(path + "/")]
            self._state.links[path] = None
            self._state.cleared.add(path)  # a folder there is removed, with the links in it
            return changed or bool(below)
        if self.target(path) is not None:  # gone: a link is unlinked (a folder stays)
            self._state.links[path] = None
            self._state.cleared.add(path)
            return True
        return changed
