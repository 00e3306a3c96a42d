"""Exec approvals: may this command line run now, must someone be asked, or is it refused?

OpenClaw's semantics, decided over values only (no I/O: the caller passes a ``resolve`` function that
turns a program word into candidate absolute paths):

- ``security``: ``deny`` refuses every command; ``allowlist`` allows a command only when every
  segment's program matches the allowlist; ``full`` allows everything.
- ``ask``: ``off`` never asks (a miss is refused); ``on-miss`` asks when the allowlist does not match;
  ``always`` asks for every command, whatever the allowlist says.
- ``ask_fallback`` (deny | allowlist | full) decides when a question is needed but nobody can be asked.
- The allowlist holds case-insensitive globs over *resolved binary paths* (``*`` within one path
  segment, ``**`` across segments, ``~`` for the home directory). Entries without a ``/`` are ignored,
  as in OpenClaw: a bare ``python3`` would match whatever is first on PATH.
- Answers: ``allow_once`` runs this command; ``allow_always`` runs it and adds the resolved programs to
  the allowlist; ``deny`` refuses.

What makes the allowlist safe is seeing through wrappers: ``env``, ``nice``, ``nohup``, ``timeout``,
``stdbuf``, ``xargs``, ``exec``/``command`` and shells run with ``-c`` (``sh -c``, ``bash -lc``) are
unwrapped, and the program they would run is what must match. Allowing ``/usr/bin/sh`` allows running
``sh`` on a script file, never ``sh -c "curl ..."``. Inline evaluation (``python -c``, ``node -e``,
``perl -e``, ``ruby -e``, ``php -r``, ``lua -e``, ``osascript -e``) is a miss even for an allowlisted
interpreter unless ``allow_inline_eval`` is set, and ``allow_always`` never persists it.

The shell line is split on ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines; each segment must
match. Anything this module cannot analyse with certainty is a miss, never an allow: command
substitution (``$(...)``, backticks), redirections, subshells and shell keywords, a program name that
needs expansion, environment assignments other than a few harmless locale/terminal ones (an
``LD_PRELOAD=`` prefix would otherwise load code into an allowlisted binary), ``env -S``,
``eval``/``source``, ``busybox``-style multiplexers, unbalanced quotes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pincer.core.effects import Mode
from pincer.core.errors import ConfigError

__all__ = [
    "Security",
    "Ask",
    "Answer",
    "ExecApprovalPolicy",
    "CommandSegment",
    "ExecEvaluation",
    "Resolver",
    "ShellSyntaxError",
    "analyze_command",
    "analyze_argv",
    "evaluate",
    "evaluate_argv",
    "fallback_allows",
    "apply_answer",
    "match_pattern",
    "split_shell",
]

Resolver = Callable[[str], Sequence[str]]
"""Program word (``sh``, ``/usr/bin/env``, ``./x``) -> candidate absolute paths; empty if not found."""

MAX_UNWRAP_DEPTH = 16


class Security(StrEnum):
    DENY = "deny"
    ALLOWLIST = "allowlist"
    FULL = "full"


class Ask(StrEnum):
    OFF = "off"
    ON_MISS = "on-miss"
    ALWAYS = "always"


class Answer(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecApprovalPolicy:
    """The exec approval settings of one agent/session scope. Default: allowlist, ask on miss, deny
    when nobody can be asked, nothing allowlisted."""

    security: Security = Security.ALLOWLIST
    ask: Ask = Ask.ON_MISS
    ask_fallback: Security = Security.DENY
    allowlist: tuple[str, ...] = ()
    allow_inline_eval: bool = False

    @classmethod
    def from_json(cls, data: object, *, agent: str = "main", source: str = "exec-approvals") -> ExecApprovalPolicy:
        """Read a flat policy (``security``, ``ask``, ``askFallback``/``ask_fallback``, ``allowlist``,
        ``allowInlineEval``) or OpenClaw's ``exec-approvals.json`` (``defaults`` overlaid by
        ``agents.<agent>``; allowlist entries as strings or ``{"pattern": ...}``). Unknown keys are
        ignored; a wrong value raises ConfigError naming the key."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected an object, got {type(data).__name__}")
        merged: dict[str, Any] = {}
        if "defaults" in data or "agents" in data:
            for part, label in ((data.get("defaults"), "defaults"), (_agent(data, agent, source), f"agents.{agent}")):
                if part is None:
                    continue
                if not isinstance(part, Mapping):
                    raise ConfigError(f"{source}: {label}: expected an object")
                merged.update(part)
        else:
            merged.update(data)
        security = _enum(Security, merged.get("security", Security.ALLOWLIST.value), f"{source}: security")
        ask = _enum(Ask, merged.get("ask", Ask.ON_MISS.value), f"{source}: ask")
        fallback_raw = merged.get("askFallback", merged.get("ask_fallback", Security.DENY.value))
        fallback = _enum(Security, fallback_raw, f"{source}: askFallback")
        inline = merged.get("allowInlineEval", merged.get("allow_inline_eval", False))
        if not isinstance(inline, bool):
            raise ConfigError(f"{source}: allowInlineEval: expected true or false")
        return cls(
            security=security,
            ask=ask,
            ask_fallback=fallback,
            allowlist=_patterns(merged.get("allowlist", []), source),
            allow_inline_eval=inline,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "security": self.security.value,
            "ask": self.ask.value,
            "askFallback": self.ask_fallback.value,
            "allowlist": list(self.allowlist),
            "allowInlineEval": self.allow_inline_eval,
        }


