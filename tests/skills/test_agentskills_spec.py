"""The Agent Skills spec as its reference validator applies it (issue 36): ``skills-ref``
(PyPI, the agentskills project's reference library, a dev dependency) and ``pincer skills check
--spec agentskills`` give the same verdict, case by case over a table of the spec's rules and
over generated frontmatters; pincer loads what the reference reads (``skill.md``, Unicode
lowercase names), and pincer's bundled skills pass the reference.

Where the two may differ, by design, the generated cases stay away: the reference splits the
file at the first three dashes anywhere (``content.split("---", 2)``), so a ``---`` inside a value
ends its frontmatter early; pincer, like every other reader, ends it at a line ``---``.
"""

from __future__ import annotations

import json
import string
import tempfile
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skills_ref.validator import validate as reference_validate
from typer.testing import CliRunner

from pincer.cli.main import app
from pincer.skills.agentskills import check_spec
from pincer.skills.parser import parse_skill
from pincer.skills.roots import BUNDLED_DIR
from tests.skills.conftest import write_skill
from tests.skills.test_cli import cli, doc, env, workspace

__all__ = ["env"]  # the fixture, imported for pytest

LONG = "x" * 1025
# (case id, folder, the SKILL.md's text); the reference's verdict is the expected one, and the
# comment says what the case is about.
CASES: list[tuple[str, str, str]] = [
    ("minimal", "demo", "---\nname: demo\ndescription: Does the thing.\n---\nbody\n"),
    ("all-fields", "demo", "---\nname: demo\ndescription: d\nlicense: MIT\ncompatibility: git\nallowed-tools: Read Bash(git:*)\n"
     "metadata:\n  author: me\n  version: \"1.0\"\n---\n"),
    ("allowed-tools-list", "demo", "---\nname: demo\ndescription: d\nallowed-tools:\n  - Read\n  - Write\n---\n"),
    ("no-frontmatter", "demo", "# demo\n\nJust a body.\n"),
    ("bom", "demo", "\ufeff---\nname: demo\ndescription: d\n---\n"),
    ("unclosed", "demo", "---\nname: demo\ndescription: d\n"),
    ("empty-frontmatter", "demo", "---\n---\nbody\n"),
    ("list-frontmatter", "demo", "---\n- name\n- description\n---\n"),
    ("scalar-frontmatter", "demo", "---\njust text\n---\n"),
    ("extra-field", "demo", "---\nname: demo\ndescription: d\nversion: 1.0.0\n---\n"),
    ("claude-fields", "demo", "---\nname: demo\ndescription: d\nwhen_to_use: always\nargument-hint: '[n]'\n---\n"),
    ("flow-list", "demo", "---\nname: demo\ndescription: d\nallowed-tools: [Read, Write]\n---\n"),
    ("flow-map", "demo", "---\nname: demo\ndescription: d\nmetadata: {author: me}\n---\n"),
    ("anchor", "demo", "---\nname: &n demo\ndescription: d\n---\n"),
    ("alias", "demo", "---\nname: &n demo\ndescription: *n\n---\n"),
    ("tag", "demo", "---\nname: !!str demo\ndescription: d\n---\n"),
    ("duplicate-key", "demo", "---\nname: demo\nname: demo\ndescription: d\n---\n"),
    ("tab-separator", "demo", "---\nname:\tdemo\ndescription: d\n---\n"),
    ("unquoted-colon", "demo", "---\nname: demo\ndescription: Use when: asked\n---\n"),
    ("quoted-colon", "demo", "---\nname: demo\ndescription: 'Use when: asked'\n---\n"),
    ("block-description", "demo", "---\nname: demo\ndescription: |\n  Two\n  lines.\n---\n"),
    ("no-name", "demo", "---\ndescription: d\n---\n"),
    ("empty-name", "demo", "---\nname:\ndescription: d\n---\n"),
    ("blank-name", "demo", "---\nname: '   '\ndescription: d\n---\n"),
    ("list-name", "demo", "---\nname:\n  - demo\ndescription: d\n---\n"),
    ("number-name", "123", "---\nname: 123\ndescription: d\n---\n"),  # text as written
    ("bool-name", "true", "---\nname: true\ndescription: d\n---\n"),
    ("null-name", "null", "---\nname: null\ndescription: d\n---\n"),
    ("uppercase", "Demo", "---\nname: Demo\ndescription: d\n---\n"),
    ("underscore", "de_mo", "---\nname: de_mo\ndescription: d\n---\n"),
    ("leading-hyphen", "-demo", "---\nname: -demo\ndescription: d\n---\n"),
    ("trailing-hyphen", "demo-", "---\nname: demo-\ndescription: d\n---\n"),
    ("double-hyphen", "de--mo", "---\nname: de--mo\ndescription: d\n---\n"),
    ("space", "de mo", "---\nname: de mo\ndescription: d\n---\n"),
    ("dot", "de.mo", "---\nname: de.mo\ndescription: d\n---\n"),
    ("64-chars", "a" * 64, f"---\nname: {'a' * 64}\ndescription: d\n---\n"),
    ("65-chars", "a" * 65, f"---\nname: {'a' * 65}\ndescription: d\n---\n"),
    ("unicode-lowercase", "café-helper", "---\nname: café-helper\ndescription: d\n---\n"),
    ("unicode-uppercase", "Café-helper", "---\nname: Café-helper\ndescription: d\n---\n"),
    ("cjk", "数据-分析", "---\nname: 数据-分析\ndescription: d\n---\n"),
    ("nfkc-name", "ﬁle-tool", "---\nname: ﬁle-tool\ndescription: d\n---\n"),  # the ligature: NFKC 'file-tool'
    ("nfkc-folder", "ﬁle-tool", "---\nname: file-tool\ndescription: d\n---\n"),
    ("decomposed-name", "café", "---\nname: cafe\u0301\ndescription: d\n---\n"),  # NFKC composes é
    ("padded-name", "demo", "---\nname: '  demo  '\ndescription: d\n---\n"),
    ("folder-differs", "other", "---\nname: demo\ndescription: d\n---\n"),
    ("no-description", "demo", "---\nname: demo\n---\n"),
    ("empty-description", "demo", "---\nname: demo\ndescription: ''\n---\n"),
    ("mapping-description", "demo", "---\nname: demo\ndescription:\n  a: b\n---\n"),
    ("1024-description", "demo", f"---\nname: demo\ndescription: {'x' * 1024}\n---\n"),
    ("1025-description", "demo", f"---\nname: demo\ndescription: {LONG}\n---\n"),
    ("500-compatibility", "demo", f"---\nname: demo\ndescription: d\ncompatibility: {'c' * 500}\n---\n"),
    ("501-compatibility", "demo", f"---\nname: demo\ndescription: d\ncompatibility: {'c' * 501}\n---\n"),
    ("list-compatibility", "demo", "---\nname: demo\ndescription: d\ncompatibility:\n  - git\n---\n"),
    ("empty-compatibility", "demo", "---\nname: demo\ndescription: d\ncompatibility: ''\n---\n"),  # a warning only
    ("nested-metadata", "demo", "---\nname: demo\ndescription: d\nmetadata:\n  a:\n    b: c\n---\n"),  # a warning only
    ("crlf", "demo", "---\r\nname: demo\r\ndescription: d\r\n---\r\nbody\r\n"),
    ("comments", "demo", "---\n# a comment\nname: demo  # the name\ndescription: d\n---\n"),
    ("document-end", "demo", "---\nname: demo\ndescription: d\n...\n---\n"),
]


