"""Command analysis: the programs a shell command line would really run, wrappers seen through.

Pure: the caller passes a ``resolve`` function that turns a program word into candidate absolute
paths; nothing here reads the file system.

What is seen through (each with the option table of ``command_options``):

- wrappers: ``env``, ``nice``, ``nohup``, ``timeout``, ``stdbuf``, ``xargs``, ``setsid``, ``chrt``,
  ``ionice``, ``taskset``, ``flock``, ``unbuffer``, ``time`` and the builtins ``exec``,
  ``command``, ``builtin``. A wrapper is transparent: the program it runs is what must match.
  ``env -i`` / ``env -u PATH`` / ``command -p`` look the program up in the default path
  (``/bin:/usr/bin``), as execvp does without PATH.
- shells (``sh``, ``bash``, ``dash``, ``zsh``, ``ksh``, ...) with ``-c``: the shell itself is a
  program to allow, and so is every program of its ``-c`` line, analysed like the top line.
- interpreters (``python``, ``node``, ``perl``, ``ruby``, ``php``, ``lua``, ``osascript``,
  ``deno``, ``bun``): inline code (``-c``, ``-e``, ``-m``, ``-r``, code from standard input or
  ``/dev/stdin``) marks the segment ``inline_eval``.

What fails closed (a segment with a ``problem``, never allowed): an option a table does not
know; a word the analyser must read (a wrapper's options and operands, the program, a shell's
``-c`` line, an interpreter's options and script) whose value is only known when the line runs
(shell expansion, or xargs input: ``xargs -I{}`` in such a word, or xargs appending its input
where a wrapper still expects its command); wrappers that change user or namespace (``sudo``,
``doas``, ``nsenter``, ``unshare``, ``chroot``, ...), builtins that change what later commands
run (``alias``, ``hash``, ``export``, ``set``, ``read``, ``printf -v``, ...), ``eval`` and
``source``, multiplexers (``busybox``); a program whose names disagree on what it is (a symlink
``py -> bash``, ``exec -a python3 bash``); command substitution, redirections, subshells and
shell keywords; environment assignments other than a few harmless locale/terminal ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pincer.policy.command_options import (
    INTERPRETER_OPTIONS,
    REFUSED_PROGRAMS,
    SHELL_DEFAULT_PATH,
    SHELL_OPTIONS,
    WRAPPER_OPERANDS,
    WRAPPER_OPTIONS,
    OptionTable,
    ParsedOptions,
    parse_options,
)
from pincer.policy.shell_words import SEPARATORS, Operator, ShellSyntaxError, Word, split_shell

__all__ = ["CommandSegment", "Resolver", "MAX_UNWRAP_DEPTH", "analyze_command", "analyze_argv"]

Resolver = Callable[[str], Sequence[str]]
"""Program word (``sh``, ``/usr/bin/env``, ``./x``) -> candidate absolute paths; empty if not found."""

MAX_UNWRAP_DEPTH = 16
EXECVP_DEFAULT_PATH = ("/bin", "/usr/bin")  # glibc's execvp when PATH is unset (confstr _CS_PATH)

_SAFE_ENV = re.compile(r"^(TERM|LANG|LANGUAGE|LC_[A-Z]+|COLORTERM|NO_COLOR|FORCE_COLOR|TZ|COLUMNS|LINES)$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function",
     "select", "{", "}", "!", "[[", "]]", "coproc"}
)  # fmt: skip
_SHELL_NAME = re.compile(r"^(sh|bash|rbash|dash|zsh|ksh|ksh93|mksh|lksh|pdksh|ash|yash|posh|fish)(\d[\w.]*)?$")
_SHELL_TABLE = {"sh": "sh", "bash": "bash", "rbash": "bash", "dash": "dash", "zsh": "zsh", "fish": "fish"}
_INTERPRETER_NAME = re.compile(r"^(python|pypy|nodejs|node|perl|ruby|php|luajit|lua|osascript|deno|bun)(\d[\w.+-]*)?$")
_INTERPRETER_FAMILY = {"pypy": "python", "nodejs": "node"}
_MULTIPLEXER = re.compile(r"^(busybox|toybox|coreutils)")  # one binary that runs the program argv[0] names
_STDIN = re.compile(r"^(-|/dev/stdin|/dev/fd/\d+|/proc/(self|thread-self|\d+)/fd/\d+)$")
_PERL_MODULE = re.compile(r"^-?[A-Za-z_]\w*(::\w+)*(=[\w,:.\-]*)?$")
_BUILTIN_WRAPPERS = frozenset({"exec", "command", "builtin"})


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
class _Arg:
    text: str
    opaque: str | None = None  # why the value is not known before the line runs


@dataclass(frozen=True, kw_only=True, slots=True)
class _Context:
    resolve: Resolver
    wrappers: tuple[str, ...] = ()
    depth: int = 0
    search: tuple[str, ...] | None = None  # where a bare program name is looked up; None: the resolver's PATH
    env_cleared: bool = False  # PATH is not in the environment this program runs with
    appends: bool = False  # xargs appends its input after these words
    argv0: str | None = None  # exec -a NAME
    login: bool = False  # exec -l, or exec -a -NAME: argv[0] begins with a dash, which makes a shell a login shell


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _texts(args: Sequence[_Arg]) -> tuple[str, ...]:
    return tuple(a.text for a in args)


def _lookup(word: str, ctx: _Context) -> tuple[str, ...]:
    if ctx.search is None or "/" in word:
        return tuple(ctx.resolve(word))
    for directory in ctx.search:
        found = tuple(ctx.resolve(f"{directory}/{word}"))
        if found:
            return found
    return ()


# --- what a program is ----------------------------------------------------------------------------


def _classify(name: str) -> tuple[str, str] | None:
    """(kind, table) for one program name: refused / wrapper / shell / interpreter, or None."""
    if name in REFUSED_PROGRAMS:
        return "refused", name
    if name in WRAPPER_OPTIONS:
        return "wrapper", name
    shell = _SHELL_NAME.match(name)
    if shell:
        return "shell", _SHELL_TABLE.get(shell.group(1), "posix")
    interpreter = _INTERPRETER_NAME.match(name)
    if interpreter:
        base = interpreter.group(1)
        return "interpreter", _INTERPRETER_FAMILY.get(base, base)
    return None


def _what(word: str, candidates: Sequence[str], argv0: str | None) -> tuple[tuple[str, str] | None, str | None]:
    """What the program is, by every name it goes by: the word, ``exec -a``'s name, the resolved
    paths (a symlink ``rbash -> bash`` is a shell). Returns ((kind, table) or None, problem)."""
    # Lower case: a case-insensitive file system runs /usr/bin/ENV as env; elsewhere it only errs strict.
    called = [_base(argv0).lower()] if argv0 is not None else []
    called.append(_base(word).lower())
    for name in called:
        if _MULTIPLEXER.match(name):
            return None, f"{name} runs many programs under one name, which the analyser does not follow"
    # A multiplexer binary runs the program its argv[0] names, so only the called names count then.
    real = [_base(c).lower() for c in candidates]
    multiplexed = any(_MULTIPLEXER.match(r) for r in real)
    if argv0 is not None and not multiplexed:
        # Any other program is what it is, whatever exec -a calls it: a name that makes it look
        # like a wrapper or a shell it is not would have the analyser read the wrong words as
        # the command (exec -a env cat id runs cat, not id).
        renamed = _classify(_base(argv0).lower())
        actual = {_family(k) for k in (_classify(n) for n in [_base(word).lower(), *real]) if k is not None}
        if renamed is not None and _family(renamed) not in actual:
            return None, f"exec -a calls {_base(word)!r} {_base(argv0)!r}, a name for what it is not"
    names = called if multiplexed else [*called, *real]
    kinds: dict[tuple[str, str], str] = {}
    for name in names:
        kind = _classify(name)
        if kind is not None:
            kinds.setdefault(kind, name)
    if not kinds:
        return None, None
    families = {_family(k) for k in kinds}
    if len(families) > 1:
        shown = ", ".join(f"{name} ({kind})" for (kind, _), name in kinds.items())
        return None, f"the program goes by names that disagree on what it is: {shown}"
    return next(iter(kinds)), None


def _family(kind: tuple[str, str]) -> tuple[str, str]:
    """Shells are one family whatever their table; other kinds are told apart by table too."""
    return (kind[0], "" if kind[0] == "shell" else kind[1])


# --- segments -------------------------------------------------------------------------------------


def _segment(args: Sequence[_Arg], ctx: _Context, candidates: Sequence[str] = (), **kwargs: Any) -> CommandSegment:
    return CommandSegment(argv=_texts(args), wrappers=ctx.wrappers, candidates=tuple(candidates), **kwargs)


def _opaque(args: Sequence[_Arg], what: str) -> str | None:
    for arg in args:
        if arg.opaque is not None:
            return f"{what} {arg.text!r} {arg.opaque}, so what runs is not known"
    return None


def analyze_argv(
    argv: Sequence[str], resolve: Resolver, *, wrappers: tuple[str, ...] = (), depth: int = 0
) -> list[CommandSegment]:
    """The programs one argv would run (without a shell), wrappers seen through."""
    ctx = _Context(resolve=resolve, wrappers=wrappers, depth=depth)
    return _analyze_args([_Arg(text=a) for a in argv], ctx)


def _analyze_args(args: list[_Arg], ctx: _Context) -> list[CommandSegment]:
    if ctx.depth > MAX_UNWRAP_DEPTH:
        return [_segment(args, ctx, problem="wrappers nest too deep")]
    if not args:
        return [_segment(args, ctx, problem="empty command")]
    head, rest = args[0], args[1:]
    if head.opaque is not None:
        return [_segment(args, ctx, problem=f"the program name {head.text!r} {head.opaque}")]
    candidates = _lookup(head.text, ctx)
    what, problem = _what(head.text, candidates, ctx.argv0)
    if problem is not None:
        return [_segment(args, ctx, candidates, problem=problem)]
    if what is None:
        return [_plain(args, ctx, candidates)]
    kind, table = what
    if kind == "refused":
        return [_segment(args, ctx, candidates, problem=REFUSED_PROGRAMS[table])]
    if kind == "wrapper":
        return _wrapper(table, args, ctx, candidates)
    if kind == "shell":
        return _shell(table, args, ctx, candidates)
    inline, problem = _interpreter(table, rest)
    return [_segment(args, ctx, candidates, inline_eval=inline, problem=problem)]


def _plain(args: list[_Arg], ctx: _Context, candidates: Sequence[str]) -> CommandSegment:
    if _base(args[0].text) == "printf" and len(args) > 1 and args[1].text.startswith("-v"):
        return _segment(args, ctx, candidates, problem="printf -v assigns a shell variable (PATH, IFS, ...)")
    return _segment(args, ctx, candidates)


# --- wrappers -------------------------------------------------------------------------------------


def _wrapper(name: str, args: list[_Arg], ctx: _Context, candidates: Sequence[str]) -> list[CommandSegment]:
    table = WRAPPER_OPTIONS[name]
    rest = args[1:]
    parsed = parse_options(name, table, _texts(rest))

    def refuse(problem: str) -> list[CommandSegment]:
        return [_segment(args, ctx, candidates, problem=problem)]

    def runs_itself() -> list[CommandSegment]:
        # The wrapper runs no command of ours: it is the program (env alone prints the environment).
        if ctx.appends:
            return refuse(f"xargs would append its input where {name} expects the command to run")
        if name in _BUILTIN_WRAPPERS:
            return refuse(f"{' '.join(_texts(args))[:60]!r} runs no program; only programs can be allowlisted")
        return [_plain(args, ctx, candidates)]

    problem = parsed.problem or _refused(table, parsed)
    if problem is not None:
        return refuse(problem)
    if any(o.key in table.runs_nothing for o in parsed.options):
        return runs_itself()
    i = parsed.end
    # A binary wrapper execvp()s the command with the environment it was given; a builtin is
    # the shell itself looking the command up.
    search = ctx.search if name in _BUILTIN_WRAPPERS else (EXECVP_DEFAULT_PATH if ctx.env_cleared else None)
    env_cleared, argv0, appends, replace_string = ctx.env_cleared, None, ctx.appends, None
    login = False
    if name == "env":
        if i < len(rest) and rest[i].text == "-":
            i += 1
            env_cleared = True
        if parsed.has("-i") or "PATH" in parsed.values("-u"):
            env_cleared = True
        while i < len(rest) and _ASSIGNMENT.match(rest[i].text):
            variable = rest[i].text.split("=", 1)[0]
            if not _SAFE_ENV.match(variable):
                return refuse(f"sets {variable}, which can change what the program runs")
            if rest[i].opaque is not None:
                return refuse(f"env assignment {rest[i].text!r} {rest[i].opaque}")
            i += 1
        if env_cleared:
            search = EXECVP_DEFAULT_PATH
    elif name == "exec":
        argv0 = ([None, *parsed.values("-a")])[-1]  # the last -a wins
        env_cleared = env_cleared or parsed.has("-c")
        login = parsed.has("-l") or (argv0 or "").startswith("-")
    elif name == "command" and parsed.has("-p"):
        search = EXECVP_DEFAULT_PATH
    elif name == "time" and ctx.env_cleared:
        return refuse("time under a cleared PATH looks the command up in a way the analyser does not follow")
    elif name == "xargs":
        for option in parsed.options:
            if option.key == "-I":
                replace_string = option.value
            elif option.key == "-i":
                replace_string = option.value or "{}"
        # A later -L/-l cancels -I (GNU xargs 4.9: "ignoring previous --replace value"), and
        # versions differ on -n: with any of them, the input may be appended as well. An outer
        # xargs that appends still appends after this one's command: its -I changes nothing there.
        appends = ctx.appends or replace_string is None or parsed.has("-L", "-l", "-n")
    for operand in WRAPPER_OPERANDS.get(name, ()):
        if i >= len(rest):
            return runs_itself()
        if name == "chrt" and not re.fullmatch(r"-?\d+", rest[i].text):
            return refuse(f"chrt expects a {operand} number before the command, not {rest[i].text!r}")
        i += 1
    problem = _opaque(rest[:i], f"{name} argument")
    if problem is not None:
        return refuse(problem)
    inner = rest[i:]
    if name == "flock" and inner and inner[0].text in ("-c", "--command"):
        return refuse("flock -c runs a shell line through $SHELL; write flock FILE sh -c '...' instead")
    if not inner:
        if name != "xargs":
            return runs_itself()
        inner = [_Arg(text="echo")]  # what xargs runs without a command
    if replace_string is not None:
        inner = [
            replace(a, opaque=a.opaque or f"holds xargs's replace string {replace_string!r} (xargs input)")
            if replace_string in a.text else a
            for a in inner
        ]  # fmt: skip
    inner_ctx = replace(
        ctx, wrappers=(*ctx.wrappers, name), depth=ctx.depth + 1, search=search, env_cleared=env_cleared,
        appends=appends, argv0=argv0, login=login,
    )  # fmt: skip
    return _analyze_args(inner, inner_ctx)


# --- shells ---------------------------------------------------------------------------------------


def _shell(table_name: str, args: list[_Arg], ctx: _Context, candidates: Sequence[str]) -> list[CommandSegment]:
    name = _base(args[0].text)
    table = SHELL_OPTIONS[table_name]
    rest = args[1:]
    parsed = parse_options(name, table, _texts(rest))
    problem = parsed.problem or _refused(table, parsed)
    if problem is None and any(o.key == "-o" and o.sign == "-" and o.value == "keyword" for o in parsed.options):
        problem = "-o keyword puts NAME=VALUE arguments into the environment of the command, unanalysed"
    if problem is None and ctx.login:
        # bash, dash and zsh all make a shell whose argv[0] begins with "-" a login shell, which
        # runs /etc/profile and ~/.profile (or its own) before the command.
        problem = (
            f"exec {'-l' if not (ctx.argv0 or '').startswith('-') else '-a ' + repr(ctx.argv0)} makes {name} a login "
            "shell, which runs the login startup files first (/etc/profile, ~/.profile, ...), unanalysed"
        )
    if problem is None and table.startup_unless and _reads_startup(table.startup_unless, parsed):
        problem = f"{name} runs a startup file first (~/.zshenv, or $ZDOTDIR/.zshenv), unanalysed: write {name} -f"
    if problem is not None:
        return [_segment(args, ctx, candidates, problem=problem)]
    if any(o.key in table.runs_nothing for o in parsed.options):
        return [_segment(args, ctx, candidates)]
    operands = rest[parsed.end :]
    problem = _opaque(rest[: parsed.end + 1], f"{name} argument")
    if problem is not None:
        return [_segment(args, ctx, candidates, problem=problem)]
    if parsed.has("-c"):  # -c and +c alike
        if not operands:
            return [_segment(args, ctx, candidates, problem=f"{name} -c without a command")]
        search: tuple[str, ...] | None = None
        if ctx.env_cleared:
            found = next((SHELL_DEFAULT_PATH[_base(c)] for c in candidates if _base(c) in SHELL_DEFAULT_PATH), None)
            if found is None:
                return [_segment(args, ctx, candidates, problem=f"{name} runs with PATH unset; its default PATH is not known")]
            search = found
        inner_ctx = replace(
            ctx, wrappers=(*ctx.wrappers, f"{name} -c"), depth=ctx.depth + 1, search=search, appends=False, argv0=None,
            login=False,
        )
        return [_segment(args, ctx, candidates), *_analyze_line(operands[0].text, inner_ctx)]
    # Commands from standard input (sh -s, a bare sh in a pipeline, xargs feeding sh) are code
    # nobody analysed: inline evaluation, like python -c.
    reads_stdin = parsed.has("-s") or not operands or _STDIN.match(operands[0].text) is not None
    return [_segment(args, ctx, candidates, inline_eval=reads_stdin)]


def _reads_startup(no_rcs: str, parsed: ParsedOptions) -> bool:
    """zsh: whether the rc files stay on (no -f, or +f / -o rcs / an option about them after it)."""
    if not any(o.key == no_rcs and o.sign == "-" for o in parsed.options):
        return True
    for option in parsed.options:
        named = (option.value or "").lower().replace("_", "")
        if (option.key == no_rcs and option.sign == "+") or (
            option.key == "-o" and any(word in named for word in ("rcs", "login", "interactive"))
        ):
            return True
    return False


def _refused(table: OptionTable, parsed: ParsedOptions) -> str | None:
    return next((table.refused[o.key] for o in parsed.options if o.key in table.refused), None)


# --- interpreters ---------------------------------------------------------------------------------


def _interpreter(family: str, args: list[_Arg]) -> tuple[bool, str | None]:
    """(inline evaluation?, problem) for an interpreter's arguments."""
    table = INTERPRETER_OPTIONS[family]
    texts = _texts(args)
    parsed = parse_options(family, table, texts)
    problem = parsed.problem or _refused(table, parsed)
    if problem is not None:
        return False, problem
    operands = texts[parsed.end :]
    problem = _opaque(args[: parsed.end + 1], f"{family} argument")
    if problem is not None:
        return False, problem
    if _has_inline(family, table, parsed, texts):
        return True, None
    script = next((o.value for o in parsed.options if o.key in table.script_options), None)
    if family in ("deno", "bun") and operands:
        if operands[0] == "repl" or (family == "deno" and operands[0] == "eval"):
            return True, None
        return any(_STDIN.match(w) for w in operands), None  # deno run -, bun run -
    if script is None and operands:
        script = operands[0]
    if script is None:
        return not any(o.key in table.runs_nothing for o in parsed.options), None
    return _STDIN.match(script) is not None, None


