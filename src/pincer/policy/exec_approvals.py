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

What makes the allowlist safe is seeing through wrappers, shells and interpreters to the programs
that really run (``pincer.policy.command_analysis``, with the option tables of
``pincer.policy.command_options`` and the lexer of ``pincer.policy.shell_words``): ``env``,
``nice``, ``timeout``, ``xargs``, ``exec``/``command`` and the rest are transparent, and the
program they would run is what must match; a shell run with ``-c`` (``bash -c "ls"``) must match
itself *and* every program of its line, so allowing ``/usr/bin/sh`` allows running ``sh`` on a
script file, never ``sh -c "curl ..."`` unless curl is allowed too. Inline evaluation
(``python -c``/``-m``, ``node -e``, ``perl -e``, ``ruby -e``, ``php -r``, ``lua -e``,
``osascript -e``, ``deno eval``, ``bun -e``, code from standard input) is a miss even for an
allowlisted interpreter unless ``allow_inline_eval`` is set, and ``allow_always`` never persists it.

The line is split on ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines; each segment must match.
Anything the analysis cannot read with certainty is a miss, never an allow: an option the tables do
not know, a value only known at run time where the program is decided, command substitution,
redirections, subshells and shell keywords, environment assignments other than a few harmless
locale/terminal ones (an ``LD_PRELOAD=`` prefix would otherwise load code into an allowlisted
binary), ``env -S``, ``sudo``/``nsenter``-style wrappers, ``eval``/``source`` and builtins that
change what later commands run, ``busybox``-style multiplexers, unbalanced quotes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from pincer.core.effects import Mode
from pincer.core.errors import ConfigError
from pincer.policy.command_analysis import MAX_UNWRAP_DEPTH, CommandSegment, Resolver, analyze_argv, analyze_command
from pincer.policy.shell_words import ShellSyntaxError, split_shell

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
    "MAX_UNWRAP_DEPTH",
]

_E = TypeVar("_E", bound=StrEnum)


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


def _enum(kind: type[_E], value: object, where: str) -> _E:
    # A value that is not a string matches no member of a StrEnum: the same error as an unknown one.
    if isinstance(value, str):
        try:
            return kind(value)
        except ValueError:
            pass
    allowed = " | ".join(v.value for v in kind)
    raise ConfigError(f"{where}: {value!r} is not one of {allowed}", hint=f"use one of {allowed}")


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


@functools.lru_cache(maxsize=512)  # the same few patterns, on every exec call
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


# --- decisions -----------------------------------------------------------------------------------


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
        return f"{shown!r}: inline evaluation (code on the command line or from standard input) needs approval even for an allowlisted interpreter"
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
    """(may the command run, the policy afterwards). ``allow_always`` adds the resolved programs (a
    shell run with ``-c`` and the programs of its line); never transparent wrappers, never an
    inline-eval interpreter, nothing when a program could not be resolved or analysed."""
    answer = Answer(answer)
    if answer is Answer.DENY:
        return False, policy
    if answer is Answer.ALLOW_ONCE or not evaluation.persistable:
        return True, policy
    added = tuple(p for p in evaluation.persistable if p not in policy.allowlist)
    return True, replace(policy, allowlist=policy.allowlist + added)