def reference_verdict(folder: Path) -> list[str]:
    return reference_validate(folder)


def pincer_errors(text: str, folder: str) -> list[str]:
    return [str(f) for f in check_spec(text.encode("utf-8"), folder=folder) if f.severity == "error"]


def _write(root: Path, folder: str, text: str, file_name: str = "SKILL.md") -> Path:
    target = root / folder
    target.mkdir(parents=True)
    (target / file_name).write_bytes(text.encode("utf-8"))
    return target


@pytest.mark.parametrize(("case", "folder", "text"), CASES, ids=[c[0] for c in CASES])
def test_the_reference_and_pincer_agree_on_each_rule(tmp_path: Path, case: str, folder: str, text: str) -> None:
    reference = reference_verdict(_write(tmp_path, folder, text))
    ours = pincer_errors(text, folder)
    assert bool(reference) == bool(ours), (case, reference, ours)


def test_the_table_covers_both_verdicts_and_every_rule(tmp_path: Path) -> None:
    """The table is not all passes or all failures: each of pincer's rules fires on some case."""
    rules = set()
    passing = 0
    for _, folder, text in CASES:
        found = check_spec(text.encode("utf-8"), folder=folder)
        rules |= {f.rule for f in found if f.severity == "error"}
        passing += not any(f.severity == "error" for f in found)
    assert rules == {"frontmatter", "yaml", "mapping", "fields", "name", "name-folder", "description", "compatibility"}
    assert 10 <= passing <= len(CASES) - 30


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("---\nname: demo\ndescription: d\ncompatibility: ''\n---\n", "compatibility"),
        ("---\nname: demo\ndescription: d\nmetadata:\n  a:\n    b: c\n---\n", "metadata"),
        ("---\nname: demo\ndescription: d\nmetadata: text\n---\n", "metadata"),
        ("---\nname: demo\ndescription: d\nallowed-tools:\n  k: v\n---\n", "allowed-tools"),
    ],
)
def test_what_the_spec_text_asks_and_the_reference_lets_pass_is_a_warning(tmp_path: Path, text: str, rule: str) -> None:
    assert reference_verdict(_write(tmp_path, "demo", text)) == []
    found = check_spec(text.encode(), folder="demo")
    assert [(f.rule, f.severity) for f in found] == [(rule, "warning")]