def _has_inline(family: str, table: OptionTable, parsed: ParsedOptions, words: Sequence[str]) -> bool:
    for option in parsed.options:
        if option.key in table.inline:
            return True
        value = option.value or ""
        if family == "perl" and option.key in ("-M", "-m") and not _PERL_MODULE.match(value):
            return True  # -M'strict; system(...)' is code
        node_code = family == "node" and option.key in ("--import", "--loader", "--experimental-loader", "-r")
        if node_code and (value.startswith("data:") or _STDIN.match(value)):
            return True  # --import data:text/javascript,... is code on the command line
        if family == "php" and option.key == "-d" and re.search(r"data:|php://|auto_(pre|ap)pend_file", value, re.I):
            return True
        if option.value_index is not None:
            # A value word that would itself be an inline option: a table that reads one option
            # too many as taking a value must not hide `-c`.
            again = parse_options(family, table, [words[option.value_index], "x"])
            if any(o.key in table.inline for o in again.options):
                return True
    return False


# --- shell lines ----------------------------------------------------------------------------------


def _analyze_line(line: str, ctx: _Context) -> list[CommandSegment]:
    try:
        tokens = split_shell(line)
    except ShellSyntaxError as exc:
        return [CommandSegment(argv=(line,), wrappers=ctx.wrappers, problem=f"cannot parse the shell line: {exc}")]
    segments: list[CommandSegment] = []
    current: list[Word] = []
    problem: str | None = None

    def close() -> None:
        nonlocal current, problem
        if problem is not None:
            segments.append(CommandSegment(argv=tuple(w.text for w in current), wrappers=ctx.wrappers, problem=problem))
        elif current:
            segments.extend(_analyze_words(current, ctx))
        current, problem = [], None

    for token in tokens:
        if isinstance(token, Operator):
            if token.text in SEPARATORS:
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
        segments.append(CommandSegment(argv=(), wrappers=ctx.wrappers, problem="empty command"))
    return segments


