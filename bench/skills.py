"""Skill loading and selection over 1,000 generated skills of mixed dialects, next to plain
``yaml.safe_load`` of the same files measured in the same run.

    .venv/bin/python bench/skills.py

- baseline: read each SKILL.md, split off the frontmatter, ``yaml.safe_load`` it (PyYAML's
  default pure-Python SafeLoader, what a naive loader does) — nothing else;
- cold load: a new ``SkillLibrary`` over the folder: walk, read, parse every dialect, warnings,
  eligibility (PATH lookups for required bins included);
- warm load: ``reload()`` with nothing changed (stat only, parsed values reused);
- select: ``select(message)`` over the eligible skills, p50 and p95 over varied messages.

Targets from issue 12: cold load of 1,000 <= 300 ms, select p50 <= 2 ms. Each load figure is the
median of 7 runs.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from pincer.skills import Root, SkillLibrary

COUNT = 1_000
REPEATS = 7
SELECT_MESSAGES = 400
WORDS = ["deploy", "review", "release", "weather", "github", "issue", "summarize", "translate", "invoice", "calendar", "email", "slack", "docker", "kubernetes", "postgres", "backup", "audit", "lint", "test", "benchmark", "report", "chart", "travel", "recipe", "budget", "music", "video", "image", "pdf"]


def _frontmatter(index: int, rng: random.Random) -> str:
    name = f"skill-{index:04d}"
    words = rng.sample(WORDS, 4)
    description = f"Helps with {words[0]} and {words[1]}: use when the user mentions {words[2]} or {words[3]}."
    kind = index % 5
    if kind == 0:  # pincer
        return (
            f"name: {name}\nversion: 1.0.{index}\ndescription: \"{description}\"\ntags: [{words[0]}, {words[1]}]\n"
            f"tools: [read_file, http]\nparameters:\n  - name: target\n    type: string\n    required: true\n"
            f"  - name: depth\n    type: integer\n    default: 2\ntriggers:\n  - command: /{words[0]}-{index}\n  - manual\n"
            f"activation:\n  keywords: [{words[0]}, {words[2]}]\n  patterns: ['{words[1]} (now|today)']\n"
        )
    if kind == 1:  # IronClaw
        return (
            f"name: {name}\ndescription: \"{description}\"\nactivation:\n  keywords: [{', '.join(words)}]\n"
            f"  exclude_keywords: [never]\n  tags: [{words[0]}]\n  max_context_tokens: 1500\n"
            f"requires:\n  bins: [sh]\n  env: [HOME]\n"
        )
    if kind == 2:  # OpenClaw
        return (
            f"name: {name}\ndescription: \"{description}\"\nhomepage: https://example.com/{index}\n"
            f'metadata:\n  {{\n    "openclaw":\n      {{\n        "emoji": "x",\n        "requires": {{ "bins": ["sh"] }},\n'
            f'        "install": [{{ "id": "brew", "kind": "brew", "formula": "{words[0]}", "bins": ["{words[0]}"] }}],\n      }},\n  }}\n'
        )
    if kind == 3:  # Agent Skills
        return (
            f"name: {name}\ndescription: \"{description}\"\nlicense: MIT\ncompatibility: Needs python3\n"
            f"metadata:\n  author: bench\n  version: \"1.0\"\nallowed-tools: Read Write Bash\n"
        )
    return (  # Claude Code
        f"name: {name}\ndescription: \"{description}\"\nwhen_to_use: When {words[0]} comes up\n"
        f"argument-hint: \"[{words[1]}]\"\narguments: [first, second]\ndisable-model-invocation: false\n"
    )


def generate(folder: Path) -> list[Path]:
    rng = random.Random(12)
    paths = []
    for index in range(COUNT):
        body = f"# Skill {index}\n\n" + " ".join(rng.choice(WORDS) for _ in range(300)) + "\n\nUse $ARGUMENTS.\n"
        target = folder / f"skill-{index:04d}"
        target.mkdir(parents=True)
        (target / "SKILL.md").write_text(f"---\n{_frontmatter(index, rng)}---\n{body}")
        paths.append(target / "SKILL.md")
    return paths


def baseline(paths: list[Path]) -> None:
    for path in paths:
        text = path.read_text()
        _, front, _body = text.split("---\n", 2)
        yaml.safe_load(front)


def median_ms(fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="pincer-bench-skills-"))
    try:
        paths = generate(folder)
        roots = [Root(label="bench", path=folder)]
        limits_kwargs = {"max_candidates_per_root": COUNT * 2, "max_loaded_per_root": COUNT * 2}
        from pincer.skills.roots import WalkLimits

        limits = WalkLimits(**limits_kwargs)
        base = median_ms(lambda: baseline(paths))
        cold = median_ms(lambda: SkillLibrary(roots, limits=limits))
        library = SkillLibrary(roots, limits=limits)
        assert len(library.skills) == COUNT and not library.report.errors, library.report.errors[:3]
        warm = median_ms(library.reload)
        rng = random.Random(7)
        messages = [" ".join(rng.sample(WORDS, 5)) + f" please, it is urgent {i}" for i in range(SELECT_MESSAGES)]
        offered = library.offered()
        library.select(messages[0])  # matchers are built once per skill
        timings = []
        chosen = 0
        for message in messages:
            started = time.perf_counter()
            chosen += len(library.select(message))
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        p50, p95 = timings[len(timings) // 2], timings[int(len(timings) * 0.95)]
        print(f"skills: {COUNT} generated SKILL.md files (5 dialects), {len(offered)} offered to select")
        print(f"  {'baseline: read + yaml.safe_load':40} {base:9.1f} ms")
        print(f"  {'cold load (SkillLibrary)':40} {cold:9.1f} ms   {cold / base:5.2f}x baseline   target <= 300 ms")
        print(f"  {'warm reload (nothing changed)':40} {warm:9.1f} ms   {warm / base:5.2f}x baseline")
        print(f"  {'select p50 / p95':40} {p50:9.3f} / {p95:.3f} ms   target p50 <= 2 ms ({chosen / len(messages):.1f} chosen per message)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