def test_skills_check_spec_agentskills_gives_the_reference_verdict_for_every_case(env: dict[str, str], tmp_path: Path) -> None:
    """``pincer skills check --spec agentskills ROOT`` over every case of the table, each in a
    folder of its own: its per-file verdict is the reference's, its exit code 1 on an error. The
    command runs in this process (typer's runner, the same app); one passing and one failing case
    also run as a subprocess, which is all a process adds (58 subprocesses took 287 s of CI)."""
    root = tmp_path / "cases"
    expected: dict[str, bool] = {}
    for index, (_, folder, text) in enumerate(CASES):
        holder = root / f"{index:02d}"
        path = _write(holder, folder, text)
        expected[str(path / "SKILL.md")] = not reference_verdict(path)
    runner = CliRunner()
    verdicts: dict[str, bool] = {}
    for holder in sorted(root.iterdir()):
        checked = runner.invoke(app, ["skills", "check", "--spec", "agentskills", "--json", str(holder)], env=env)
        document = json.loads(checked.stdout)
        (entry,) = document["spec"]["files"]
        verdicts[entry["path"]] = passed = not any(f["severity"] == "error" for f in entry["findings"])
        assert checked.exit_code == (0 if passed and not document["errors"] else 1), checked.stderr
    disagreements = {p: (expected[p], verdicts.get(p)) for p in expected if verdicts.get(p) != expected[p]}
    assert not disagreements, disagreements
    by_verdict = {passed: path for path, passed in verdicts.items()}
    assert set(by_verdict) == {True, False}, "the table has passing and failing cases"
    for passed, path in by_verdict.items():
        checked_process = cli(env, "check", "--spec", "agentskills", "--json", str(Path(path).parent.parent))
        (entry,) = doc(checked_process)["spec"]["files"]
        assert entry["path"] == path and checked_process.returncode == (0 if passed else 1), checked_process.stderr


def test_skills_check_spec_names_the_rule_the_line_and_what_to_do(env: dict[str, str]) -> None:
    write_skill(workspace(env) / "skills", "tagged", "tags: [a, b]\nversion: 2")
    checked = cli(env, "check", "--spec", "agentskills")
    text = " ".join(checked.stderr.split())
    assert checked.returncode == 1, checked.stderr
    assert "spec error" in text and "line 3: YAML flow style ([...]) is not allowed" in text
    assert "write one '- item' or 'key: value' per line [agentskills yaml]" in text
    assert "agentskills: 3 of 4 files pass, 1 errors" in text  # the three bundled skills pass
    # without the flow list, the fields outside the spec are named and where they belong is said
    write_skill(workspace(env) / "skills", "tagged", "version: 2")
    document = doc(cli(env, "check", "--spec", "agentskills", "--json"))
    (entry,) = [f for f in document["spec"]["files"] if "tagged" in f["path"]]
    assert [f["rule"] for f in entry["findings"]] == ["fields"]
    assert "fields outside the spec: version" in entry["findings"][0]["message"]
    assert "a client's own fields go under metadata" in entry["findings"][0]["message"]
    # an unknown spec is a usage error that names the one there is
    wrong = cli(env, "check", "--spec", "openclaw")
    assert wrong.returncode != 0 and "pincer skills check --spec agentskills" in wrong.stderr


# -- generated frontmatters ---------------------------------------------------------------------

