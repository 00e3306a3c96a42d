"""Option tables: how each wrapper, shell and interpreter the exec analyser sees through reads
its options, and the one parser that reads a command's words with such a table.

The rule the tables follow: every option a program accepts is either a *flag* (no value), takes
a *value* (attached ``-n10`` or the next word ``-n 10``; ``--opt=value`` or ``--opt value``),
takes an *optional attached* value only (``-i.bak``, ``--eof[=E]``: never the next word), or, for
bash's ``-o``/``-O``, takes the *next word* while the rest of the cluster goes on being options.
Short options cluster as getopt reads them (``-uc CODE`` is ``-u -c CODE``; the first letter that
takes a value eats the rest of the word). ``--`` ends the options. Wrappers and shells stop at
their first operand (getopt's ``+``), as all of them do.

An option a table does not know, a long option written in an abbreviation, or an option missing
its value is a *problem*: the command is a miss that can never be allowed (fail closed), never a
word to skip. Each table also says what its options mean: ``refused`` (the command is not
analysed: ``env -S``, ``bash -k``), ``runs_nothing`` (``command -v``, ``--help``), ``inline``
(code on the command line: ``python -c``, ``node -e``, ``perl -e``).

The tables were checked against the programs on Debian 12 (coreutils 9.1, findutils 4.9,
util-linux 2.38, bash 5.2, dash 0.5.12, Python 3.11, Node 20, Perl 5.36); for the rest (zsh, ksh,
ruby, php, lua, osascript, deno, bun) they follow the manuals and lean strict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "OptionTable",
    "Option",
    "ParsedOptions",
    "parse_options",
    "WRAPPER_OPTIONS",
    "WRAPPER_OPERANDS",
    "SHELL_OPTIONS",
    "SHELL_DEFAULT_PATH",
    "INTERPRETER_OPTIONS",
    "REFUSED_PROGRAMS",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class OptionTable:
    """The options one program accepts, by how each reads its value, and what they mean.

    Keys are written ``-x`` for short options and ``--name`` for long ones; ``aliases`` maps a long
    name to the short key it stands for, so that a meaning is listed once."""

    flags: str = ""
    values: str = ""  # the rest of the word, or the next word
    attached: Mapping[str, str] = field(default_factory=dict)  # letter -> regex it takes from the rest of the word
    next_word: str = ""  # bash -o NAME / -O NAME: the next word, and the cluster goes on
    long_flags: frozenset[str] = frozenset()
    long_values: frozenset[str] = frozenset()  # --name=value or --name value
    long_attached: frozenset[str] = frozenset()  # --name[=value]: a value only with "="
    long_equals: bool = True  # whether --name=value is accepted at all (bash: no)
    long_first: bool = False  # bash: long options only before the first short one
    single_dash_long: bool = False  # bash: -norc is --norc
    negatable: bool = False  # node: --no-NAME for every long flag NAME
    underscores: bool = False  # node: --max_old_space_size is --max-old-space-size
    aliases: Mapping[str, str] = field(default_factory=dict)
    plus: bool = False  # shells: +e / +o NAME as well as -e / -o NAME
    numeric: bool = False  # nice: -5, --5, -+5 mean -n 5
    double_dash: bool = True  # "--" ends the options
    dash_ends: bool = False  # shells: a lone "-" ends the options too (elsewhere it is an operand)
    refused: Mapping[str, str] = field(default_factory=dict)  # key -> why the command is not analysed
    runs_nothing: frozenset[str] = frozenset()
    inline: frozenset[str] = frozenset()
    script_options: frozenset[str] = frozenset()  # php -f FILE: the option's value is the script
    ends_options: frozenset[str] = frozenset()  # python -c CODE / -m MOD: what follows is the program's argv
    # zsh -f: without this option the shell runs a startup file of the user's (~/.zshenv) first
    startup_unless: str = ""

    def key(self, long_name: str) -> str:
        return self.aliases.get(f"--{long_name}", f"--{long_name}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    key: str  # "-n", or "--name" for a long option without a short form
    word: str  # the word it was written in
    value: str | None = None
    value_index: int | None = None  # the word that held the value, when it was a separate word
    sign: str = "-"  # "+" for a shell's +o NAME / +e


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedOptions:
    options: tuple[Option, ...] = ()
    end: int = 0  # index of the first word after the options (past "--")
    problem: str | None = None

    def has(self, *keys: str) -> bool:
        return any(option.key in keys for option in self.options)

    def values(self, *keys: str) -> list[str | None]:
        return [option.value for option in self.options if option.key in keys]


def _canonical_long(table: OptionTable, name: str) -> str:
    return name.replace("_", "-") if table.underscores else name


def parse_options(program: str, table: OptionTable, words: Sequence[str]) -> ParsedOptions:
    """Read the options at the start of ``words`` (a program's arguments) with ``table``."""
    options: list[Option] = []
    i, n = 0, len(words)
    shorts_seen = False

    def problem(text: str) -> ParsedOptions:
        return ParsedOptions(options=tuple(options), end=i, problem=text)

    def unknown(word: str) -> ParsedOptions:
        return problem(f"{program} option {word!r} is not in the analyser's option table")

    while i < n:
        word = words[i]
        if table.double_dash and word == "--":
            i += 1
            break
        if table.dash_ends and word == "-":
            i += 1
            break
        if table.numeric and re.match(r"-[-+]?\d", word):
            options.append(Option(key="-n", word=word, value=word[1:]))
            i += 1
            continue
        sign = word[:1]
        if len(word) < 2 or not (sign == "-" or (table.plus and sign == "+")):
            break  # the first operand
        long_word = sign == "-" and word.startswith("--")
        if not long_word and table.single_dash_long and not shorts_seen:
            name = word[1:]
            if name in table.long_flags or name in table.long_values:
                long_word, word = True, "-" + word
        if long_word:
            if table.long_first and shorts_seen:
                return unknown(words[i])
            name, eq, value = word[2:].partition("=")
            name = _canonical_long(table, name)
            key = table.key(name)
            if eq and not table.long_equals:
                return unknown(words[i])
            if name in table.long_values:
                if eq:
                    options.append(Option(key=key, word=words[i], value=value))
                    i += 1
                elif i + 1 < n:
                    options.append(Option(key=key, word=words[i], value=words[i + 1], value_index=i + 1))
                    i += 2
                else:
                    return problem(f"{program} option {words[i]!r} needs a value")
                continue
            if name in table.long_attached:
                options.append(Option(key=key, word=words[i], value=value if eq else None))
                i += 1
                continue
            flag = name
            if flag not in table.long_flags and table.negatable and flag.startswith("no-"):
                flag = flag[3:]
            if flag in table.long_flags and not eq:
                options.append(Option(key=table.key(flag), word=words[i]))
                i += 1
                continue
            return unknown(words[i])
        shorts_seen = True
        pending = 0  # words the cluster's next-word options take after it
        j = 1
        while j < len(word):
            letter, key = word[j], f"-{word[j]}"
            if sign == "-" and letter in table.values:
                rest = word[j + 1 :]
                if rest:
                    options.append(Option(key=key, word=word, value=rest))
                elif i + 1 + pending < n:
                    index = i + 1 + pending
                    options.append(Option(key=key, word=word, value=words[index], value_index=index))
                    pending += 1
                else:
                    return problem(f"{program} option {key!r} needs a value")
                break
            if sign == "-" and letter in table.attached:
                match = re.match(table.attached[letter], word[j + 1 :])
                taken = match.group(0) if match else ""
                options.append(Option(key=key, word=word, value=taken or None))
                j += 1 + len(taken)
                continue
            if letter in table.next_word:
                index = i + 1 + pending
                if index >= n:
                    return problem(f"{program} option {sign}{letter} needs a value")
                options.append(Option(key=key, word=word, value=words[index], value_index=index, sign=sign))
                pending += 1
                j += 1
                continue
            if letter in table.flags:
                options.append(Option(key=key, word=word, sign=sign))
                j += 1
                continue
            return unknown(f"{sign}{letter}" if len(word) > 2 else word)
        i += 1 + pending
        if options and options[-1].key in table.ends_options:
            break
    return ParsedOptions(options=tuple(options), end=i)


def _longs(*names: str) -> frozenset[str]:
    return frozenset(names)


_HELP = _longs("help", "version")

# --- wrappers: programs that run the command in their arguments ---------------------------------

WRAPPER_OPTIONS: Mapping[str, OptionTable] = {
    "env": OptionTable(
        flags="iv0", values="uCS",
        long_flags=_longs("ignore-environment", "null", "debug", "list-signal-handling", *_HELP),
        long_values=_longs("unset", "chdir", "split-string"),
        long_attached=_longs("block-signal", "default-signal", "ignore-signal"),
        aliases={"--ignore-environment": "-i", "--null": "-0", "--debug": "-v", "--unset": "-u", "--chdir": "-C",
                 "--split-string": "-S"},
        refused={"-S": "env -S splits a string into a command line that is not analysed"},
        runs_nothing=_longs("--help", "--version"),
    ),
    "nice": OptionTable(
        values="n", numeric=True, long_values=_longs("adjustment"), long_flags=_HELP,
        aliases={"--adjustment": "-n"}, runs_nothing=_longs("--help", "--version"),
    ),
    "nohup": OptionTable(long_flags=_HELP, runs_nothing=_longs("--help", "--version")),
    "timeout": OptionTable(
        flags="v", values="ks",
        long_flags=_longs("verbose", "foreground", "preserve-status", *_HELP),
        long_values=_longs("kill-after", "signal"),
        aliases={"--verbose": "-v", "--kill-after": "-k", "--signal": "-s"},
        runs_nothing=_longs("--help", "--version"),
    ),
    "stdbuf": OptionTable(
        values="ioe", long_values=_longs("input", "output", "error"), long_flags=_HELP,
        aliases={"--input": "-i", "--output": "-o", "--error": "-e"}, runs_nothing=_longs("--help", "--version"),
    ),
    "xargs": OptionTable(
        flags="0oprtx", values="aEILnsPd", attached={"e": ".*", "i": ".*", "l": ".*"},
        long_flags=_longs("null", "open-tty", "interactive", "no-run-if-empty", "verbose", "show-limits", "exit",
                          *_HELP),
        long_values=_longs("arg-file", "delimiter", "max-args", "max-chars", "max-procs", "process-slot-var"),
        long_attached=_longs("eof", "replace", "max-lines"),
        aliases={"--null": "-0", "--open-tty": "-o", "--interactive": "-p", "--no-run-if-empty": "-r",
                 "--verbose": "-t", "--exit": "-x", "--arg-file": "-a", "--delimiter": "-d", "--max-args": "-n",
                 "--max-chars": "-s", "--max-procs": "-P", "--eof": "-e", "--replace": "-i", "--max-lines": "-l"},
        refused={"--process-slot-var": "xargs --process-slot-var sets an environment variable of the command"},
        runs_nothing=_longs("--help", "--version"),
    ),
    # Shell builtins (bash's internal getopt: clusters and attached values like getopt's).
    "exec": OptionTable(flags="cl", values="a", long_flags=_longs("help"), runs_nothing=_longs("--help")),
    "command": OptionTable(flags="pvV", long_flags=_longs("help"), runs_nothing=_longs("-v", "-V", "--help")),
    "builtin": OptionTable(long_flags=_longs("help"), runs_nothing=_longs("--help")),
    # bash's `time [-p]` keyword, or GNU time where time is not a keyword (dash).
    "time": OptionTable(
        flags="apqvV", values="fo",
        long_flags=_longs("append", "portability", "quiet", "verbose", *_HELP),
        long_values=_longs("format", "output"),
        aliases={"--append": "-a", "--portability": "-p", "--quiet": "-q", "--verbose": "-v", "--format": "-f",
                 "--output": "-o"},
        runs_nothing=_longs("-V", "--help", "--version"),
    ),
    "setsid": OptionTable(
        flags="cfwhV", long_flags=_longs("ctty", "fork", "wait", *_HELP),
        aliases={"--ctty": "-c", "--fork": "-f", "--wait": "-w", "--help": "-h", "--version": "-V"},
        runs_nothing=_longs("-h", "-V"),
    ),
    "chrt": OptionTable(
        flags="abdefiorRmpvhV", values="TPD",
        long_flags=_longs("all-tasks", "batch", "deadline", "ext", "fifo", "idle", "other", "rr", "reset-on-fork",
                          "max", "pid", "verbose", *_HELP),
        long_values=_longs("sched-runtime", "sched-period", "sched-deadline"),
        aliases={"--all-tasks": "-a", "--batch": "-b", "--deadline": "-d", "--ext": "-e", "--fifo": "-f",
                 "--idle": "-i", "--other": "-o", "--rr": "-r", "--reset-on-fork": "-R", "--max": "-m",
                 "--pid": "-p", "--verbose": "-v", "--help": "-h", "--version": "-V", "--sched-runtime": "-T",
                 "--sched-period": "-P", "--sched-deadline": "-D"},
        runs_nothing=_longs("-m", "-p", "-h", "-V"),
    ),
    "ionice": OptionTable(
        flags="thV", values="cnpPu",
        long_flags=_longs("ignore", *_HELP), long_values=_longs("class", "classdata", "pid", "pgid", "uid"),
        aliases={"--ignore": "-t", "--help": "-h", "--version": "-V", "--class": "-c", "--classdata": "-n",
                 "--pid": "-p", "--pgid": "-P", "--uid": "-u"},
        runs_nothing=_longs("-p", "-P", "-u", "-h", "-V"),
    ),
    "taskset": OptionTable(
        flags="acphV", long_flags=_longs("all-tasks", "cpu-list", "pid", *_HELP),
        aliases={"--all-tasks": "-a", "--cpu-list": "-c", "--pid": "-p", "--help": "-h", "--version": "-V"},
        runs_nothing=_longs("-p", "-h", "-V"),
    ),
    "flock": OptionTable(
        flags="sexnuoFhV", values="wE",
        long_flags=_longs("shared", "exclusive", "unlock", "nonblock", "nonblocking", "nb", "close", "no-fork",
                          "verbose", *_HELP),
        long_values=_longs("timeout", "wait", "conflict-exit-code"),
        aliases={"--shared": "-s", "--exclusive": "-x", "--unlock": "-u", "--nonblock": "-n",
                 "--nonblocking": "-n", "--nb": "-n", "--close": "-o", "--no-fork": "-F", "--help": "-h",
                 "--version": "-V", "--timeout": "-w", "--wait": "-w", "--conflict-exit-code": "-E"},
        runs_nothing=_longs("-h", "-V"),
    ),
    # expect's unbuffer reads a literal first word "-p" and nothing else.
    "unbuffer": OptionTable(flags="p", double_dash=False),
}

WRAPPER_OPERANDS: Mapping[str, tuple[str, ...]] = {
    "timeout": ("DURATION",),
    "chrt": ("PRIORITY",),
    "taskset": ("MASK",),
    "flock": ("FILE",),
}
"""Words a wrapper reads after its options and before the command it runs."""

# --- shells ---------------------------------------------------------------------------------------

_BASH_SET = "abefhkmnptuvxBCEHPT"  # set -o letters
_BASH_LONG_FLAGS = _longs(
    "debug", "debugger", "dump-po-strings", "dump-strings", "login", "noediting", "noprofile", "norc", "posix",
    "pretty-print", "restricted", "verbose", *_HELP,
)  # fmt: skip
_KEYWORD_MODE = {"-k": "-k (keyword) puts NAME=VALUE arguments into the environment of the command, unanalysed"}
# Startup files run code nobody wrote on the command line, before the line itself: an interactive
# bash reads ~/.bashrc (or --rcfile/--init-file FILE), a login shell ~/.profile and friends, an
# interactive POSIX shell the file $ENV names. The analyser cannot see that code: fail closed.
_INTERACTIVE = {"-i": "-i (interactive) runs a startup file first (~/.bashrc, or the file $ENV names), unanalysed"}
_LOGIN = {"-l": "-l (login) runs the login startup files first (/etc/profile, ~/.profile, ...), unanalysed"}
_BASH_STARTUP = {
    **_INTERACTIVE, **_LOGIN,
    "--login": "--login runs the login startup files first (/etc/profile, ~/.bash_profile, ...), unanalysed",
    "--rcfile": "--rcfile FILE runs FILE first (in an interactive shell), unanalysed",
    "--init-file": "--init-file FILE runs FILE first (in an interactive shell), unanalysed",
}  # fmt: skip
_DASH_SET = "abCefIimnpsuvVxEl"

SHELL_OPTIONS: Mapping[str, OptionTable] = {
    "bash": OptionTable(
        flags=_BASH_SET + "cilrsD", next_word="oO", plus=True, dash_ends=True,
        long_flags=_BASH_LONG_FLAGS, long_values=_longs("init-file", "rcfile"),
        long_equals=False, long_first=True, single_dash_long=True,
        refused={**_KEYWORD_MODE, **_BASH_STARTUP}, runs_nothing=_longs("--help", "--version"),
    ),
    "dash": OptionTable(
        flags=_DASH_SET + "c", next_word="o", plus=True, dash_ends=True, refused={**_INTERACTIVE, **_LOGIN}
    ),
    # "sh" may be dash or bash: bash's letters and long options, but never bash's one-dash long
    # options (dash reads "-posix" as -p -o ... -s -i -x).
    "sh": OptionTable(
        flags="".join(sorted(set(_BASH_SET + _DASH_SET + "cilrsD"))), next_word="oO", plus=True, dash_ends=True,
        long_flags=_BASH_LONG_FLAGS, long_values=_longs("init-file", "rcfile"), long_equals=False,
        long_first=True, refused={**_KEYWORD_MODE, **_BASH_STARTUP}, runs_nothing=_longs("--help", "--version"),
    ),
    # Every zsh, also `zsh -c`, reads $ZDOTDIR/.zshenv (~/.zshenv) first unless -f (NO_RCS) is given.
    "zsh": OptionTable(
        flags="0123456789aACdeEfFgGhHiIjJlLmMnNOpPqQrRsStTuUvVwWxXyYZc", next_word="o", plus=True, dash_ends=True,
        long_flags=_HELP, long_values=_longs("emulate"), runs_nothing=_longs("--help", "--version"),
        startup_unless="-f",
    ),
    # ksh, mksh, ash, yash, posh: the POSIX letters only.
    "posix": OptionTable(
        flags="aCefikmnpsuvxcl", next_word="o", plus=True, dash_ends=True,
        refused={**_KEYWORD_MODE, **_INTERACTIVE, **_LOGIN},
    ),
    "fish": OptionTable(
        flags="ilnNPvh", values="cCdfop",
        long_flags=_longs("interactive", "login", "no-execute", "no-config", "private", "print-rusage-self",
                          "print-debug-categories", *_HELP),
        long_values=_longs("command", "init-command", "debug", "features", "debug-output", "profile",
                           "profile-startup"),
        aliases={"--command": "-c", "--init-command": "-C", "--version": "-v", "--help": "-h"},
        refused={"-c": "fish -c runs fish syntax, which the analyser does not read",
                 "-C": "fish -C runs fish syntax, which the analyser does not read"},
        runs_nothing=_longs("-v", "-h"),
    ),
}

SHELL_DEFAULT_PATH: Mapping[str, tuple[str, ...]] = {
    "dash": ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"),
    "bash": ("/usr/local/bin", "/usr/local/sbin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"),  # then ".": a miss
}
"""Where a shell started without PATH in its environment looks programs up (measured on Debian 12)."""

# --- interpreters ---------------------------------------------------------------------------------

_NODE_FLAGS = _longs(
    "check", "interactive", "v8-options", "warnings", "deprecation", "throw-deprecation", "trace-deprecation",
    "trace-warnings", "pending-deprecation", "enable-source-maps", "experimental-vm-modules",
    "experimental-modules", "experimental-strip-types", "experimental-transform-types", "experimental-json-modules",
    "experimental-wasm-modules", "experimental-import-meta-resolve", "experimental-detect-module",
    "experimental-require-module", "experimental-permission", "permission", "experimental-report",
    "experimental-test-coverage", "experimental-global-webcrypto", "experimental-fetch", "experimental-websocket",
    "experimental-sqlite", "expose-gc", "preserve-symlinks", "preserve-symlinks-main",
    "abort-on-uncaught-exception", "trace-uncaught", "trace-exit", "trace-sigint", "trace-sync-io", "watch",
    "watch-preserve-output", "test", "test-only", "frozen-intrinsics", "zero-fill-buffers", "jitless", "addons",
    "global-search-paths", "force-fips", "enable-fips", "use-strict", "harmony", "prof", "cpu-prof", "heap-prof",
    "insecure-http-parser", "report-on-signal", "report-uncaught-exception", "report-on-fatalerror",
    "report-compact", "openssl-legacy-provider", "use-openssl-ca", "use-bundled-ca", *_HELP,
)  # fmt: skip

INTERPRETER_OPTIONS: Mapping[str, OptionTable] = {
    "python": OptionTable(
        flags="bBdEhiIOPqRsSuvVx?3t", values="cmWXQ",
        long_flags=_longs("help-env", "help-xoptions", "help-all", *_HELP),
        long_values=_longs("check-hash-based-pycs"),
        aliases={"--help": "-h", "--version": "-V"},
        inline=_longs("-c", "-m", "-i"), ends_options=_longs("-c", "-m"),
        runs_nothing=_longs("-h", "-?", "-V", "--help-env", "--help-xoptions", "--help-all"),
    ),
    "node": OptionTable(
        flags="chvi", values="eprC",
        long_flags=_NODE_FLAGS,
        long_values=_longs(
            "eval", "print", "require", "import", "input-type", "loader", "experimental-loader", "conditions",
            "env-file", "env-file-if-exists", "title", "inspect-port", "debug-port", "icu-data-dir",
            "openssl-config", "redirect-warnings", "report-dir", "report-directory", "report-filename",
            "report-signal", "secure-heap", "secure-heap-min", "tls-keylog", "tls-cipher-list",
            "trace-event-categories", "trace-event-file-pattern", "unhandled-rejections", "watch-path",
            "experimental-default-type", "disable-warning", "dns-result-order", "diagnostic-dir",
            "heapsnapshot-signal", "heapsnapshot-near-heap-limit", "max-http-header-size", "run",
        ),
        long_attached=_longs("inspect", "inspect-brk", "inspect-wait", "max-old-space-size", "max-semi-space-size",
                             "stack-size", "stack-trace-limit"),
        negatable=True, underscores=True,
        aliases={"--eval": "-e", "--print": "-p", "--require": "-r", "--conditions": "-C", "--check": "-c",
                 "--help": "-h", "--version": "-v", "--interactive": "-i"},
        refused={"--run": "node --run runs a package.json script through a shell"},
        inline=_longs("-e", "-p", "-i"),
        runs_nothing=_longs("-h", "-v", "--v8-options"),
    ),
    # perl reads the rest of a cluster after some switches: -l and -0 take digits, -i and -x the
    # rest of the word. Where versions differ the table takes the least (-D digits only), so a
    # letter perl would have eaten is read as another switch: stricter, never looser.
    "perl": OptionTable(
        flags="acnpsStTuUwWXhvg", values="eEIMm",
        attached={"0": r"(?:x[0-9a-fA-F]*|[0-7]*)", "l": r"[0-7]*", "C": r".*", "D": r"\d*",
                  "d": r"t?(?:[:=].*)?", "i": r".*", "x": r".*", "V": r"(?::.*)?", "F": r".*"},
        long_flags=_HELP, long_equals=False,
        inline=_longs("-e", "-E", "-F"),
        runs_nothing=_longs("-h", "-v", "-V", "--help", "--version"),
    ),
    "ruby": OptionTable(
        flags="acdhlnpsSvwyU", values="erICE",
        attached={"0": r"[0-7]*", "W": r"(?:[0-2]|:[\w-]+)?", "T": r"\d*", "x": r".*", "i": r".*", "F": r".*",
                  "K": r"[a-zA-Z]?"},
        long_flags=_longs("copyright", "verbose", "yydebug", "jit", "yjit", "rjit", *_HELP),
        long_values=_longs("enable", "disable", "encoding", "external-encoding", "internal-encoding", "dump",
                           "backtrace-limit", "parser", "crash-report"),
        aliases={"--encoding": "-E", "--help": "-h"},
        inline=_longs("-e"),
        runs_nothing=_longs("-h", "--version", "--copyright"),
    ),
    "php": OptionTable(
        flags="aCeHhilmnqsvw", values="cdfrBRFEStz",
        long_flags=_longs("interactive", "no-php-ini", "profile-info", "info", "syntax-check", "modules", "hide-args",
                          "syntax-highlight", "strip", "ini", *_HELP),
        long_values=_longs("php-ini", "define", "file", "run", "process-begin", "process-code", "process-file",
                           "process-end", "server", "docroot", "zend-extension", "rf", "rc", "re", "rz", "ri"),
        aliases={"--interactive": "-a", "--no-php-ini": "-n", "--php-ini": "-c", "--define": "-d", "--file": "-f",
                 "--run": "-r", "--process-begin": "-B", "--process-code": "-R", "--process-file": "-F",
                 "--process-end": "-E", "--server": "-S", "--docroot": "-t", "--zend-extension": "-z",
                 "--help": "-h", "--version": "-v", "--info": "-i", "--modules": "-m", "--syntax-check": "-l",
                 "--hide-args": "-H", "--syntax-highlight": "-s", "--strip": "-w"},
        inline=_longs("-r", "-B", "-R", "-E", "-a"),
        runs_nothing=_longs("-h", "-i", "-m", "-v", "--ini", "--rf", "--rc", "--re", "--rz", "--ri"),
        script_options=_longs("-f", "-F", "-S"),
    ),
    "lua": OptionTable(flags="vEWi", values="el", inline=_longs("-e", "-i"), runs_nothing=_longs("-v")),
    "luajit": OptionTable(
        flags="vEib", values="elj", attached={"O": r".*"}, inline=_longs("-e", "-i", "-b"), runs_nothing=_longs("-v"),
    ),
    "osascript": OptionTable(flags="i", values="els", inline=_longs("-e", "-i")),
    # deno and bun: options before the subcommand or script; deno eval/repl and bun -e/-p/repl are inline.
    "deno": OptionTable(
        flags="hqV", long_flags=_longs("quiet", "unstable", *_HELP), long_values=_longs("log-level"),
        aliases={"--help": "-h", "--quiet": "-q", "--version": "-V"}, runs_nothing=_longs("-h", "-V"),
    ),
    "bun": OptionTable(
        flags="bhiv", values="eprcdl",
        long_flags=_longs("watch", "hot", "smol", "bun", "silent", "if-present", "no-install", "prefer-offline",
                          "prefer-latest", "revision", *_HELP),
        long_values=_longs("eval", "print", "preload", "cwd", "config", "env-file", "tsconfig-override", "define",
                           "loader", "main-fields", "conditions", "port", "install"),
        long_attached=_longs("inspect", "inspect-brk", "inspect-wait"),
        aliases={"--eval": "-e", "--print": "-p", "--preload": "-r", "--config": "-c", "--define": "-d",
                 "--loader": "-l", "--bun": "-b", "--help": "-h", "--version": "-v"},
        inline=_longs("-e", "-p"), runs_nothing=_longs("-h", "-v", "--revision"),
    ),
}

_STATE_BUILTIN = "a shell builtin that changes what later commands run (variables, aliases, lookups)"
_PRIVILEGE = "changes user or privileges before running a command, which the analyser does not follow"
_NAMESPACE = "runs a command in another namespace or root, which the analyser does not follow"

REFUSED_PROGRAMS: Mapping[str, str] = {
    **{name: f"{name} runs code that is not analysed" for name in ("eval", ".", "source", "trap", "fc")},
    **{name: f"{name} is {_STATE_BUILTIN}" for name in (
        "alias", "unalias", "hash", "enable", "export", "declare", "typeset", "readonly", "local", "unset", "set",
        "shopt", "read", "readarray", "mapfile", "getopts", "bind", "complete", "compgen", "compopt", "let")},
    **{name: f"{name} {_PRIVILEGE}" for name in ("sudo", "doas", "su", "runuser", "pkexec", "setpriv", "capsh")},
    **{name: f"{name} {_NAMESPACE}" for name in (
        "nsenter", "unshare", "chroot", "firejail", "bwrap", "systemd-run", "systemd-nspawn")},
    **{name: f"{name} runs a command under a tracer or debugger, which the analyser does not follow"
       for name in ("strace", "ltrace", "gdb", "valgrind")},
    **{name: f"{name} runs its arguments through a shell, which the analyser does not follow"
       for name in ("watch", "script", "parallel", "at", "batch")},
    **{name: f"{name} runs a command of its arguments, which the analyser does not follow"
       for name in ("setarch", "linux32", "linux64", "prlimit", "numactl", "fakeroot", "fakechroot", "proot",
                    "runcon", "cgexec", "torsocks", "proxychains", "proxychains4", "faketime", "xvfb-run",
                    "dbus-launch", "dbus-run-session", "chronic", "ifne", "sg", "newgrp", "catchsegv", "sshpass")},
    **{name: f"{name} runs many programs under one name, which the analyser does not follow"
       for name in ("busybox", "toybox", "coreutils")},
}  # fmt: skip
"""Programs whose command lines are never allowed in allowlist mode, even when allowlisted."""
