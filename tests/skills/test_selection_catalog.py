"""IronClaw's activation scoring, the selection budgets, and the catalog's bounds and note."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.skills import build_catalog, parse_skill, select
from pincer.skills.selection import score


def skill(name: str, activation: str = "", body: str = "short body", description: str = "d"):
    fm = f"name: {name}\ndescription: {description}\n" + (f"activation:\n{activation}\n" if activation else "")
    return parse_skill(f"---\n{fm}---\n{body}".encode(), path=Path(f"/s/{name}/SKILL.md"))


DEPLOY = skill(
    "deploy",
    "  keywords: [deploy, ship it, release]\n  exclude_keywords: [rollback]\n  patterns: ['deploy (to|on) (prod|staging)', 'v\\d+\\.\\d+']\n  tags: [ops, infra]",
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("please deploy this", 10),  # whole word
        ("redeployment tomorrow", 5),  # substring only
        ("deploy and release, ship it", 30),  # 10 + 10 + 10, at the cap
        ("deploy deploy release ship it redeploy", 30),  # capped at 30
        ("ops", 3),  # one tag
        ("ops infra", 6),
        ("deploy to prod", 10 + 20),  # keyword + pattern
        ("deploy to prod v1.2", 10 + 40),  # two patterns, capped at 40
        ("deploy to prod, then rollback", 0),  # exclude keyword vetoes
        ("nothing relevant", 0),
    ],
)
def test_scores_follow_ironclaw(message: str, expected: int) -> None:
    assert score(DEPLOY, message)[0] == expected


def test_tags_are_capped_at_15() -> None:
    tagged = skill("tagged", "  tags: [a, b, c, d, e, f, g]")
    assert score(tagged, "a b c d e f g")[0] == 15


def test_a_skill_without_keywords_is_matched_on_its_name() -> None:
    issues = skill("gh-issues")
    assert score(issues, "triage the gh-issues backlog")[0] == 10
    assert score(issues, "look at gh issues")[0] == 10
    assert score(issues, "unrelated")[0] == 0


def test_select_takes_the_best_within_count_and_token_budgets() -> None:
    skills = [
        skill("alpha", "  keywords: [report]", body="x" * 4000),  # 1000 tokens
        skill("beta", "  keywords: [report, weekly]", body="x" * 400),  # 100 tokens
        skill("gamma", "  keywords: [report]\n  max_context_tokens: 50", body="x" * 4000),  # capped at 50
        skill("delta", "  keywords: [report]", body="x" * 40),
        skill("omega", "  keywords: [unrelated]"),
    ]
    chosen = select("the weekly report", skills)
    assert [(c.skill.name, c.score) for c in chosen] == [("beta", 20), ("alpha", 10), ("delta", 10)]
    tight = select("the weekly report", skills, max_tokens=200)
    assert [c.skill.name for c in tight] == ["beta", "delta", "gamma"]  # alpha (1000 tokens) is passed over
    assert [c.skill.name for c in select("the weekly report", skills, max_skills=1)] == ["beta"]
    assert chosen[0].reasons == ("keyword 'report' +10", "keyword 'weekly' +10")


def test_the_catalog_lists_name_description_location_and_notes_truncation() -> None:
    skills = [skill(f"s{i:03}", description=f"does thing {i} & <more>") for i in range(200)]
    full = build_catalog(skills[:3])
    assert full.text.startswith("<available_skills>\n") and full.text.endswith("</available_skills>\n")
    assert "<name>s000</name>" in full.text and "does thing 0 &amp; &lt;more&gt;" in full.text
    assert "<location>/s/s000/SKILL.md</location>" in full.text and not full.is_truncated and "<note>" not in full.text
    by_count = build_catalog(skills)
    assert len(by_count.included) == 150 and len(by_count.omitted) == 50
    assert "<note>50 more skills are not listed" in by_count.text and "catalog_max_skills" in by_count.text
    by_chars = build_catalog(skills, max_chars=3000)
    assert len(by_chars.text) <= 3000 and by_chars.is_truncated
    assert f"<note>{len(by_chars.omitted)} more skills are not listed" in by_chars.text


@given(st.lists(st.text(max_size=200), max_size=5), st.text(max_size=300))
def test_description_match_takes_any_text(documents: list[str], message: str) -> None:
    from pincer.skills.wording import MIN_SHARED_WORDS, DescriptionIndex

    for value, shared in DescriptionIndex(documents).scores(message).values():
        assert value >= 0 and len(shared) >= MIN_SHARED_WORDS
