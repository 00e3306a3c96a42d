"""Property: for any generated command line whose real programs (as bash would run them) are not
all on the allowlist, the exec analyser never answers allow.

Lines come from a grammar: wrappers with their real option forms (attached and separate values,
``--opt=value`` and ``--opt value``, optional values) and sometimes an option no wrapper knows;
``bash``/``sh``/``dash`` with ``-c`` in every placement (``-ec``, ``+c``, ``-c -e``, options with
values, ``$0`` and arguments after the line); ``python3`` with its options; quoting of every kind;
operators; final programs from a pool of which only some are allowlisted.

The reference model is independent of the analyser: it never parses text. It knows what every
word *is* because it generated it, and from that structure it says which programs bash runs
(wrappers are transparent; a shell running ``-c`` is a program and so is its line) and which
lines hold something it does not model (``unknown``: an unknown option, xargs input in a word
that decides what runs, an unsafe environment assignment). ``test_reference_model_matches_real_shells``
runs a sample of the same lines with real bash and dash, real wrappers and stub programs that log
their names, and checks that the reference never misses a program that really ran.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.effects import Mode
from pincer.policy.exec_approvals import ExecApprovalPolicy, evaluate

# --- the world: which binaries exist -------------------------------------------------------------

PLAIN = ("ls", "cat", "id", "curl", "echo")
SHELLS = ("bash", "sh", "dash")
WRAPPERS = ("env", "nice", "nohup", "timeout", "stdbuf", "xargs", "setsid", "chrt", "ionice", "taskset", "flock",
            "time", "unbuffer")  # fmt: skip
REAL = {"sh": "/usr/bin/dash", "python3": "/usr/bin/python3.11"}  # symlink targets
NAMES = (*PLAIN, *SHELLS, *WRAPPERS, "python3")
SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def paths(name: str) -> tuple[str, ...]:
    first = f"/usr/bin/{name}"
    return (first, REAL[name]) if name in REAL else (first,)


def resolve(word: str) -> tuple[str, ...]:
    """Every system directory holds the same binaries, so PATH lookups and /bin:/usr/bin agree."""
    directory, _, name = word.rpartition("/")
    if "/" in word and directory not in SYSTEM_DIRS:
        return ()
    return paths(name) if name in NAMES else ()


# --- the grammar, as values the reference reads -----------------------------------------------------


@dataclass(frozen=True)
class Wrapper:
    name: str
    words: tuple[str, ...]  # the wrapper and everything it reads before its command
    unknown: bool = False
    replace: str | None = None  # xargs -I R
    appends: bool = False  # xargs without -I
    argv0: str | None = None  # exec -a NAME
    login: bool = False  # exec -l or exec -a -NAME: a shell it runs is a login shell (runs /etc/profile)
    clears: bool = False  # PATH gone from the command's environment
    strict: bool = False  # harmless here, refused by a documented strict rule


@dataclass(frozen=True)
class Program:
    words: tuple[str, ...]  # program word, then arguments nobody interprets


@dataclass(frozen=True)
class Alone:
    """A wrapper without a command: it is the program (env prints the environment)."""

    words: tuple[str, ...]


@dataclass(frozen=True)
class Python:
    head: tuple[str, ...]  # python3, options, and the script or the inline code
    tail: tuple[str, ...]
    inline: bool
    unknown: bool = False


@dataclass(frozen=True)
class Shell:
    head: tuple[str, ...]  # the shell and its options (the -c line is `line`)
    line: Line | None  # the -c line
    line_text: str  # ... as the shell receives it
    tail: tuple[str, ...]  # $0 and arguments, or the script file and its arguments
    stdin: bool  # reads its commands from standard input
    unknown: bool = False


Final = Program | Alone | Python | Shell


@dataclass(frozen=True)
class Segment:
    assignments: tuple[str, ...]  # rendered NAME=VALUE words
    unsafe: bool
    wrappers: tuple[Wrapper, ...]
    final: Final


@dataclass(frozen=True)
class Line:
    segments: tuple[Segment, ...]
    operators: tuple[str, ...]


# --- rendering: structure -> shell text -------------------------------------------------------------

_BARE = re.compile(r"[A-Za-z0-9_./:,+%-]+|\{\}")


def quote(word: str, style: int) -> str:
    if style == 0 and _BARE.fullmatch(word):
        return word
    if style == 1 or "\n" in word or not word:
        return "'" + word.replace("'", "'\\''") + "'"
    if style == 2:
        return '"' + re.sub(r'([\\"$`])', r"\\\1", word) + '"'
    if style == 3:
        return "".join(c if c.isalnum() else "\\" + c for c in word)
    cut = len(word) // 2  # two halves, two quotings: 'ex'"ec"
    return quote(word[:cut], 1) + quote(word[cut:], 2) if cut else quote(word, 1)


def render(line: Line, styles: Callable[[], int]) -> str:
    out: list[str] = []
    for index, segment in enumerate(line.segments):
        if index:
            op = line.operators[index - 1]
            out.append("\n" if op == "\n" else f" {op} ")
        words = [*segment.assignments]
        for wrapper in segment.wrappers:
            words.extend(quote(w, styles()) for w in wrapper.words)
        final = segment.final
        if isinstance(final, Shell):
            words.extend(quote(w, styles()) for w in final.head)
            if final.line is not None:
                words.append(quote(final.line_text, 1 + styles() % 2))
            words.extend(quote(w, styles()) for w in final.tail)
        elif isinstance(final, Python):
            words.extend(quote(w, styles()) for w in (*final.head, *final.tail))
        else:
            words.extend(quote(w, styles()) for w in final.words)
        out.append(" ".join(words))
    return "".join(out)


# --- the reference model -------------------------------------------------------------------------------


@dataclass
class Truth:
    runs: list[tuple[str, bool]] = field(default_factory=list)  # (program name, inline evaluation)
    unknown: bool = False  # the reference does not model what runs: the analyser must not allow
    may_refuse: bool = False  # harmless here, refused by a documented strict rule

    def merge(self, other: Truth) -> None:
        self.runs.extend(other.runs)
        self.unknown |= other.unknown
        self.may_refuse |= other.may_refuse


_CLASSIFIED = re.compile(r"^(sh|bash|dash|rbash|zsh|ksh|fish|python3?|node|perl|env|nice|nohup|timeout|stdbuf|"
                         r"xargs|setsid|chrt|ionice|taskset|flock|time|unbuffer|exec|command|builtin|busybox.*)$")  # fmt: skip


def program_name(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def line_truth(line: Line, *, cleared: bool = False) -> Truth:
    truth = Truth()
    for segment in line.segments:
        truth.merge(segment_truth(segment, cleared=cleared))
    return truth


def segment_truth(segment: Segment, *, cleared: bool) -> Truth:
    truth = Truth(unknown=segment.unsafe)
    replaces: list[str] = []
    appends = False
    for wrapper in segment.wrappers:
        truth.unknown |= wrapper.unknown or any(r in w for r in replaces for w in wrapper.words)
        if wrapper.name == "time" and cleared:
            truth.may_refuse = True  # time under a cleared PATH: bash keyword or /usr/bin/time?
        cleared |= wrapper.clears
        if wrapper.replace is not None:
            replaces.append(wrapper.replace)
        appends |= wrapper.appends
        if wrapper.argv0 is not None and _CLASSIFIED.match(program_name(wrapper.argv0)):
            truth.may_refuse = True  # exec -a python3 ls: the names disagree on what runs
        truth.may_refuse |= wrapper.strict
    final = segment.final

    def touched(words: Sequence[str]) -> bool:
        return any(r in w for r in replaces for w in words)

    if isinstance(final, Program):
        truth.unknown |= touched(final.words[:1])
        truth.runs.append((program_name(final.words[0]), False))
    elif isinstance(final, Alone):
        truth.unknown |= appends or touched(final.words)  # xargs input would become its command
        truth.runs.append((program_name(final.words[0]), False))
    elif isinstance(final, Python):
        truth.unknown |= final.unknown or touched(final.head)
        truth.runs.append(("python3", final.inline))
    else:
        truth.unknown |= final.unknown or touched(final.head) or (final.line is None and touched(final.tail[:1]))
        # A shell run as a login shell (argv[0] begins with "-") runs /etc/profile first.
        truth.unknown |= bool(segment.wrappers) and segment.wrappers[-1].login
        truth.runs.append((program_name(final.head[0]), final.stdin))
        if final.line is not None:
            # xargs substitutes into the -c word as text: the line is then code from the input.
            truth.unknown |= touched([final.line_text])
            truth.merge(line_truth(final.line, cleared=cleared))
    return truth


# --- strategies -----------------------------------------------------------------------------------------

POOL = ("ls", "id", "/usr/bin/ls", "/usr/bin/id", "-c", "-e", "--", "-", "x", "a b", ";", "{}", "%", "curl",
        "python3", "sh", "bash", "env", "-i", "LD_PRELOAD=/tmp/x.so", "'", '"', "$HOME", "*", "")  # fmt: skip
UNKNOWN = ("-Z", "--zzz-frob")


def one_of(draw: Any, *choices: Any) -> Any:
    return draw(st.sampled_from(choices))


Form = list[str]  # one option as written: ["-n", "5"], ["-n5"], ["--adjustment=5"]


def options(draw: Any, forms: Sequence[Form], most: int = 2) -> list[Form]:
    return [list(f) for f in draw(st.lists(st.sampled_from(list(forms)), max_size=most))]


def flat(forms: Sequence[Form]) -> list[str]:
    return [w for form in forms for w in form]


def value(draw: Any) -> str:
    return draw(st.sampled_from(POOL))


def with_unknown(draw: Any, forms: list[Form], start: int = 0) -> tuple[list[Form], bool]:
    """Sometimes an option no program knows, between two options (never inside one)."""
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(start, len(forms)))
        return [*forms[:at], [draw(st.sampled_from(UNKNOWN))], *forms[at:]], True
    return forms, False


@st.composite
def wrapper_strategy(draw: Any, oracle: bool) -> Wrapper:
    """One wrapper with options as the real program accepts them (the oracle checks they do)."""

    names = [n for n in (*WRAPPERS, "exec", "command", "builtin") if not (oracle and n == "unbuffer")]
    name = draw(st.sampled_from(names))
    v = value(draw)
    forms: list[Form]
    operands: list[str] = []
    replace_string, clears, argv0, strict, login = None, False, None, False, False
    if name == "env":
        choices = [["-u", v], ["-u" + (v or "X")], ["--unset", v], ["--unset=" + v], ["-v"], ["--debug"],
                   ["--default-signal"], ["--default-signal=INT"], ["--ignore-signal=INT"], ["--block-signal"]]
        if not oracle:  # these change PATH or the directory, which the stub world cannot follow
            choices += [["-i"], ["-C", "/"], ["-C/"], ["--chdir=/"], ["--ignore-environment"]]
        forms = options(draw, choices, 3)
        clears = any(f[0] in ("-i", "--ignore-environment") for f in forms)
        if draw(st.booleans()):
            operands.append("--")
        if not oracle and draw(st.integers(0, 4)) == 0:
            operands.append("-")
            clears = True
        operands += draw(st.lists(st.sampled_from(["LANG=C", "TZ=UTC", "LC_ALL=C"]), max_size=2))
    elif name == "nice":
        n = one_of(draw, "5", "10", "1")
        forms = options(draw, [["-n", n], ["-n" + n], ["--adjustment", n], ["--adjustment=" + n], ["-" + n],
                               ["--" + n], ["-n", "-" + n]], 1)  # fmt: skip
    elif name == "nohup":
        forms = []
        operands = one_of(draw, [], ["--"])
    elif name == "timeout":
        forms = options(draw, [["-s", "KILL"], ["-sKILL"], ["--signal=TERM"], ["--signal", "TERM"],
                               ["-k", "1"], ["-k1"], ["--kill-after=1"], ["--kill-after", "1"],
                               ["--foreground"], ["--preserve-status"], ["-v"], ["--verbose"]])  # fmt: skip
        operands = [one_of(draw, "5", "5s", "1m")]
    elif name == "stdbuf":
        forms = options(draw, [["-o", "L"], ["-oL"], ["--output=L"], ["--output", "L"], ["-e", "0"],
                               ["-i", "0"], ["-e0"]]) or [["-oL"]]  # fmt: skip
    elif name == "xargs":
        forms = options(draw, [["-0"], ["-n", "1"], ["-n1"], ["--max-args=1"], ["-P", "2"], ["-r"], ["-t"],
                               ["-x"], ["-d", ","], ["--delimiter=,"], ["-E", "EOF"], ["-L", "1"],
                               ["--max-lines"], ["--max-lines=1"], ["-l"], ["-e"], ["--eof=EOF"],
                               ["-s", "1000"]])  # fmt: skip
        if draw(st.booleans()):
            replace_string = one_of(draw, "{}", "%")
            with_r = [["-I", replace_string], ["-I" + replace_string], ["--replace=" + replace_string]]
            # Given last, -I wins over -L/-l here; the analyser also reads such input as appended,
            # since xargs versions disagree.
            strict = any(re.match(r"-[nLl]|--max-(args|lines)", f[0]) for f in forms)
            forms.append(one_of(draw, *with_r, *([["-i"], ["--replace"]] if replace_string == "{}" else [])))
    elif name in ("exec", "builtin"):
        forms = options(draw, [["-a", v], ["-a" + (v or "x")], ["-l"], ["-la", v],
                               *([] if oracle else [["-c"], ["-cl"]])])  # fmt: skip
        for form in forms:
            if form[0] in ("-a", "-la"):
                argv0 = form[1]
            elif form[0].startswith("-a"):
                argv0 = form[0][2:]
            clears |= form[0] in ("-c", "-cl")
            login |= form[0] in ("-l", "-la", "-cl")
        if draw(st.booleans()):
            operands.append("--")
    elif name == "command":
        forms = []
        operands = one_of(draw, [], ["--"], *([] if oracle else [["-p"]]))
    elif name == "time":
        forms = one_of(draw, [], [["-p"]])
    elif name == "setsid":
        forms = options(draw, [["-w"], ["--wait"], *([] if oracle else [["-f"]])], 1)
    elif name == "chrt":
        # SCHED_IDLE and the idle I/O class can starve a process on a busy machine: not in the oracle
        forms = [one_of(draw, ["-o"], ["--other"], ["-b"], ["--batch"], ["-v", "-o"], *([] if oracle else [["-i"]]))]
        operands = ["0"]
    elif name == "ionice":
        idle = [] if oracle else [["-c", "3"], ["-c3"], ["--class", "3"], ["-t", "-c", "3"]]
        forms = [one_of(draw, ["-c", "2", "-n", "7"], ["-c2"], ["--class", "2"], ["-t", "-c", "2"], *idle)]
    elif name == "taskset":
        forms = options(draw, [["-c"], ["--cpu-list"]], 1)
        operands = ["0" if forms else one_of(draw, "1", "0x1")]
    elif name == "flock":
        forms = options(draw, [["-w", "1"], ["-w1"], ["--timeout=1"], ["-n"], ["-s"], ["-x"], ["-o"], ["-E", "3"]])
        if oracle and not any(f[0] in ("-w", "-w1", "--timeout=1", "-n") for f in forms):
            # flock in flock on one file waits for itself forever: run for real, it must give up
            forms = [["-n"], *forms]
        operands = ["lockfile"]
    else:  # unbuffer
        forms = one_of(draw, [], [["-p"]])
    unknown = False
    if name not in ("time", "command", "nohup", "unbuffer"):
        forms, unknown = with_unknown(draw, forms)
    unsafe = name == "env" and draw(st.integers(0, 9)) == 0
    if unsafe:
        operands.append("LD_PRELOAD=/tmp/x.so")
    head = ["builtin", "exec"] if name == "builtin" else [name]
    return Wrapper(
        name="exec" if name == "builtin" else name, words=(*head, *flat(forms), *operands),
        unknown=unknown or unsafe, replace=replace_string, appends=name == "xargs" and replace_string is None,
        argv0=argv0, login=login or (argv0 or "").startswith("-"), clears=clears, strict=strict,
    )  # fmt: skip


def program_word(draw: Any, name: str) -> str:
    return one_of(draw, name, name, f"/usr/bin/{name}", f"/bin/{name}")


@st.composite
def final_strategy(draw: Any, depth: int, oracle: bool) -> Final:
    kinds = ["program", "program", "alone", "python", "shell"] if depth < 2 else ["program", "alone", "python"]
    kind = draw(st.sampled_from(kinds))
    if kind == "program":
        args = draw(st.lists(st.sampled_from(POOL), max_size=3))
        return Program(words=(program_word(draw, draw(st.sampled_from(PLAIN))), *args))
    if kind == "alone":
        if draw(st.booleans()):
            return Alone(words=("nice",))
        env = flat(options(draw, [["-u", "X"], ["-v"]]))
        return Alone(words=("env", *env, *draw(st.lists(st.just("LANG=C"), max_size=1))))
    if kind == "python":
        forms = options(draw, [["-u"], ["-B"], ["-E"], ["-I"], ["-O"], ["-OO"], ["-b"], ["-q"], ["-s"], ["-S"],
                               ["-W", "ignore"], ["-Wignore"], ["-X", "dev"], ["-Xdev"],
                               ["--check-hash-based-pycs", "never"]], 3)  # fmt: skip
        forms, unknown = with_unknown(draw, forms)
        how = draw(st.sampled_from(["script", "script", "c", "c-attached", "uc", "m", "stdin", "dash", "i"]))
        tail = tuple(draw(st.lists(st.sampled_from(POOL), max_size=2)))
        head: tuple[str, ...] = ("python3", *flat(forms))
        if how == "script":
            return Python(head=(*head, "x.py"), tail=tail, inline=False, unknown=unknown)
        code = {"c": ("-c", "pass"), "c-attached": ("-cpass",), "uc": ("-uc", "pass"), "m": ("-m", "json.tool"),
                "stdin": (), "dash": ("-",), "i": ("-i", "x.py")}[how]  # fmt: skip
        return Python(head=(*head, *code), tail=tail if code else (), inline=True, unknown=unknown)
    name = draw(st.sampled_from(SHELLS))
    posix = [["-e"], ["-u"], ["-f"], ["-o", "errexit"], ["+e"], ["-eu"], ["-o", "nounset"], ["+o", "errexit"]]
    longs = options(draw, [["--norc"], ["--noprofile"], ["-norc"], ["--posix"]], 1) if name == "bash" else []
    bash_short = [["-O", "extglob"], ["+O", "extglob"], ["-B"], ["-P"]] if name == "bash" else []
    shorts, unknown = with_unknown(draw, options(draw, posix + bash_short, 3))
    # A startup file (~/.bashrc, ~/.profile, --rcfile FILE) runs code no word of the line shows:
    # the truth is unknown (the oracle's home holds such files, each running curl).
    if draw(st.integers(0, 5)) == 0:
        startup = one_of(draw, ["-i"], ["-l"], *([["--login"], ["--rcfile", "rc.sh"], ["--init-file", "rc.sh"]]
                                                  if name == "bash" else []))  # fmt: skip
        if startup[0].startswith("--"):
            longs.insert(0, startup)
        else:
            shorts.insert(draw(st.integers(0, len(shorts))), startup)
        unknown = True
    program = program_word(draw, name)
    how = draw(st.sampled_from(["c", "c", "c", "script", "stdin"]))
    if how == "c":
        c_form = draw(st.sampled_from(["-c", "cluster", "+c"]))
        clusters = [f for f in shorts if len(f) == 1 and re.fullmatch(r"[-+][a-zA-Z]+", f[0])]
        if c_form == "cluster" and clusters:
            clusters[0][0] += "c"  # -e -> -ec, +e -> +ec: c joins the cluster whatever its sign
        else:
            shorts.insert(draw(st.integers(0, len(shorts))), ["+c" if c_form == "+c" else "-c"])
        inner = draw(line_strategy(depth + 1, oracle))
        styles = random.Random(draw(st.integers(0, 2**32)))
        text = render(inner, lambda: styles.randrange(5))
        tail = tuple(draw(st.lists(st.sampled_from(POOL), max_size=2)))
        return Shell(head=(program, *flat(longs + shorts)), line=inner, line_text=text, tail=tail, stdin=False,
                     unknown=unknown)  # fmt: skip
    if how == "script":
        tail = ("script.sh", *draw(st.lists(st.sampled_from(POOL), max_size=2)))
        return Shell(head=(program, *flat(longs + shorts)), line=None, line_text="", tail=tail, stdin=False,
                     unknown=unknown)  # fmt: skip
    shorts += draw(st.sampled_from([[], [["-s"]]]))
    return Shell(head=(program, *flat(longs + shorts)), line=None, line_text="", tail=(), stdin=True,
                 unknown=unknown)  # fmt: skip


@st.composite
def segment_strategy(draw: Any, depth: int, oracle: bool) -> Segment:
    assignments = draw(st.lists(st.sampled_from(["LANG=C", "TZ='UTC'", 'LC_ALL="C"']), max_size=2))
    unsafe = draw(st.integers(0, 14)) == 0
    if unsafe:
        assignments.append(one_of(draw, "LD_PRELOAD=/tmp/x.so", "PATH=/tmp", "BASH_ENV=/tmp/x"))
    wrappers = draw(st.lists(wrapper_strategy(oracle), max_size=3))
    final = draw(final_strategy(depth, oracle))
    # Aim at xargs on purpose: its input where a wrapper wants its command, or in a sh -c line.
    replaces = [w.replace for w in wrappers if w.replace is not None]
    if any(w.appends for w in wrappers) and draw(st.integers(0, 2)) == 0:
        final = Alone(words=(one_of(draw, "env", "nice"),))
    elif replaces and draw(st.booleans()):
        inner = Line(segments=(Segment(assignments=(), unsafe=False, wrappers=(), final=Program(words=("ls", replaces[0]))),),
                     operators=())  # fmt: skip
        final = Shell(head=(one_of(draw, "sh", "bash"), "-c"), line=inner, line_text=f"ls {replaces[0]}", tail=(),
                      stdin=False)  # fmt: skip
    return Segment(assignments=tuple(assignments), unsafe=unsafe, wrappers=tuple(wrappers), final=final)


@st.composite
def line_strategy(draw: Any, depth: int, oracle: bool) -> Line:
    segments = draw(st.lists(segment_strategy(depth, oracle), min_size=1, max_size=3 if depth == 0 else 2))
    ops = draw(st.lists(st.sampled_from([";", "&&", "||", "|", "\n"] + ([] if oracle else ["&"])),
                        min_size=len(segments) - 1, max_size=len(segments) - 1))  # fmt: skip
    return Line(segments=tuple(segments), operators=tuple(ops))


@st.composite
def cases(draw: Any, oracle: bool = False) -> tuple[str, Line, frozenset[str]]:
    line = draw(line_strategy(0, oracle))
    styles = random.Random(draw(st.integers(0, 2**32)))  # how each word is quoted
    text = render(line, lambda: styles.randrange(5))
    allowed = draw(st.frozensets(st.sampled_from((*PLAIN, *SHELLS, "python3", "env", "nice", "xargs", "timeout"))))
    return text, line, allowed


def policy_for(allowed: frozenset[str]) -> ExecApprovalPolicy:
    return ExecApprovalPolicy(allowlist=tuple(sorted(paths(name)[0] for name in allowed)))


def is_allowed(name: str, allowed: frozenset[str]) -> bool:
    allowlist = {paths(n)[0] for n in allowed}
    return any(path in allowlist for path in paths(name))


# --- the properties ---------------------------------------------------------------------------------


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_never_allows_a_program_bash_would_run_that_is_not_allowlisted(case: tuple[str, Line, frozenset[str]]) -> None:
    text, line, allowed = case
    truth = line_truth(line)
    result = evaluate(policy_for(allowed), text, resolve)
    safe = not truth.unknown and all(is_allowed(name, allowed) and not inline for name, inline in truth.runs)
    if result.mode is Mode.ALLOW:
        assert safe, (text, truth, result.reason)
    elif safe and not truth.may_refuse:
        # The tables must accept every valid form the grammar produces, or they are vacuous.
        assert result.mode is Mode.ALLOW, (text, truth, result.reason)


# --- the reference model against real shells --------------------------------------------------------

ORACLE_RUN_TIMEOUT_S = 30.0  # one generated line with real processes; generous for a busy machine
_STUB = "#!/bin/sh\necho {name} >> {log}\n"
_PASS = "#!/bin/sh\necho {name} >> {log}\nexec {target} \"$@\"\n"


def _oracle_world(root: Path) -> Path:
    """A PATH directory: stub programs that log their name, and logging shims in front of the real
    shells and wrappers (nothing else is on PATH, so a misread word runs nothing)."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    log = root / "log"
    for name in (*PLAIN, "python3"):
        (bin_dir / name).write_text(_STUB.format(name=name, log=log))
    for name in (*SHELLS, *WRAPPERS):
        target = shutil.which(name, path="/usr/bin:/bin")
        if target is not None:
            (bin_dir / name).write_text(_PASS.format(name=name, log=log, target=target))
    for entry in bin_dir.iterdir():
        entry.chmod(0o755)
    for startup in (".bashrc", ".bash_profile", ".profile", "rc.sh"):
        (root / startup).write_text("curl\n")
    return bin_dir


