"""Tool names within 64 characters (naming.py): never two alike, stable, short ones as written."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.runtimes.openapi.naming import MAX_TOOL_NAME, assign_tool_names, tool_name

NAME = re.compile(r"^[A-Za-z0-9_]+$")
# Operation ids that collide on purpose: long shared prefixes, punctuation that becomes "_",
# ids equal to another's shortened form, exact repeats.
PREFIX = "repos/get-a-very-long-operation-id-that-github-would-write-for-an-endpoint"
OPERATION = st.one_of(
    st.text("ab_-/.", min_size=1, max_size=6),
    st.builds(lambda tail: PREFIX + tail, st.text("ab_-/", max_size=8)),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=80),
)
SERVICE = st.text("abcxyz_-0123456789", min_size=1, max_size=40).filter(lambda s: s[0].isalnum())


@settings(max_examples=500, deadline=None)
@given(service=SERVICE, operations=st.lists(OPERATION, max_size=30))
def test_names_are_unique_short_stable_and_keep_their_service(service: str, operations: list[str]) -> None:
    names = assign_tool_names(service, operations)
    assert len(names) == len(operations) and len(set(names)) == len(names)
    prefix = tool_name(service, "")
    for name in names:
        assert len(name) <= MAX_TOOL_NAME and NAME.match(name), name
        assert name.startswith(prefix), (name, prefix)
    assert assign_tool_names(service, operations) == names  # the same document gives the same names
    # The first operation to claim a full name that fits keeps it as written.
    seen: set[str] = set()
    for name, operation in zip(names, operations, strict=True):
        full = tool_name(service, operation)
        if len(full) <= MAX_TOOL_NAME and full not in seen:
            assert name == full
        seen.add(full)


@settings(max_examples=200, deadline=None)
@given(operations=st.lists(st.builds(lambda tail: PREFIX + tail, st.text("ab", max_size=5)), min_size=2, max_size=20,
                           unique=True))
def test_a_shortened_name_equal_to_another_name_does_not_collide(operations: list[str]) -> None:
    """Adding, as an operation id, exactly the shortened name another operation received."""
    first = assign_tool_names("gh", operations)
    clash = [name.removeprefix("gh_") for name in first if len(tool_name("gh", operations[0])) > MAX_TOOL_NAME][:1]
    names = assign_tool_names("gh", operations + clash)
    assert len(set(names)) == len(names)