_NAME_CHARS = string.ascii_lowercase + string.digits + "-" + "AZ_. é数ßİǅ" + "\u0301ﬁ"
valid_names = st.from_regex(r"[a-z0-9é数]{1,8}(-[a-z0-9é数]{1,8}){0,3}", fullmatch=True)
odd_names = st.one_of(
    st.text(_NAME_CHARS, min_size=0, max_size=70),
    st.sampled_from(["a" * 64, "a" * 65, "café-helper", "Café", "-x", "x-", "a--b", "ﬁle", "  pad  "]),
    st.integers(-5, 10_000),
    st.booleans(),
    st.none(),
    st.lists(st.just("demo"), min_size=1, max_size=2),
)
# printable text without the reference's frontmatter-splitting "---"
_PRINTABLE = st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs"])
texts = st.text(_PRINTABLE, max_size=40).filter(lambda t: "---" not in t)
long_texts = st.one_of(texts, st.integers(490, 1030).map(lambda n: "y" * n))
values = st.one_of(texts, st.integers(), st.booleans(), st.none(), st.lists(texts, max_size=3), st.dictionaries(texts, texts, max_size=3))
optional_fields = st.fixed_dictionaries(
    {},
    optional={
        "license": texts,
        "compatibility": st.one_of(texts.filter(bool), st.integers(490, 510).map(lambda n: "c" * n)),
        # (empty ones would be dumped as flow style: [] and {})
        "metadata": st.dictionaries(texts, texts, min_size=1, max_size=3),
        "allowed-tools": st.one_of(texts, st.lists(texts, min_size=1, max_size=3)),
    },
)
# one change to a valid frontmatter, or none
changes = st.one_of(
    st.just({}),
    st.just({}),
    st.fixed_dictionaries({"name": odd_names}),
    st.fixed_dictionaries({"description": st.one_of(long_texts, values)}),
    st.fixed_dictionaries({"compatibility": values}),
    st.fixed_dictionaries({"license": values, "metadata": values, "allowed-tools": values}),
    st.dictionaries(st.sampled_from(["version", "tags", "when_to_use", "Name", "1"]), values, min_size=1, max_size=2),
    st.sampled_from([{"name": "<drop>"}, {"description": "<drop>"}]),
)


@st.composite
def skill_files(draw: st.DrawFn) -> tuple[str, str]:
    """(folder, SKILL.md text): a valid skill with at most one change, dumped as YAML in block or
    flow style, in its own folder or another."""
    name = draw(valid_names)
    fields = {"name": name, "description": draw(texts.filter(str.strip)), **draw(optional_fields)}
    for key, value in draw(changes).items():
        if value == "<drop>":
            fields.pop(key, None)
        else:
            fields[key] = value
    folder = draw(st.text(_NAME_CHARS, min_size=1, max_size=12)) if draw(st.integers(0, 5)) == 5 else name
    if isinstance(fields.get("name"), str) and draw(st.booleans()):
        folder = fields["name"].strip()
    folder = folder.strip() or "x"
    if folder in (".", "..") or "/" in folder or unicodedata.normalize("NFC", folder) != folder:
        folder = "x"  # a folder the filesystem keeps as written
    flow = draw(st.integers(0, 5)) == 5
    block = yaml.safe_dump(fields, allow_unicode=True, sort_keys=False, default_flow_style=None if flow else False, width=1_000_000)
    return folder, f"---\n{block}---\nbody\n"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=skill_files())
def test_generated_frontmatters_get_the_reference_verdict(case: tuple[str, str]) -> None:
    folder, text = case
    with tempfile.TemporaryDirectory() as tmp:
        reference = reference_verdict(_write(Path(tmp), folder, text))
    ours = pincer_errors(text, folder)
    assert bool(reference) == bool(ours), (text, reference, ours)


# -- what the reference reads, pincer loads ---------------------------------------------------