def _analyze_words(words: list[Word], ctx: _Context) -> list[CommandSegment]:
    i = 0
    while i < len(words) and not words[i].expands and _ASSIGNMENT.match(words[i].text):
        variable = words[i].text.split("=", 1)[0]
        if not _SAFE_ENV.match(variable):
            return [CommandSegment(argv=tuple(w.text for w in words), wrappers=ctx.wrappers,
                                   problem=f"sets {variable}, which can change what the program runs")]  # fmt: skip
        i += 1
    rest = words[i:]
    if not rest:
        return [CommandSegment(argv=tuple(w.text for w in words), wrappers=ctx.wrappers, problem="only assignments")]
    if rest[0].text in _KEYWORDS and not rest[0].expands:
        return [CommandSegment(argv=tuple(w.text for w in rest), wrappers=ctx.wrappers,
                               problem=f"shell syntax {rest[0].text!r} is not analysed")]  # fmt: skip
    args = [_Arg(text=w.text, opaque="needs shell expansion" if w.expands else None) for w in rest]
    return _analyze_args(args, ctx)


def analyze_command(command: str, resolve: Resolver) -> tuple[CommandSegment, ...]:
    """Split a shell command line into the programs it would run."""
    return tuple(_analyze_line(command, _Context(resolve=resolve)))