def _agent(data: Mapping[str, Any], agent: str, source: str) -> object:
    agents = data.get("agents", {})
    if agents is None:
        return None
    if not isinstance(agents, Mapping):
        raise ConfigError(f"{source}: agents: expected an object mapping agent ids to policies")
    return agents.get(agent)


def _enum(kind: type[StrEnum], value: object, where: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = " | ".join(v.value for v in kind)
        raise ConfigError(f"{where}: {value!r} is not one of {allowed}", hint=f"use one of {allowed}") from None


def _patterns(value: object, source: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{source}: allowlist: expected a list of patterns")
    patterns: list[str] = []
    for index, entry in enumerate(value):
        pattern = entry.get("pattern") if isinstance(entry, Mapping) else entry
        if not isinstance(pattern, str) or not pattern.strip() or "\0" in pattern:
            raise ConfigError(
                f"{source}: allowlist.{index}: expected a path pattern string",
                hint='e.g. "/usr/bin/rg" or "~/.local/bin/*"',
            )
        patterns.append(pattern.strip())
    return tuple(patterns)


# --- matching ----------------------------------------------------------------------------------


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if pattern.startswith("/", i):  # "a/**/b" also matches "a/b"
                out[-1] = "(?:.*/)?"
                i += 1
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def match_pattern(pattern: str, path: str, *, home: str | None = None) -> bool:
    """Whether one allowlist glob matches one resolved absolute path."""
    if "/" not in pattern:
        return False  # basename-only entries are ignored on purpose
    if pattern.startswith("~"):
        if home is None:
            return False
        pattern = home.rstrip("/") + pattern[1:]
    return _glob_regex(pattern).fullmatch(path) is not None


# --- the shell lexer -----------------------------------------------------------------------------


class ShellSyntaxError(Exception):
    """The line is not something this module can read; callers treat it as a miss."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Word:
    text: str
    expands: bool = False  # unquoted $VAR, ${...}, ~, glob characters: the value is not known
    substitution: bool = False  # $(...) or `...`: runs code


@dataclass(frozen=True, kw_only=True, slots=True)
class _Op:
    text: str


_OPERATORS = ("&&", "||", ";;", ">>", "<<", "<&", ">&", "<>", ">|", "&>", ";", "&", "|", "(", ")", "<", ">")
_SEPARATORS = frozenset({"&&", "||", ";", "&", "|", ";;", "\n"})


def split_shell(line: str) -> list[_Word | _Op]:
    """Tokenise a POSIX shell line into words and operators; raises ShellSyntaxError."""
    tokens: list[_Word | _Op] = []
    buf: list[str] = []
    in_word = expands = substitution = False
    i, n = 0, len(line)

    def flush() -> None:
        nonlocal in_word, expands, substitution
        if in_word:
            tokens.append(_Word(text="".join(buf), expands=expands, substitution=substitution))
        buf.clear()
        in_word = expands = substitution = False

    while i < n:
        ch = line[i]
        if ch in " \t":
            flush()
            i += 1
        elif ch == "\n":
            flush()
            tokens.append(_Op(text="\n"))
            i += 1
        elif ch == "#" and not in_word:
            end = line.find("\n", i)
            i = n if end < 0 else end
        elif ch == "\\":
            if i + 1 >= n:
                raise ShellSyntaxError("the line ends with a backslash")
            if line[i + 1] != "\n":
                buf.append(line[i + 1])
                in_word = True
            i += 2
        elif ch == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated single quote")
            buf.append(line[i + 1 : end])
            in_word = True
            i = end + 1
        elif ch == '"':
            i += 1
            in_word = True
            while True:
                if i >= n:
                    raise ShellSyntaxError("unterminated double quote")
                c = line[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and line[i + 1] in '$`"\\\n':
                    if line[i + 1] != "\n":
                        buf.append(line[i + 1])
                    i += 2
                    continue
                if c == "`" or line.startswith("$(", i):
                    substitution = True
                elif c == "$" and i + 1 < n and (line[i + 1].isalnum() or line[i + 1] in "_{@*#?$!-"):
                    expands = True
                buf.append(c)
                i += 1
        elif ch == "`" or line.startswith("$(", i):
            substitution = True
            in_word = True
            buf.append(ch)
            i += 1
        elif ch == "$":
            nxt = line[i + 1] if i + 1 < n else ""
            if nxt.isalnum() or nxt in "_{@*#?$!-'\"":
                expands = True  # parameters, and $'..' / $".." quoting we do not model
            buf.append(ch)
            in_word = True
            i += 1
        elif ch in "&|;<>()":
            flush()
            op = next(o for o in _OPERATORS if line.startswith(o, i))
            tokens.append(_Op(text=op))
            i += len(op)
        else:
            if ch in "*?[{" or (ch == "~" and not in_word):
                expands = True
            buf.append(ch)
            in_word = True
            i += 1
    flush()
    return tokens


# --- analysis ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandSegment:
    """One program the command line would run, after seeing through wrappers."""

    argv: tuple[str, ...]
    wrappers: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()  # resolved absolute paths of argv[0]
    matched: str | None = None  # the allowlist pattern that matched
    inline_eval: bool = False
    problem: str | None = None  # why this segment can never match the allowlist

    @property
    def executable(self) -> str | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "wrappers": list(self.wrappers),
            "executable": self.executable,
            "matched": self.matched,
            "inline_eval": self.inline_eval,
            "problem": self.problem,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecEvaluation:
    """What the policy says about one command line. ``mode`` is allow, ask or deny."""

    command: str
    mode: Mode
    reason: str
    segments: tuple[CommandSegment, ...] = ()
    allowlist_satisfied: bool = False
    persistable: tuple[str, ...] = field(default=())  # what allow_always would add to the allowlist

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "mode": self.mode.value,
            "reason": self.reason,
            "allowlist_satisfied": self.allowlist_satisfied,
            "segments": [s.to_dict() for s in self.segments],
            "persistable": list(self.persistable),
        }


_SAFE_ENV = re.compile(r"^(TERM|LANG|LANGUAGE|LC_[A-Z]+|COLORTERM|NO_COLOR|FORCE_COLOR|TZ|COLUMNS|LINES)$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish"})
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function",
     "select", "{", "}", "!", "[[", "]]", "time", "coproc"}
)
_UNANALYSED = frozenset({"eval", ".", "source", "busybox", "toybox", "alias", "trap", "builtin"})
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?$")
_NODE = re.compile(r"^(node|nodejs|bun|deno)$")
_E_FLAG = {"perl": "eE", "ruby": "e", "lua": "e", "osascript": "e", "php": "r"}


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _program_name(argv0: str, candidates: Sequence[str]) -> str:
    # The word decides for a path ("/usr/bin/env"); a resolved symlink target would hide the wrapper.
    return _base(argv0)


def _inline_eval(name: str, args: Sequence[str]) -> bool:
    lua = re.match(r"^lua(\d+(\.\d+)*)?$", name) is not None
    letters = _E_FLAG.get("lua" if lua else re.sub(r"\d+(\.\d+)*$", "", name))
    python, node = _PYTHON.match(name) is not None, _NODE.match(name) is not None
    if not (letters or python or node):
        return False
    for arg in args:
        if arg == "--" or not arg.startswith("-") or arg == "-":
            return False
        if node and (arg in ("--eval", "--print") or arg.startswith(("--eval=", "--print="))):
            return True
        if arg.startswith("--"):
            continue
        cluster = arg[1:]
        if python:
            for letter in cluster:
                if letter == "c":
                    return True
                if letter in "mWX":
                    break  # the rest of the cluster is that option's value
        elif node:
            if any(letter in "ep" for letter in cluster):
                return True
        elif letters and any(letter in letters for letter in cluster):
            return True
    return False


def _skip_options(
    args: list[str], with_value: set[str], *, is_option: Callable[[str], bool] = lambda a: a.startswith("-")
) -> int:
    """Index of the first operand: past options (two words for those in ``with_value``) and ``--``."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1
        if a in with_value:
            i += 2
        elif is_option(a):
            i += 1
        else:
            break
    return i


def _unwrap_options(
    name: str, args: list[str]
) -> tuple[list[str] | None, str | None, list[str]]:
    """For one wrapper: (the wrapped argv or None when it runs nothing, a problem, assignments)."""
    i, assignments = 0, []
    with_value: set[str]
    if name == "env":
        while i < len(args):
            a = args[i]
            if a == "--":
                i += 1
                break
            if a in ("-S", "--split-string") or a.startswith(("-S", "--split-string=")):
                return None, "env -S splits a string into a command line that is not analysed", []
            if a in ("-u", "--unset", "-C", "--chdir"):
                i += 2
                continue
            if a.startswith("-") and a != "-":
                i += 1
                continue
            break
        while i < len(args) and _ASSIGNMENT.match(args[i]):
            assignments.append(args[i])
            i += 1
        return (args[i:] or None), None, assignments
    if name == "nice":
        i = _skip_options(args, {"-n", "--adjustment"})
        return (args[i:] or None), None, []
    if name == "nohup":
        if args and args[0] == "--":
            i = 1
        return (args[i:] or None), None, []
    if name == "stdbuf":
        i = _skip_options(args, {"-i", "-o", "-e", "--input", "--output", "--error"})
        return (args[i:] or None), None, []
    if name == "timeout":
        # A word such as "-5" is read as the duration, not as an option.
        i = _skip_options(args, {"-s", "--signal", "-k", "--kill-after"},
                          is_option=lambda a: a.startswith("-") and not a[1:2].isdigit())  # fmt: skip
        i += 1  # the duration
        if i > len(args):
            return None, None, []
        return (args[i:] or None), None, []
    if name == "xargs":
        with_value = {"-I", "-n", "-L", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter", "--max-args",
                      "--max-procs", "--max-lines", "--max-chars", "--replace", "--eof", "--process-slot-var"}
        flags = {"-0", "-r", "-t", "-p", "-x", "-o", "--null", "--no-run-if-empty", "--verbose", "--interactive",
                 "--exit", "--open-tty", "-l", "-i", "-e"}
        while i < len(args):
            a = args[i]
            if a == "--":
                i += 1
                break
            if a in with_value:
                i += 2
            elif a in flags or (a.startswith("--") and "=" in a) or (a.startswith("-") and a[:2] in
                                                                     {"-I", "-n", "-L", "-P", "-s", "-d", "-E", "-a", "-i", "-l", "-e"}):
                i += 1
            elif a.startswith("-"):
                return None, f"xargs option {a} is not analysed", []
            else:
                break
        return (args[i:] or ["echo"]), None, []
    if name in ("exec", "command"):
        while i < len(args) and args[i].startswith("-"):
            if args[i] in ("-v", "-V"):
                return None, f"{name} {args[i]} is not analysed", []
            i += 1
        return (args[i:] or None), None, []
    raise AssertionError(name)  # pragma: no cover - only called for known wrappers


_WRAPPERS = frozenset({"env", "nice", "nohup", "stdbuf", "timeout", "xargs", "exec", "command"})


def _shell_script(args: list[str]) -> tuple[str | None, bool]:
    """For ``sh ARGS``: (the -c script, whether -c was given)."""
    i = 0
    has_c = False
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if a.startswith("--"):
            i += 1
            continue
        if a.startswith(("-", "+")) and len(a) > 1:
            if "c" in a[1:] and a[0] == "-":
                has_c = True
            i += 1
            continue
        break
    if not has_c:
        return None, False
    return (args[i] if i < len(args) else None), True


def analyze_argv(
    argv: Sequence[str], resolve: Resolver, *, wrappers: tuple[str, ...] = (), depth: int = 0
) -> list[CommandSegment]:
    """The programs one argv would run, wrappers seen through."""
    argv = list(argv)
    if depth > MAX_UNWRAP_DEPTH:
        return [CommandSegment(argv=tuple(argv), wrappers=wrappers, problem="wrappers nest too deep")]
    if not argv:
        return [CommandSegment(argv=(), wrappers=wrappers, problem="empty command")]
    word = argv[0]
    candidates = tuple(resolve(word))
    name = _program_name(word, candidates)
    if name in _UNANALYSED:
        return [CommandSegment(argv=tuple(argv), wrappers=wrappers, candidates=candidates,
                               problem=f"{name} runs code that is not analysed")]
    if name in _WRAPPERS:
        inner, problem, assignments = _unwrap_options(name, argv[1:])
        bad_env = [a.split("=", 1)[0] for a in assignments if not _SAFE_ENV.match(a.split("=", 1)[0])]
        if problem is None and bad_env:
            problem = f"sets {', '.join(bad_env)}, which can change what the program runs"
        if problem is not None:
            return [CommandSegment(argv=tuple(argv), wrappers=wrappers, candidates=candidates, problem=problem)]
        if inner is not None:
            return analyze_argv(inner, resolve, wrappers=(*wrappers, name), depth=depth + 1)
    elif name in _SHELLS:
        script, has_c = _shell_script(argv[1:])
        if has_c:
            if script is None:
                return [CommandSegment(argv=tuple(argv), wrappers=wrappers, candidates=candidates,
                                       problem=f"{name} -c without a command")]
            return _analyze_line(script, resolve, wrappers=(*wrappers, f"{name} -c"), depth=depth + 1)
    return [CommandSegment(argv=tuple(argv), wrappers=wrappers, candidates=candidates,
                           inline_eval=_inline_eval(name, argv[1:]))]


def _analyze_line(line: str, resolve: Resolver, *, wrappers: tuple[str, ...], depth: int) -> list[CommandSegment]:
    try:
        tokens = split_shell(line)
    except ShellSyntaxError as exc:
        return [CommandSegment(argv=(line,), wrappers=wrappers, problem=f"cannot parse the shell line: {exc}")]
    segments: list[CommandSegment] = []
    current: list[_Word] = []
    problem: str | None = None

    def close() -> None:
        nonlocal current, problem
        if problem is not None:
            segments.append(CommandSegment(argv=tuple(w.text for w in current), wrappers=wrappers, problem=problem))
        elif current:
            segments.extend(_analyze_words(current, resolve, wrappers=wrappers, depth=depth))
        current, problem = [], None

    for token in tokens:
        if isinstance(token, _Op):
            if token.text in _SEPARATORS:
                close()
            elif token.text in ("(", ")"):
                problem = problem or "subshells are not analysed"
            else:
                problem = problem or f"redirection {token.text!r} is not allowed in allowlist mode"
        else:
            if token.substitution:
                problem = problem or "command substitution runs code that is not analysed"
            current.append(token)
    close()
    if not segments:
        segments.append(CommandSegment(argv=(), wrappers=wrappers, problem="empty command"))
    return segments


def _analyze_words(words: list[_Word], resolve: Resolver, *, wrappers: tuple[str, ...], depth: int) -> list[CommandSegment]:
    i = 0
    while i < len(words) and not words[i].expands and _ASSIGNMENT.match(words[i].text):
        variable = words[i].text.split("=", 1)[0]
        if not _SAFE_ENV.match(variable):
            return [CommandSegment(argv=tuple(w.text for w in words), wrappers=wrappers,
                                   problem=f"sets {variable}, which can change what the program runs")]
        i += 1
    rest = words[i:]
    if not rest:
        return [CommandSegment(argv=tuple(w.text for w in words), wrappers=wrappers, problem="only assignments")]
    head = rest[0]
    if head.expands:
        return [CommandSegment(argv=tuple(w.text for w in rest), wrappers=wrappers,
                               problem="the program name needs shell expansion")]
    if head.text in _KEYWORDS:
        return [CommandSegment(argv=tuple(w.text for w in rest), wrappers=wrappers,
                               problem=f"shell syntax {head.text!r} is not analysed")]
    return analyze_argv([w.text for w in rest], resolve, wrappers=wrappers, depth=depth)


def analyze_command(command: str, resolve: Resolver) -> tuple[CommandSegment, ...]:
    """Split a shell command line into the programs it would run."""
    return tuple(_analyze_line(command, resolve, wrappers=(), depth=0))


# --- decisions -----------------------------------------------------------------------------------


def _match(segment: CommandSegment, policy: ExecApprovalPolicy, home: str | None) -> CommandSegment:
    if segment.problem is not None or not segment.candidates:
        return segment
    for pattern in policy.allowlist:
        if any(match_pattern(pattern, path, home=home) for path in segment.candidates):
            return replace(segment, matched=pattern)
    return segment


def _miss_reason(segment: CommandSegment, policy: ExecApprovalPolicy) -> str | None:
    shown = " ".join(segment.argv)[:80]
    if segment.problem is not None:
        return f"{shown!r}: {segment.problem}"
    if not segment.candidates:
        return f"{shown!r}: program {segment.argv[0]!r} not found"
    if segment.matched is None:
        return f"{shown!r}: {segment.executable} is not in the allowlist"
    if segment.inline_eval and not policy.allow_inline_eval:
        return f"{shown!r}: inline evaluation needs approval even for an allowlisted interpreter"
    return None


def _evaluate_segments(
    command: str, segments: Sequence[CommandSegment], policy: ExecApprovalPolicy, home: str | None
) -> ExecEvaluation:
    matched = tuple(_match(s, policy, home) for s in segments)
    misses = [r for r in (_miss_reason(s, policy) for s in matched) if r is not None]
    satisfied = not misses
    persistable: tuple[str, ...] = ()
    if all(s.problem is None and s.candidates and not s.inline_eval for s in matched):
        persistable = tuple(dict.fromkeys(s.candidates[0] for s in matched if s.matched is None))

    def result(mode: Mode, reason: str) -> ExecEvaluation:
        return ExecEvaluation(command=command, mode=mode, reason=reason, segments=matched,
                              allowlist_satisfied=satisfied, persistable=persistable)

    if policy.security is Security.DENY:
        return result(Mode.DENY, "exec is disabled (security=deny)")
    if policy.ask is Ask.ALWAYS:
        return result(Mode.ASK, "every command needs approval (ask=always)")
    if policy.security is Security.FULL:
        return result(Mode.ALLOW, "security=full allows every command")
    if satisfied:
        return result(Mode.ALLOW, "every program is in the allowlist")
    if policy.ask is Ask.OFF:
        return result(Mode.DENY, "allowlist miss and ask=off: " + "; ".join(misses))
    return result(Mode.ASK, "allowlist miss: " + "; ".join(misses))


def evaluate(policy: ExecApprovalPolicy, command: str, resolve: Resolver, *, home: str | None = None) -> ExecEvaluation:
    """Decide over a shell command line (what the ``exec`` tool runs with ``sh -c``)."""
    return _evaluate_segments(command, analyze_command(command, resolve), policy, home)


def evaluate_argv(
    policy: ExecApprovalPolicy, argv: Sequence[str], resolve: Resolver, *, home: str | None = None
) -> ExecEvaluation:
    """Decide over an argv that runs without a shell."""
    return _evaluate_segments(" ".join(argv), analyze_argv(argv, resolve), policy, home)


def fallback_allows(policy: ExecApprovalPolicy, evaluation: ExecEvaluation) -> bool:
    """A question was needed but nobody can answer: ``ask_fallback`` decides."""
    if policy.ask_fallback is Security.FULL:
        return True
    if policy.ask_fallback is Security.ALLOWLIST:
        return evaluation.allowlist_satisfied
    return False


def apply_answer(
    policy: ExecApprovalPolicy, evaluation: ExecEvaluation, answer: Answer | str
) -> tuple[bool, ExecApprovalPolicy]:
    """(may the command run, the policy afterwards). ``allow_always`` adds the resolved programs;
    never wrappers, never an inline-eval interpreter, nothing when a program could not be resolved."""
    answer = Answer(answer)
    if answer is Answer.DENY:
        return False, policy
    if answer is Answer.ALLOW_ONCE or not evaluation.persistable:
        return True, policy
    added = tuple(p for p in evaluation.persistable if p not in policy.allowlist)
    return True, replace(policy, allowlist=policy.allowlist + added)