def _run_for_real(shell: str, text: str, root: Path) -> set[str]:
    bin_dir = _oracle_world(root)
    env = {"PATH": str(bin_dir), "HOME": str(root), "LANG": "C"}
    # A session of its own, so that what the line started is killed with it (a timeout of
    # subprocess.run kills the shell only, and its children would linger).
    process = subprocess.Popen([shell, "-c", text], cwd=root, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        process.wait(timeout=ORACLE_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass  # whatever logged so far ran; the check below is about what ran, not about finishing
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    log = root / "log"
    return set(log.read_text().split()) if log.exists() else set()


@pytest.mark.skipif(shutil.which("bash") is None or not os.path.exists("/bin/sh"), reason="needs bash and /bin/sh")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(oracle=True))
def test_reference_model_matches_real_shells(case: tuple[str, Line, frozenset[str]]) -> None:
    text, line, allowed = case
    truth = line_truth(line)
    decision = evaluate(policy_for(allowed), text, resolve).mode
    for shell in ("/usr/bin/bash", "/bin/sh"):
        root = Path(tempfile.mkdtemp(prefix="pincer-oracle-"))
        try:
            ran = _run_for_real(shell, text, root) - set(WRAPPERS)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if not truth.unknown:
            assert ran <= {name for name, _ in truth.runs}, (shell, text, ran, truth)
        if decision is Mode.ALLOW:
            assert all(is_allowed(name, allowed) for name in ran), (shell, text, ran)