def test_the_bundled_skills_pass_the_reference_validator_and_pincers_check() -> None:
    folders = sorted(p for p in BUNDLED_DIR.iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["code-review", "release-notes", "summarize-url"]
    for folder in folders:
        assert reference_verdict(folder) == [], folder
        assert check_spec((folder / "SKILL.md").read_bytes(), folder=folder.name) == (), folder
        # and pincer still reads its own fields, from metadata.pincer
        skill = parse_skill((folder / "SKILL.md").read_bytes(), path=folder / "SKILL.md")
        assert skill.warnings == () and skill.version == "1.0.0" and skill.parameters and skill.triggers
        assert skill.activation.keywords and skill.tools


def test_metadata_pincer_as_a_mapping_or_yaml_text_and_the_frontmatter_wins() -> None:
    text = ("---\nname: demo\ndescription: d\ntags:\n  - top\nmetadata:\n  pincer: |\n    tags: [inner]\n"
            "    triggers:\n      - command: /demo\n    name: hijack\n---\n")  # fmt: skip
    skill = parse_skill(text.encode(), path=Path("/skills/demo/SKILL.md"))
    assert skill.name == "demo" and skill.tags == ("top",) and [str(t) for t in skill.triggers] == ["command: /demo"]
    nested = parse_skill(b"---\nname: demo\ndescription: d\nmetadata:\n  pincer:\n    tags: [inner]\n---\n", path=Path("/s/demo/SKILL.md"))
    assert nested.tags == ("inner",)
    broken = parse_skill(b"---\nname: demo\ndescription: d\nmetadata:\n  pincer: 'a: [b'\n---\n", path=Path("/s/demo/SKILL.md"))
    assert any("metadata.pincer: is not a YAML mapping" in str(w) for w in broken.warnings), broken.warnings


def test_a_lowercase_skill_md_loads_as_the_reference_reads_it(env: dict[str, str]) -> None:
    """Before: a folder whose file is ``skill.md`` loaded nothing (it was only reported); the
    reference validator reads it. SKILL.md still wins when both are there."""
    lower = workspace(env) / "skills" / "lower"
    lower.mkdir(parents=True)
    (lower / "skill.md").write_text("---\nname: lower\ndescription: The lowercase one\n---\nlower body\n")
    assert reference_verdict(lower) == []
    both = workspace(env) / "skills" / "both"
    both.mkdir(parents=True)
    (both / "skill.md").write_text("---\nname: both\ndescription: from skill.md\n---\n")
    (both / "SKILL.md").write_text("---\nname: both\ndescription: from SKILL.md\n---\n")
    listed = doc(cli(env, "list", "--json"))
    rows = {row["name"]: row for row in listed["skills"]}
    assert rows["lower"]["path"] == str(lower / "skill.md") and rows["lower"]["description"] == "The lowercase one"
    assert rows["both"]["description"] == "from SKILL.md"
    checked = doc(cli(env, "check", str(lower), "--json"))
    assert [s["name"] for s in checked["skills"]] == ["lower"] and checked["misplaced"] == []
    shown = doc(cli(env, "show", "lower", "--json"))
    assert next(f["path"] for f in shown["files"]) == "SKILL.md"  # served under the spec's name


def test_a_unicode_lowercase_name_loads_without_a_warning_and_nfkc_decides_equality() -> None:
    """Before: 'café-helper' was warned about with "'café-helper' cannot name a skill; the folder
    name 'café-helper' is used", a message that contradicts itself."""
    skill = parse_skill("---\nname: café-helper\ndescription: d\n---\n".encode(), path=Path("/s/café-helper/SKILL.md"))
    assert skill.name == "café-helper" and skill.warnings == ()
    decomposed = parse_skill("---\nname: cafe\u0301\ndescription: d\n---\n".encode(), path=Path("/s/café/SKILL.md"))
    assert decomposed.name == "café" and decomposed.warnings == ()
    upper = parse_skill("---\nname: Café\ndescription: d\n---\n".encode(), path=Path("/s/Café/SKILL.md"))
    assert [str(w) for w in upper.warnings] == ["name: 'Café' breaks the Agent Skills rules: the name must be lowercase"]


def test_a_name_pincer_cannot_use_never_gets_a_warning_that_contradicts_itself() -> None:
    """A name that cannot name a skill falls back to the folder's only when the folder's can;
    when neither can, the file is not loaded and the error says why (no 'X cannot name a skill;
    X is used')."""
    fallback = parse_skill(b"---\nname: a/b\ndescription: d\n---\n", path=Path("/s/ab/SKILL.md"))
    assert fallback.name == "ab"
    (warning,) = [str(w) for w in fallback.warnings]
    assert warning.startswith("name: 'a/b' cannot name a skill (letters, digits,") and warning.endswith("the folder name 'ab' is used")
    from pincer.core.errors import SkillError

    with pytest.raises(SkillError) as caught:
        parse_skill(b"---\nname: two words\ndescription: d\n---\n", path=Path("/s/two words/SKILL.md"))
    assert "neither the name 'two words' nor the folder name 'two words' can name a skill" in caught.value.detail
    assert "set name: to lowercase letters, digits and '-'" in (caught.value.hint or "")


def test_a_skill_folder_whose_file_is_skill_md_publishes_with_its_metadata_version(tmp_path: Path) -> None:
    """The same hole on the hub's path: ``pincer publish`` could not tell what a folder holding
    ``skill.md`` was ("cannot tell what ... holds")."""
    from pincer.hub.publish import build_artifact

    folder = tmp_path / "lower"
    folder.mkdir()
    (folder / "skill.md").write_text('---\nname: lower\ndescription: The lowercase one\nmetadata:\n  version: "2.1.0"\n---\nbody\n')
    built = build_artifact(folder)
    assert (built.manifest.kind.value, built.manifest.name, built.manifest.version) == ("skill", "lower", "2.1.0")
    assert built.manifest.description == "The lowercase one"
