r"""The install-time scanner: what a skill, a script or an MCP server command must not hide.

Every text file of an artifact is read command by command against these rules (modelled on the
published reports of ClawHub's "ClawHavoc" wave: skills whose "prerequisites" told people to
paste a command into a terminal, which fetched and ran a stealer):

==========================  ========  =========================================================
rule                        severity  what it finds
==========================  ========  =========================================================
download-and-execute        high      ``curl ... | sh``, ``wget -O- | bash``, ``bash <(curl ...)``,
                                      ``iwr ... | iex``, download + ``chmod +x`` + run; *medium*
                                      when every URL on the line is https on a well-known code host
                                      (github.com, raw.githubusercontent.com, ...)
decode-and-execute          high      ``base64 -d | sh``, ``eval(atob(...))``, ``exec(base64...)``,
                                      ``powershell -enc``, ``xxd -r -p | sh``
credential-harvesting       high      reading ``~/.ssh``, ``~/.aws``, ``~/.kube``, ``.netrc``, wallet
                                      files or browser profiles (Login Data, cookies, key4.db);
                                      environment dumps, ``.env`` files or an agent's config
                                      (``~/.clawdbot``, ``~/.openclaw``) sent to the network;
                                      *medium*: such a path only named, or a keychain query.
                                      Also over a whole file, and across a skill's files: a
                                      script that reads a credential location or the whole
                                      environment, in one place, and sends anything over the
                                      network, in another (or in another script), is *high*
crypto-miner                high      xmrig and other miners, ``stratum+tcp://`` pools, pool hosts
obfuscation                 medium    base64 runs of 200+ characters, 8+ hex escapes in a row,
                                      ``String.fromCharCode`` lists
fake-prerequisite           high      a prerequisite/setup passage that tells the user to paste or
                                      run a command in a terminal and fetches, decodes or downloads
                                      (an executable, a password-protected archive, a bare IP);
                                      *medium*: the instruction alone
hidden-unicode              high      bidi controls (U+202A-E, U+2066-9), zero-width characters
                                      (U+200B-D outside emoji, U+2060-4, U+FEFF past the start),
                                      tag characters (U+E0000-7F outside flag emoji), runs of
                                      variation selectors (hidden bytes); *medium*: LRM/RLM/ALM
                                      marks, soft hyphens
==========================  ========  =========================================================

A finding has its rule id, severity, file and line (1-based) and a short excerpt with the
invisible characters named. High severity blocks an install unless ``--force``; ``pincer scan
PATH`` runs the scanner alone. Binary files (a NUL in the first 8 KB, unless the name is a text
file's, ``SKILL.md``, ``*.sh``, ..., or it starts with ``#!``) are skipped; text past 2 MB per file
is not read (reported as a low finding).

The whole-file rule reads scripts only (``*.py``, ``*.js``, ``*.sh``, ... or a ``#!`` first line):
a SKILL.md that names ``~/.aws/credentials`` in its setup notes and shows a ``curl`` elsewhere is
documentation, and its lines are still read by the rules above.

A line is what a shell reads as one: lines break at newlines only (not at U+2028 or U+001C,
which bash reads as part of the line), and a line ending in ``\``, ``|``, ``&&`` or ``||`` goes
on in the next. Each is matched as written, past its shell quoting (``c''url``, ``ba\sh``), and
through the text of its base64 tokens (a command decoded to a file and run from there).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Severity", "Finding", "ScanReport", "scan_text", "scan_path", "scan_files", "scan_command", "scan_tool_description",
    "RULES", "MAX_SCAN_BYTES",
]  # fmt: skip

MAX_SCAN_BYTES = 2 * 1024 * 1024
_EXCERPT_CHARS = 160


class Severity(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return {"low": 1, "medium": 2, "high": 3}[self.value]


RULES: dict[str, str] = {
    "download-and-execute": "downloads a script or program and runs it",
    "decode-and-execute": "decodes hidden text and runs it",
    "credential-harvesting": "reads credentials, keys, wallets or browser data, or sends the environment out",
    "crypto-miner": "runs or configures a cryptocurrency miner",
    "obfuscation": "holds a long encoded blob or escaped text that hides what it does",
    "fake-prerequisite": "tells the user to paste a command into a terminal as a 'prerequisite'",
    "hidden-unicode": "holds invisible or direction-changing characters",
    "unscanned": "part of the file was not scanned",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    file: str
    line: int
    message: str
    excerpt: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "excerpt": self.excerpt,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanReport:
    findings: tuple[Finding, ...] = ()
    files: int = 0

    @property
    def has_high(self) -> bool:
        return any(f.severity is Severity.HIGH for f in self.findings)

    @property
    def high(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.HIGH)

    @property
    def verdict(self) -> str:
        """``clean``, or the highest severity found (``low`` | ``medium`` | ``high``)."""
        if not self.findings:
            return "clean"
        return max(self.findings, key=lambda f: f.severity.rank).severity.value

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "files": self.files, "findings": [f.to_json() for f in self.findings]}

    def merged(self, other: ScanReport) -> ScanReport:
        return ScanReport(findings=self.findings + other.findings, files=self.files + other.files)


# ----------------------------------------------------------------------------------- patterns

_FETCH = r"(?:curl|wget|fetch|aria2c|http(?:ie)?|Invoke-WebRequest|Invoke-RestMethod|iwr|irm)"
# A shell may sit behind any path and any of the words that run the next one (sudo, env, ...).
_RUNNERS = r"(?:(?:/[\w./-]*/)?(?:sudo|doas|env|command|exec|nohup|xargs|time)\s+(?:-\S+\s+)*)*"
_SHELLS = (
    rf"{_RUNNERS}(?:/[\w./-]*/)?(?:(?:ba|z|k|da|fi|c|tc)?sh\b|python[0-9.]*\b|perl\b|ruby\b|node\b|php\b|pwsh\b|osascript\b)"
)
_PIPE_TO_SHELL = re.compile(rf"\b{_FETCH}\b[^\n|;]*(?:\|[^\n|;]*)*?\|\s*(?:{_SHELLS})", re.I)
_PROCESS_SUBST = re.compile(rf"(?:\b(?:ba|z)?sh|\bsource|\.)\s+<\(\s*{_FETCH}\b", re.I)
_SUBSHELL = re.compile(rf"\b(?:(?:ba|z)?sh|python[0-9.]*)\s+-c\s+['\"]?\s*\$\(\s*{_FETCH}\b", re.I)
_EVAL_FETCH = re.compile(rf"\beval\s+['\"]?\$\(\s*{_FETCH}\b", re.I)
_PS_FETCH = r"(?:iwr|irm|Invoke-WebRequest|Invoke-RestMethod|\(?New-Object\s+(?:System\.)?Net\.WebClient\)?\.Download(?:String|Data))"
_PS_PIPE = re.compile(rf"{_PS_FETCH}\b[^\n]*\|\s*(?:iex|Invoke-Expression)\b", re.I)
_PS_IEX = re.compile(rf"\b(?:iex|Invoke-Expression)\s*[\(\s]\s*[\(\$]*\s*(?:&\s*)?{_PS_FETCH}", re.I)
_DOWNLOAD_RUN = re.compile(
    rf"\b{_FETCH}\b[^\n]*?(?:-o|-O|--output|>)\s*['\"]?(?P<file>[^\s'\";&|]+)[^\n]*?chmod\s+(?:[0-7]{{3,4}}|\+?[ugoa]*\+x)\s+['\"]?(?P=file)",
    re.I,
)

_DOWNLOAD_SOURCE = re.compile(
    rf"\b{_FETCH}\b[^\n]*?(?:-o|-O|--output|>)\s*['\"]?(?P<file>[^\s'\";&|]+)[^\n]*?(?:&&|\|\||;)\s*"
    rf"(?:{_SHELLS}|source\b|\.)\s+['\"]?(?P=file)(?![^\s'\";&|])",
    re.I,
)

_DECODE_TO_SHELL = re.compile(
    rf"(?:base64\s+(?:-d|--decode|-D|-di)\b|openssl\s+(?:enc\s+)?-?base64\s+-d|xxd\s+-r(?:\s+-p)?|b64decode)[^\n]*\|\s*(?:{_SHELLS})",
    re.I,
)
_DECODE_EVAL = re.compile(
    r"\b(?:eval|exec|Function)\s*\(\s*(?:new\s+)?(?:atob|unescape|base64_decode|gzinflate|str_rot13|"
    r"(?:base64\.)?b64decode|base64\.decodebytes|zlib\.decompress|codecs\.decode|bytes\.fromhex|"
    r"Buffer\.from|__import__\(\s*['\"](?:base64|zlib|codecs)['\"]\s*\))",
    re.I,
)
_NEW_FUNCTION = re.compile(r"\bnew\s+Function\s*\(\s*atob\s*\(", re.I)
_PS_ENCODED = re.compile(r"\bpowershell(?:\.exe)?\b[^\n]*\s-(?:e|ec|en|enc|encodedcommand)\s+[A-Za-z0-9+/=]{16,}", re.I)

_HOME = r"(?:~|\$HOME|\$\{HOME\}|%USERPROFILE%|/home/[^/\s]+|/Users/[^/\s]+|/root|os\.homedir\(\)|Path\.home\(\)|expanduser\(['\"]~)"
_SECRET_FILES = (
    r"\.ssh(?:/|\\|\b)|\.aws/(?:credentials|config)|\.aws\b|\.kube/config|\.docker/config\.json|\.gnupg\b|\.netrc\b|"
    r"\.git-credentials\b|\.npmrc\b|\.pypirc\b|\.config/gcloud|\.azure\b|\.bitcoin/wallet\.dat|wallet\.dat\b|"
    r"\.electrum/wallets|\.ethereum/keystore|Exodus/exodus\.wallet|\.config/solana/id\.json"
)
_SECRET_PATH = re.compile(rf"{_HOME}[/\\]+(?:{_SECRET_FILES})|(?<![\w.])(?:id_rsa|id_ed25519|id_ecdsa|id_dsa)\b", re.I)
_READ_VERB = re.compile(
    r"\b(?:cat|cp|scp|rsync|tar|zip|7z|base64|xxd|head|tail|less|more|strings|open|read_text|readFile(?:Sync)?|"
    r"Get-Content|type|curl|wget|nc|ncat|socat|upload|exfil\w*|send|post|copy)\b",
    re.I,
)
_SP = r"(?:\\ | |%20)"  # a space, as written in a shell (escaped) or a URL
_BROWSER = re.compile(
    rf"Library/Application{_SP}Support/(?:Google/Chrome|BraveSoftware|Microsoft{_SP}Edge|Firefox|com\.operasoftware)|"
    r"\.config/(?:google-chrome|chromium|BraveSoftware|microsoft-edge)|\.mozilla/firefox|"
    r"AppData[/\\]+(?:Local|Roaming)[/\\]+(?:Google[/\\]+Chrome|Mozilla[/\\]+Firefox|Microsoft[/\\]+Edge|BraveSoftware)|"
    rf"(?:['\"/\\]|\b)(?:Login{_SP}Data|Web{_SP}Data|key4\.db|logins\.json|cookies\.sqlite|Local{_SP}State)\b",
    re.I,
)
# An agent's own config and dotenv files hold its API keys: reading them is normal, sending them out is not.
_AGENT_SECRETS = re.compile(r"(?:[~/]|\$HOME/|\$\{HOME\}/)[^\s'\"]*\.(?:clawdbot|openclaw|moltbot)/[^\s'\"]*|(?<![\w.-])\.env\b")
_KEYCHAIN = re.compile(r"\bsecurity\s+(?:find-generic-password|find-internet-password|dump-keychain)\b", re.I)
_ENV_DUMP = re.compile(
    r"(?:(?<![\w-])(?:env|printenv|set|export\s+-p)\s*(?:\||>\s*/dev/tcp)|Get-ChildItem\s+env:|"
    r"JSON\.stringify\(\s*process\.env\s*\)|dict\(\s*os\.environ\s*\)|os\.environ\.copy\(\)|\bprocess\.env\b\s*\)|"
    r"json\.dumps\(\s*(?:dict\()?\s*os\.environ)",
    re.I,
)
_NETWORK = re.compile(
    r"\b(?:curl|wget|nc|ncat|netcat|socat|Invoke-WebRequest|iwr|fetch|requests\.(?:post|put|get)|urllib|http\.request|"
    r"axios|XMLHttpRequest|sendBeacon|/dev/tcp/)",
    re.I,
)

_MINER = re.compile(
    r"\b(?:xmrig|xmr-stak|minerd|cpuminer|cgminer|bfgminer|ethminer|nbminer|lolminer|phoenixminer|t-rex\s+-a|srbminer|"
    r"teamredminer|nanominer)\b|stratum\+(?:tcp|ssl|tls)://|--donate-level\b|"
    r"\b(?:supportxmr|moneroocean|nanopool|minexmr|hashvault|herominers|2miners|f2pool|c3pool|unmineable)\.(?:com|org|net|pro|stream)\b",
    re.I,
)

_BASE64_BLOB = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{200,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX_ESCAPES = re.compile(r"(?:\\x[0-9a-fA-F]{2}){8,}|(?:\\u00[0-9a-fA-F]{2}){8,}|(?:%[0-9a-fA-F]{2}){24,}")
_CHAR_CODES = re.compile(r"String\.fromCharCode\(\s*\d+(?:\s*,\s*\d+){7,}|(?:chr\(\s*\d+\s*\)\s*\+\s*){6,}", re.I)

_TERMINALS = r"(?:terminal|command[- ]?line|command prompt|shell|powershell|cmd(?:\.exe)?|console|run dialog)"
_TERMINAL_INSTRUCTION = re.compile(
    r"\b(?:paste|copy(?:\s+and\s+paste)?|run|execute|enter|type)\b[^\n]{0,80}?\b(?:in|into|on|inside)\s+"
    rf"(?:your\s+|a\s+|the\s+|an?\s+)?(?:macos\s+|windows\s+|admin(?:istrator)?\s+)?{_TERMINALS}\b"
    rf"|\bopen\s+(?:up\s+)?(?:your\s+|a\s+|the\s+)?(?:macos\s+|windows\s+)?{_TERMINALS}\b[^\n]{{0,60}}?\b(?:paste|run|type|enter|execute)\b"
    r"|\b(?:win(?:dows)?\s*\+\s*r|cmd\s*\+\s*space)\b",
    re.I,
)
_PREREQUISITE = re.compile(
    r"\b(?:prerequisites?|pre-requisites?|requirements?|required|before (?:you|using|installing|running|starting)|"
    r"first[, ]+(?:you )?(?:must|need)|you must (?:first )?install|setup|set up|install(?:ation)?|dependenc(?:y|ies)|driver)\b",
    re.I,
)
_ARCHIVE_LINK = re.compile(r"https?://\S+\.(?:zip|rar|7z|exe|msi|dmg|pkg|scr|bat|cmd|ps1|vbs|jar|app|apk)\b", re.I)
_PASSWORD = re.compile(r"\b(?:password|passcode|pass|pwd|pw)\s*[:=]\s*\S+", re.I)
_URL = re.compile(r"https?://[^\s'\"`<>)\]]+", re.I)
_IP_URL = re.compile(r"https?://\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/|\b)", re.I)
_PASTE_HOSTS = re.compile(
    r"https?://(?:[\w-]+\.)*(?:pastebin\.com|paste\.ee|glot\.io|hastebin\.com|ghostbin\.\w+|rentry\.co|transfer\.sh|"
    r"bit\.ly|tinyurl\.com|is\.gd|t\.co|cutt\.ly|files\.catbox\.moe|anonfiles\.com|mega\.nz|dropbox\.com|"
    r"drive\.google\.com|discord(?:app)?\.com/attachments|ngrok(?:-free)?\.(?:io|app))",
    re.I,
)

# https hosts whose scripts are published source (still a risk: medium, not high).
WELL_KNOWN_HOSTS = frozenset({
    "github.com", "raw.githubusercontent.com", "gist.githubusercontent.com", "objects.githubusercontent.com",
    "gitlab.com", "bitbucket.org", "codeberg.org", "sh.rustup.rs", "static.rust-lang.org", "get.docker.com",
    "deb.nodesource.com", "rpm.nodesource.com", "astral.sh", "bun.sh", "deno.land", "brew.sh", "install.python-poetry.org",
    "get.pnpm.io", "sdk.cloud.google.com", "cli.github.com", "nixos.org", "pyenv.run", "get.helm.sh", "ollama.com",
})  # fmt: skip


def _line_urls_are_well_known(line: str) -> bool:
    urls = _URL.findall(line)
    if not urls:
        return False
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme.lower() != "https" or (parts.hostname or "").lower() not in WELL_KNOWN_HOSTS:
            return False
    return True


# ----------------------------------------------------------------------------------- unicode

_BIDI = {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}
_ZERO_WIDTH = {0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x180E, 0xFEFF}
_MARKS = {0x200E, 0x200F, 0x061C, 0x00AD}
_SUSPECT = _BIDI | _ZERO_WIDTH | _MARKS
_SUSPECT_CHARS = re.compile("[" + "".join(map(chr, sorted(_SUSPECT))) + "\U000e0000-\U000e007f\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _is_variation_selector(ch: str) -> bool:
    return bool(ch) and (0xFE00 <= ord(ch) <= 0xFE0F or 0xE0100 <= ord(ch) <= 0xE01EF)


def _is_lone_variant(line: str, index: int) -> bool:
    """A variation selector right after the character it varies (an emoji's U+FE0F, an
    ideograph's variant), not after another selector or a space: runs of them encode hidden
    bytes (the GlassWorm technique)."""
    before = line[index - 1 : index]
    return bool(before) and not before.isspace() and not _is_variation_selector(before)


def _is_pictograph(ch: str) -> bool:
    if not ch:
        return False
    code = ord(ch)
    return (
        0x1F000 <= code <= 0x1FAFF
        or 0x2600 <= code <= 0x27BF
        or 0x2300 <= code <= 0x23FF
        or code in (0xFE0F, 0x20E3)
        or 0x1F3FB <= code <= 0x1F3FF
        or unicodedata.category(ch) == "So"
    )


def _unicode_findings(line: str, *, file: str, number: int, at_file_start: bool) -> list[Finding]:
    found: list[Finding] = []
    seen: set[int] = set()
    for match in _SUSPECT_CHARS.finditer(line):
        index = match.start()
        code = ord(line[index])
        if code == 0xFEFF and at_file_start and index == 0:
            continue  # a byte order mark
        if code == 0x200D and _is_pictograph(line[index - 1 : index]) and _is_pictograph(line[index + 1 : index + 2]):
            continue  # an emoji sequence (👩‍💻)
        if 0xE0000 <= code <= 0xE007F and _in_flag_sequence(line, index):
            continue  # a subdivision flag (🏴 + tag letters + cancel tag)
        if _is_variation_selector(line[index]) and _is_lone_variant(line, index):
            continue
        severity = Severity.MEDIUM if code in _MARKS else Severity.HIGH
        kind = (
            "a bidi control" if code in _BIDI else "a run of variation selectors" if _is_variation_selector(line[index])
            else "a tag character" if code >= 0xE0000 else
            "a zero-width character" if code in _ZERO_WIDTH else "an invisible mark"
        )  # fmt: skip
        if hash(kind) in seen:  # one finding per kind and line: a hidden message is one finding
            continue
        seen.add(hash(kind))
        name = unicodedata.name(chr(code), f"U+{code:04X}")
        found.append(
            Finding(
                rule="hidden-unicode",
                severity=severity,
                file=file,
                line=number,
                message=f"{kind}: U+{code:04X} {name} (column {index + 1})",
                excerpt=_excerpt(line),
            )
        )
    return found


def _in_flag_sequence(line: str, index: int) -> bool:
    start = index
    while start > 0 and 0xE0000 <= ord(line[start - 1]) <= 0xE007F:
        start -= 1
    if start == 0 or ord(line[start - 1]) != 0x1F3F4:
        return False
    end = index
    while end < len(line) and 0xE0020 <= ord(line[end]) <= 0xE007E:
        end += 1
    return end < len(line) and ord(line[end]) == 0xE007F


def _excerpt(line: str) -> str:
    """The line as a person may see it: invisible characters named, cut to a length."""
    shown = []
    for ch in line.strip():
        code = ord(ch)
        if code in _SUSPECT or 0xE0000 <= code <= 0xE01EF or 0xFE00 <= code <= 0xFE0F or (
            unicodedata.category(ch) in ("Cc", "Cf") and ch != "\t"
        ):
            shown.append(f"<U+{code:04X}>")
        else:
            shown.append(ch)
    text = "".join(shown)
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"


# ----------------------------------------------------------------------------------- scanning


def _line_findings(line: str, *, file: str, number: int) -> list[Finding]:
    found: list[Finding] = []

    def add(rule: str, severity: Severity, message: str) -> None:
        found.append(Finding(rule=rule, severity=severity, file=file, line=number, message=message, excerpt=_excerpt(line)))

    fetch_exec = (
        _PIPE_TO_SHELL.search(line) or _PROCESS_SUBST.search(line) or _SUBSHELL.search(line) or _EVAL_FETCH.search(line)
        or _PS_PIPE.search(line) or _PS_IEX.search(line) or _DOWNLOAD_RUN.search(line) or _DOWNLOAD_SOURCE.search(line)
    )  # fmt: skip
    if fetch_exec:
        if _line_urls_are_well_known(line):
            add("download-and-execute", Severity.MEDIUM, "downloads a script from a well-known code host and runs it")
        else:
            add("download-and-execute", Severity.HIGH, "downloads a script or program and runs it at once")
    if _DECODE_TO_SHELL.search(line) or _DECODE_EVAL.search(line) or _NEW_FUNCTION.search(line) or _PS_ENCODED.search(line):
        add("decode-and-execute", Severity.HIGH, "decodes hidden text and runs it")
    secret_path = _SECRET_PATH.search(line)
    browser = _BROWSER.search(line)
    if secret_path or browser:
        what = (secret_path or browser).group(0)  # type: ignore[union-attr]
        if _READ_VERB.search(line.replace(what, " ")):
            add("credential-harvesting", Severity.HIGH, f"reads credential or browser data ({what.strip()})")
        else:
            add("credential-harvesting", Severity.MEDIUM, f"names a credential or browser data location ({what.strip()})")
    if _ENV_DUMP.search(line) and _NETWORK.search(line):
        add("credential-harvesting", Severity.HIGH, "sends the environment (API keys, tokens) over the network")
    elif (agent := _AGENT_SECRETS.search(line)) and _NETWORK.search(line.replace(agent.group(0), " ")):
        add("credential-harvesting", Severity.HIGH, f"sends an agent's config or .env file over the network ({agent.group(0)})")
    if _KEYCHAIN.search(line):
        add("credential-harvesting", Severity.MEDIUM, "queries the system keychain for a password")
    if _MINER.search(line):
        add("crypto-miner", Severity.HIGH, "runs or configures a cryptocurrency miner")
    blob = _BASE64_BLOB.search(line)
    if blob and not _inside_url(line, blob.start()):
        add("obfuscation", Severity.MEDIUM, f"a base64 blob of {len(blob.group(0))} characters")
    if _HEX_ESCAPES.search(line):
        add("obfuscation", Severity.MEDIUM, "a run of hex or percent escapes that hides text")
    if _CHAR_CODES.search(line):
        add("obfuscation", Severity.MEDIUM, "text built from character codes")
    return found


def _inside_url(line: str, index: int) -> bool:
    return any(m.start() <= index < m.end() for m in _URL.finditer(line))


_CONTEXT_LINES = 12


def _prerequisite_findings(lines: Sequence[str], *, file: str) -> list[Finding]:
    """An instruction to paste or run something in a terminal: medium alone, high inside a
    prerequisite/setup passage that fetches, decodes or downloads."""
    found: list[Finding] = []
    for index, line in enumerate(lines):
        archive = _ARCHIVE_LINK.search(line)
        window = lines[max(0, index - _CONTEXT_LINES) : index + _CONTEXT_LINES + 1]
        joined = "\n".join(window)
        if archive and _PASSWORD.search("\n".join(lines[max(0, index - 3) : index + 4])):
            found.append(
                Finding(rule="fake-prerequisite", severity=Severity.HIGH, file=file, line=index + 1,
                        message="a password-protected download to run (a way past antivirus scans)", excerpt=_excerpt(line))
            )  # fmt: skip
            continue
        if not _TERMINAL_INSTRUCTION.search(line):
            continue
        context_prereq = _PREREQUISITE.search(joined) is not None
        dangerous = any(
            _PIPE_TO_SHELL.search(other) or _DECODE_TO_SHELL.search(other) or _PS_PIPE.search(other)
            or _PS_IEX.search(other) or _PS_ENCODED.search(other) or _IP_URL.search(other) or _PASTE_HOSTS.search(other)
            or _ARCHIVE_LINK.search(other) or (_BASE64_BLOB.search(other) and not _inside_url(other, 0))
            for other in window
        )  # fmt: skip
        if context_prereq and dangerous:
            found.append(
                Finding(rule="fake-prerequisite", severity=Severity.HIGH, file=file, line=index + 1,
                        message="a 'prerequisite' that has the user paste a command that fetches or decodes code into a terminal",
                        excerpt=_excerpt(line))
            )  # fmt: skip
        elif dangerous:
            found.append(
                Finding(rule="fake-prerequisite", severity=Severity.MEDIUM, file=file, line=index + 1,
                        message="tells the user to run a command that fetches or decodes code in a terminal", excerpt=_excerpt(line))
            )  # fmt: skip
    return found


_MAX_LINE_CHARS = 20_000
# A line that ends in one of these goes on in the next, for a shell (and for whoever pastes it).
_CONTINUED = re.compile(r"(?:\\|\||&&|\|\|)\s*$")
# Shell quoting a person or bash reads through: c''url, ba""sh, cu\rl.
_QUOTING = re.compile(r"['\"]|\\(?=\w)")
_B64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{20,}={0,2}(?![A-Za-z0-9+/=])")
_DECODED_RULES = frozenset({"download-and-execute", "decode-and-execute", "credential-harvesting", "crypto-miner"})


def _lines(text: str) -> list[str]:
    """Lines where a shell and an editor break them: at newlines only. (``str.splitlines`` also
    breaks at U+001C-1E, U+0085 and U+2028, which bash and a model read as part of the line, so
    ``curl URL <U+2028>| bash`` would be two harmless lines.)"""
    return [line.removesuffix("\r") for line in text.split("\n")] if text else []


def _logical_lines(lines: Sequence[str]) -> list[tuple[int, str]]:
    """(first line number, text) of each command as a shell reads it: continued lines joined."""
    joined: list[tuple[int, str]] = []
    start, parts = 0, list[str]()
    for index, line in enumerate(lines):
        if not parts:
            start = index + 1
        continued = _CONTINUED.search(line) is not None and index + 1 < len(lines) and len(parts) < 64
        parts.append(line.rstrip().removesuffix("\\") if continued else line)
        if not continued:
            joined.append((start, " ".join(parts)))
            parts = []
    return joined


def _decoded(line: str) -> list[str]:
    """The printable text behind each base64 token of ``line`` (a command decoded to a file and
    run from there is no pipe into a shell)."""
    texts = []
    for match in _B64_TOKEN.finditer(line):
        token = match.group(0)
        try:
            raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
            text = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if len(text) >= 8 and all(ch.isprintable() or ch in "\t\n\r" for ch in text):
            texts.append(text)
    return texts


def _command_findings(line: str, *, file: str, number: int) -> list[Finding]:
    """``_line_findings`` over the line as written, as a shell reads it past its quoting, and
    over the text of its base64 tokens; each (rule, severity) once."""
    line = line[:_MAX_LINE_CHARS]
    found = _line_findings(line, file=file, number=number)
    unquoted = _QUOTING.sub("", line)
    if unquoted != line:
        found += _line_findings(unquoted, file=file, number=number)
    for text in _decoded(line):
        for sub in _lines(text)[:64]:
            found += [
                replace(f, message=f"{f.message} (inside base64 text)", excerpt=_excerpt(line))
                for f in _line_findings(sub[:_MAX_LINE_CHARS], file=file, number=number)
                if f.rule in _DECODED_RULES
            ]
    unique: dict[tuple[str, Severity], Finding] = {}
    for finding in found:
        unique.setdefault((finding.rule, finding.severity), finding)
    return list(unique.values())


def scan_text(text: str, *, file: str) -> list[Finding]:
    """Every finding in one text (a file's content; ``file`` names it in the findings)."""
    lines = _lines(text)
    found: list[Finding] = []
    for number, line in enumerate(lines, start=1):
        found.extend(_unicode_findings(line, file=file, number=number, at_file_start=number == 1))
    for number, line in _logical_lines(lines):
        found.extend(_command_findings(line, file=file, number=number))
    found.extend(_prerequisite_findings(lines, file=file))
    return sorted(found, key=lambda f: (f.file, f.line, -f.severity.rank, f.rule))


# Files read as text whatever bytes they hold: a NUL does not make a SKILL.md or a script binary.
_TEXT_NAMES = (
    ".md", ".markdown", ".txt", ".rst", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".psm1", ".bat", ".cmd", ".py",
    ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".json", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".env",
)  # fmt: skip


def _is_binary(data: bytes, name: str) -> bool:
    """What the bytes say, never the name alone: a script called ``logo.png`` is read."""
    if name.lower().endswith(_TEXT_NAMES) or data.startswith(b"#!"):
        return False
    return b"\x00" in data[:8192]


def scan_files(files: Mapping[str, bytes]) -> ScanReport:
    """Scan in-memory files (relative path -> bytes): each line, each script whole, and the
    scripts together (one reads credentials, another sends them)."""
    findings: list[Finding] = []
    count = 0
    reads: list[tuple[str, int, str]] = []  # (file, line, what) of each script's first credential read
    sends: list[tuple[str, int, str]] = []
    for name in sorted(files):
        data = files[name]
        if _is_binary(data, name):
            continue
        count += 1
        if len(data) > MAX_SCAN_BYTES:
            findings.append(Finding(rule="unscanned", severity=Severity.LOW, file=name, line=0,
                                    message=f"only the first {MAX_SCAN_BYTES:,} bytes were scanned"))  # fmt: skip
            data = data[:MAX_SCAN_BYTES]
        text = data.decode("utf-8", errors="replace")
        findings.extend(scan_text(text, file=name))
        if _is_script(name, text):
            read, send = _first(_CREDENTIAL_READ, text), _first(_SEND, text)
            if read is not None:
                reads.append((name, *read))
            if send is not None:
                sends.append((name, *send))
    findings.extend(_harvest_findings(reads, sends, findings))
    return ScanReport(findings=tuple(findings), files=count)


# -- the whole-file rule: a credential location or the whole environment read, and a network send

_SCRIPT_NAMES = (
    ".py", ".js", ".mjs", ".cjs", ".ts", ".mts", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".psm1", ".bat",
    ".cmd", ".rb", ".pl", ".php", ".lua", ".go",
)  # fmt: skip
_CREDENTIAL_READ = re.compile(
    # a credential file or folder named as a path part, however the path is built
    r"(?<![\w.-])(?:\.ssh|\.aws|\.kube|\.gnupg|\.docker|\.netrc|\.git-credentials|\.npmrc|\.pypirc|\.azure|"
    r"\.config/gcloud|gcloud/credentials|id_rsa|id_ed25519|id_ecdsa|id_dsa|wallet\.dat|key4\.db|logins\.json|"
    r"cookies\.sqlite|Login Data|Web Data|Local State|\.clawdbot|\.openclaw|\.moltbot|\.electrum|"
    r"\.ethereum/keystore|exodus\.wallet|Keychains|\.password-store)(?![\w-])"
    # the whole environment, not one variable of it
    r"|dict\(\s*os\.environ\s*\)|os\.environ\.(?:copy|items|values)\(\)|\*\*\s*os\.environ\b|"
    r"(?:json\.dumps|str|repr|list|sorted)\(\s*(?:dict\(\s*)?os\.environ\b(?!\s*[.\[])|"
    r"(?:json|data|params|files)\s*=\s*(?:dict\(\s*)?os\.environ\b(?!\s*[.\[])|os\.environb\b|"
    r"\.\.\.\s*process\.env\b|JSON\.stringify\(\s*process\.env\b|"
    r"Object\.(?:entries|keys|values|assign)\([^)]*\bprocess\.env\s*\)|\bprocess\.env\s*[,)]|"
    r"\bENV\.(?:to_h|to_a|to_hash|each)\b|\bos\.Environ\(\)|GetEnvironmentVariables\(|Get-ChildItem\s+env:|"
    r"(?<![\w$-])(?:printenv|env)\s*(?:\||>|$)",
    re.I | re.M,
)
_SEND = re.compile(
    r"\brequests\.(?:post|put|patch|get|request|Session)\b|\bhttpx\.(?:post|put|patch|get|request|stream|Client|AsyncClient)\b|"
    r"\burllib\.request\b|\burlopen\(|\burllib3\b|\bhttp\.client\b|HTTPS?Connection\(|\baiohttp\b|"
    r"\bsocket\.(?:socket|create_connection)\(|\bsmtplib\b|\bftplib\b|\bparamiko\b|\bwebsockets?\b|"
    r"\bfetch\(|\baxios\b|\bhttps?\.(?:request|get)\(|XMLHttpRequest|sendBeacon|\bnet\.(?:connect|Socket|createConnection)\b|"
    r"\bNet::HTTP\b|\bhttp\.(?:Post|Get|NewRequest)\(|"
    r"(?<![\w-])(?:curl|wget|nc|ncat|netcat|socat|scp|rsync)\s|/dev/tcp/|Invoke-WebRequest|Invoke-RestMethod|"
    r"\b(?:iwr|irm)\s|Net\.WebClient",
    re.I,
)


def _is_script(name: str, text: str) -> bool:
    return name.lower().endswith(_SCRIPT_NAMES) or text.startswith("#!")


def _first(pattern: re.Pattern[str], text: str) -> tuple[int, str] | None:
    """(line, text) of the first match of ``pattern`` in ``text``. Comments count too: a comment
    can hold the real command (``# curl ...`` cut out and run by ``sed | sh``)."""
    match = pattern.search(text)
    if match is None:
        return None
    return text.count("\n", 0, match.start()) + 1, match.group(0).strip()


def _harvest_findings(
    reads: Sequence[tuple[str, int, str]], sends: Sequence[tuple[str, int, str]], found: Sequence[Finding]
) -> list[Finding]:
    """High ``credential-harvesting`` for a script that reads credentials (or the whole
    environment) where that script, or another script of the same skill, sends over the network.
    Nothing is added to a file that has a high credential-harvesting finding already."""
    if not reads or not sends:
        return []
    flagged = {f.file for f in found if f.rule == "credential-harvesting" and f.severity is Severity.HIGH}
    added: list[Finding] = []
    for file, line, what in reads:
        if file in flagged:
            continue
        send = next((s for s in sends if s[0] == file), sends[0])
        where = f"line {send[1]}" if send[0] == file else f"{send[0]} line {send[1]}"
        added.append(
            Finding(
                rule="credential-harvesting", severity=Severity.HIGH, file=file, line=line,
                message=f"reads credentials or the whole environment ({what}) and sends over the network "
                f"({send[2]}, {where})",
                excerpt=_excerpt(what),
            )
        )
    return added


def scan_path(path: Path) -> ScanReport:
    """Scan a file or every file under a folder (hidden folders too: they install as well)."""
    path = Path(path)
    if path.is_file():
        return scan_files({path.name: _read_head(path)})
    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames.sort()
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            if full.is_symlink() or not full.is_file():
                continue
            files[full.relative_to(path).as_posix()] = _read_head(full)
    return scan_files(files)


def _read_head(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(MAX_SCAN_BYTES + 1)


def scan_command(command: str | None, args: Iterable[str] = (), env: Mapping[str, str] | None = None, *, file: str) -> list[Finding]:
    """An MCP server's launch line (command, arguments, environment values) against the rules."""
    import shlex

    parts = [command or "", *args]
    line = " ".join(shlex.quote(p) if p and " " in p and not p.startswith("-") else p for p in parts if p)
    found = scan_text(line, file=file)
    # A shell's -c argument is a script of its own: scan it as written.
    for index, arg in enumerate(parts):
        if arg in ("-c", "/c", "-Command", "-command") and index + 1 < len(parts):
            found.extend(f for f in scan_text(parts[index + 1], file=file) if f not in found)
    for name, value in (env or {}).items():
        found.extend(scan_text(f"{name}={value}", file=f"{file} env {name}"))
    return found


# -------------------------------------------------------------------- tool descriptions
# A tool's description (and its parameters' descriptions) is sent to every run that may call
# the tool, as a tool definition: text a model reads as the tool's own words. Beyond the rules
# above, a description must not speak to the agent about anything but the tool: no system or
# developer notes, no "ignore previous instructions", no orders to call other tools first.
DESCRIPTION_RULE = "agent-instruction"
_IMPERSONATION = re.compile(
    r"\b(?:important|urgent|critical|mandatory)?\s*(?:system|developer|admin(?:istrator)?|security)\s+"
    r"(?:note|notice|message|prompt|instruction|override|update|directive)s?\b\s*[:!-]"
    r"|<\s*/?\s*(?:system|instructions?|developer|assistant|user|tool_output|skill|untrusted)\b",
    re.I,
)
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|other|all|any|your)\b"
    r"[^.\n]{0,30}\b(?:instructions?|rules?|prompts?|polic(?:y|ies)|guidelines?|messages?)\b",
    re.I,
)
_AGENT = r"(?:agents?|assistants?|the model|models|llms?|ai|you|claude|gpt)"
_ORDER = re.compile(
    rf"\b{_AGENT}\b[^.\n]{{0,30}}\b(?:must|should|shall|need to|have to|are required to)\b[^.\n]{{0,20}}"
    r"\b(?:always|first|never|immediately|also|before|instead)\b[^.\n]{0,40}"
    r"\b(?:call|run|invoke|execute|send|fetch|post|upload|exec|approve)\b",
    re.I,
)
_DESCRIPTION_PATTERNS = (
    (_IMPERSONATION, "speaks as the system, a developer or pincer's own tags"),
    (_OVERRIDE, "tells the agent to ignore its instructions"),
    (_ORDER, "orders the agent to call, run or send something beyond this tool"),
)


def scan_tool_description(text: str, *, file: str) -> list[Finding]:
    """The findings of a tool description: every rule of :func:`scan_text` (a ``curl | sh`` in a
    description is as bad as in a skill), and ``agent-instruction`` (high) for text that
    addresses the agent instead of describing the tool."""
    found = scan_text(text, file=file)
    for number, line in enumerate(_lines(text), start=1):
        for pattern, message in _DESCRIPTION_PATTERNS:
            if pattern.search(line):
                found.append(Finding(rule=DESCRIPTION_RULE, severity=Severity.HIGH, file=file, line=number,
                                     message=f"the description {message}", excerpt=_excerpt(line)))  # fmt: skip
                break
    return found
