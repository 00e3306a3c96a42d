"""Shell lexing: a POSIX shell line split into words and operators, as values.

Only what the exec analyser needs: quotes and backslashes are removed the way the shell removes
them, and every word says whether its value is known before the line runs. A word ``expands``
when the shell would change it (an unquoted ``$VAR``, ``${...}``, ``~``, a glob character, a brace
expansion ``{a,b}``, ``$'..'`` quoting); it carries a ``substitution`` when it runs code
(``$(...)``, backticks). Operators are the control operators (``;``, ``&&``, ``||``, ``|``, ``&``,
newline) and everything else the analyser refuses (redirections, parentheses).

The lexer errs on the side of "not known": when in doubt a word is marked as expanding, so the
analyser treats it as a miss. A line it cannot read raises :class:`ShellSyntaxError`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Word", "Operator", "ShellSyntaxError", "SEPARATORS", "split_shell"]


class ShellSyntaxError(Exception):
    """The line is not something the analyser can read; callers treat it as a miss."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Word:
    text: str
    expands: bool = False  # unquoted $VAR, ${...}, ~, glob or brace characters: the value is not known
    substitution: bool = False  # $(...) or `...`: runs code


@dataclass(frozen=True, kw_only=True, slots=True)
class Operator:
    text: str


_OPERATORS = ("&&", "||", ";;", ">>", "<<", "<&", ">&", "<>", ">|", "&>", ";", "&", "|", "(", ")", "<", ">")
SEPARATORS = frozenset({"&&", "||", ";", "&", "|", ";;", "\n"})
"""Operators that end one simple command and start the next."""


def split_shell(line: str) -> list[Word | Operator]:
    """Tokenise a POSIX shell line into words and operators; raises ShellSyntaxError."""
    tokens: list[Word | Operator] = []
    buf: list[str] = []
    in_word = expands = substitution = False
    i, n = 0, len(line)

    def flush() -> None:
        nonlocal in_word, expands, substitution
        if in_word:
            tokens.append(Word(text="".join(buf), expands=expands, substitution=substitution))
        buf.clear()
        in_word = expands = substitution = False

    while i < n:
        ch = line[i]
        if ch in " \t":
            flush()
            i += 1
        elif ch == "\n":
            flush()
            tokens.append(Operator(text="\n"))
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
            tokens.append(Operator(text=op))
            i += len(op)
        else:
            # "{}" alone never brace-expands (xargs -I{}, find -exec {}); any other unquoted "{"
            # might ({a,b}, {1..3}), and one word can become several: not known.
            if ch in "*?[" or (ch == "{" and not line.startswith("{}", i)) or (ch == "~" and not in_word):
                expands = True
            buf.append(ch)
            in_word = True
            i += 1
    flush()
    return tokens
