"""The leak scanner: planted secrets never survive, clean output is untouched, shapes are caught.

The encodings are computed here independently of ``pincer.safety.encodings``; the base64
check decodes what is left of a blob at every alignment rather than looking for a core.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.safety.encodings import percent_decoded
from pincer.safety.patterns import SHAPES
from pincer.safety.scanner import MAX_FAST_DEPTH, LeakScanner

MARKER = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
KINDS = [
    "secret",
    "secret_url",
    "secret_json",
    "secret_hex",
    "secret_base64",
    "unscannable_output",
    *(s.kind for s in SHAPES),
]
MARKER_WORDS = "\n".join(f"[REDACTED:{kind}]" for kind in KINDS)  # a secret inside a marker is readable there
ANCHORS = [a for s in SHAPES for a in s.anchors]

# Secrets: no brackets (so no leftover can run into a marker), long enough for encoded forms.
secret_chars = st.characters(blacklist_characters="[]", blacklist_categories=("Cs",))
secrets = st.text(secret_chars, min_size=8, max_size=40).filter(lambda s: s not in MARKER_WORDS)
ascii_secrets = st.text(
    string.ascii_letters + string.digits + "-_.~!@#$%^&*()+=/:;?,'\" ", min_size=8, max_size=40
).filter(lambda s: "[" not in s and s not in MARKER_WORDS)
any_secret = st.one_of(secrets, ascii_secrets)
noise = st.text(max_size=60)


def url_forms(secret: str) -> set[str]:
    return {quote(secret, safe=""), quote(secret), quote_plus(secret), quote_plus(secret, safe="/")}


def plain_forms(secret: str) -> set[str]:
    """Every form of ``secret`` that must not appear in scanned output."""
    data = secret.encode()
    b64 = base64.b64encode(data).decode()
    forms = {secret, data.hex(), data.hex().upper(), b64, b64.rstrip("=")}
    forms |= {f.translate(str.maketrans("+/", "-_")) for f in list(forms)}
    forms |= url_forms(secret)
    forms.add(json.dumps(secret)[1:-1])
    return forms


def decodes_to_contain(text: str, data: bytes) -> bool:
    """Whether any run of base64 characters in ``text``, decoded at any alignment, holds ``data``."""
    for run in re.findall(r"[A-Za-z0-9+/\-_]+", text):
        run = run.translate(str.maketrans("-_", "+/"))
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            try:
                if data in base64.b64decode(chunk, validate=True):
                    return True
            except binascii.Error:
                continue
    return False


def assert_gone(output: str, secret: str) -> None:
    for form in plain_forms(secret):
        assert form not in output, f"a form of the secret survived: {form!r}"
    assert not decodes_to_contain(output, secret.encode())
    assert secret not in unquote(output) and secret not in unquote_plus(output), "it survived percent-encoded"


# -- planted secrets never survive --------------------------------------------------------


ENCODERS = {
    "raw": lambda s: s,
    "hex": lambda s: s.encode().hex(),
    "HEX": lambda s: s.encode().hex().upper(),
    "b64": lambda s: base64.b64encode(s.encode()).decode(),
    "b64-nopad": lambda s: base64.b64encode(s.encode()).decode().rstrip("="),
    "b64url": lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
    "b64url-nopad": lambda s: base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
    "quote": lambda s: quote(s, safe=""),
    "quote-slash": lambda s: quote(s),
    "quote_plus": quote_plus,
    "json": lambda s: json.dumps(s)[1:-1],
    # Every byte escaped, as no encoder does by default (encodeURIComponent leaves A-Z a-z 0-9 -_.!~*'()).
    "percent-all": lambda s: "".join(f"%{b:02X}" for b in s.encode()),
    "percent-all-lower": lambda s: "".join(f"%{b:02x}" for b in s.encode()),
    "percent-twice": lambda s: quote(quote(s, safe=""), safe=""),
}


@settings(max_examples=300, deadline=None)
@given(
    secret=any_secret,
    before=noise,
    after=noise,
    encoding=st.sampled_from(sorted(ENCODERS)),
    others=st.lists(secrets, max_size=3),
)
def test_planted_secret_never_survives_in_text(
    secret: str, before: str, after: str, encoding: str, others: list[str]
) -> None:
    scanner = LeakScanner([*others, secret])
    text = before + ENCODERS[encoding](secret) + after
    output, count = scanner.scan_text(text)
    assert count >= 1
    assert_gone(output, secret)
    assert scanner.contains_secret(text)


@settings(max_examples=300, deadline=None)
@given(
    secret=any_secret,
    prefix=st.binary(max_size=40),
    suffix=st.binary(max_size=40),
    urlsafe=st.booleans(),
    strip=st.booleans(),
    before=noise,
    after=noise,
)
def test_secret_inside_a_larger_base64_blob_never_survives(
    secret: str, prefix: bytes, suffix: bytes, urlsafe: bool, strip: bool, before: str, after: str
) -> None:
    data = secret.encode()
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    blob = encode(prefix + data + suffix).decode()
    if strip:
        blob = blob.rstrip("=")
    output, count = LeakScanner([secret]).scan_text(before + blob + after)
    assert count >= 1
    assert not decodes_to_contain(output, data)
    assert secret not in output


def test_every_alignment_inside_a_blob() -> None:
    secret = "correct-horse-battery"
    scanner = LeakScanner([secret])
    for offset in range(6):
        for tail in range(4):
            blob = base64.b64encode(b"\xff" * offset + secret.encode() + b"\xfe" * tail).decode()
            output, count = scanner.scan_text(blob)
            assert count == 1 and not decodes_to_contain(output, secret.encode()), (offset, tail, output)


json_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)


def plant(value: Any, secret_text: str, path: list[int]) -> Any:
    """Put ``secret_text`` somewhere in ``value``: into a string, a key, or as a new leaf."""
    choice = path[0] if path else 0
    rest = path[1:]
    if isinstance(value, dict) and value:
        keys = list(value)
        key = keys[choice % len(keys)]
        if choice % 3 == 0:
            return {**{k: v for k, v in value.items() if k != key}, key + secret_text: value[key]}
        return {**value, key: plant(value[key], secret_text, rest)}
    if isinstance(value, list) and value:
        index = choice % len(value)
        return value[:index] + [plant(value[index], secret_text, rest)] + value[index + 1 :]
    if isinstance(value, str):
        cut = choice % (len(value) + 1)
        return value[:cut] + secret_text + value[cut:]
    return [value, secret_text]


@settings(max_examples=300, deadline=None)
@given(
    secret=any_secret,
    value=json_values,
    path=st.lists(st.integers(min_value=0, max_value=50), max_size=6),
    encoding=st.sampled_from(sorted(ENCODERS)),
)
def test_planted_secret_never_survives_in_json(secret: str, value: Any, path: list[int], encoding: str) -> None:
    planted = plant(value, ENCODERS[encoding](secret), path)
    output, count = LeakScanner([secret]).scan(planted)
    assert count >= 1
    dumped = json.dumps(output, ensure_ascii=False)
    for leaf in _strings(output):
        assert_gone(leaf, secret)
    assert secret not in dumped


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return [json.dumps(value)]


@settings(max_examples=200, deadline=None)
@given(secret=any_secret, before=noise, after=noise, encoding=st.sampled_from(sorted(ENCODERS)))
def test_values_injected_during_a_call_are_redacted(secret: str, before: str, after: str, encoding: str) -> None:
    base = LeakScanner(["some-unrelated-stored-secret"])
    per_call = base.with_values([secret])
    text = before + ENCODERS[encoding](secret) + after
    output, count = per_call.scan_text(text)
    assert count >= 1
    assert_gone(output, secret)


@st.composite
def percent_encoded(draw: st.DrawFn, secret: str) -> tuple[str, bool]:
    """``secret`` with each character escaped or not, each hex digit in either case, and (in
    form encoding) each space as ``+`` or an escape. What an encoder must escape (``%`` always,
    ``+`` when ``+`` means a space) is escaped: left plain, the text would decode to another value."""
    form = draw(st.booleans())
    out = []
    for char in secret:
        if form and char == " " and draw(st.booleans()):
            out.append("+")
        elif char == "%" or (form and char == "+") or draw(st.booleans()):
            for byte in char.encode():
                digits = "".join(d.upper() if draw(st.booleans()) else d for d in f"{byte:02x}")
                out.append("%" + digits)
        else:
            out.append(char)
    return "".join(out), form


# Text before the value must not end in "%" or "%X": with the value's first characters it would
# form an escape, and then the text really does decode to something else.
text_before = noise.filter(lambda t: not re.search(r"%[0-9A-Fa-f]?$", t))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), secret=any_secret, before=text_before, after=noise, others=st.lists(secrets, max_size=2))
def test_any_percent_encoding_of_a_secret_is_redacted(
    data: st.DataObject, secret: str, before: str, after: str, others: list[str]
) -> None:
    encoded, form = data.draw(percent_encoded(secret))
    scanner = LeakScanner([*others, secret])
    text = before + encoded + after
    output, count = scanner.scan_text(text)
    assert count >= 1
    assert encoded not in output
    assert secret not in (unquote_plus(output) if form else unquote(output))
    assert_gone(output, secret)
    assert scanner.contains_secret(text)
    assert scanner.scan({"k": [text]})[1] >= 1


def test_percent_decoding_redacts_exactly_the_encoded_span() -> None:
    scanner = LeakScanner(["s3crét-value"])
    text = "a=%s3cr%C3%a9t-valu%65&b=2 100%"
    assert scanner.scan_text(text) == ("a=%[REDACTED:secret_url]&b=2 100%", 1)
    assert scanner.scan_text("x=s3cr%c3%A9t%2Dvalue%2Bmore") == ("x=[REDACTED:secret_url]%2Bmore", 1)
    # Bytes that are not UTF-8 next to the value do not swallow it.
    assert scanner.scan_text("%FF%E2%82s3cr%C3%A9t-value") == ("%FF%E2%82[REDACTED:secret_url]", 1)
    # Three rounds of encoding are undone, and "%" that starts no escape is left alone.
    thrice = quote(quote(quote("s3crét-value", safe=""), safe=""), safe="")
    assert scanner.scan_text(f"[{thrice}]") == ("[[REDACTED:secret_url]]", 1)
    assert scanner.scan_text("50% of %zz and %4") == ("50% of %zz and %4", 0)


escape_rich_text = st.lists(
    st.one_of(
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=3),
        st.sampled_from(["%", "+", "%4", "%zz", "%%"]),
        st.binary(min_size=1, max_size=4).map(lambda b: "".join(f"%{x:02X}" for x in b)),
        st.text("€é😀ab", min_size=1, max_size=2).map(lambda t: quote(t, safe="")),
        st.text("€é😀ab", min_size=1, max_size=2).map(lambda t: quote(t, safe="").lower()),
    ),
    max_size=12,
).map("".join)


def _reference_decode(text: str, plus: bool) -> str:
    decoded = (unquote_plus if plus else unquote)(text, errors="surrogateescape")
    return "".join("\ufffd" if "\udc80" <= c <= "\udcff" else c for c in decoded)


@settings(max_examples=500, deadline=None)
@given(text=escape_rich_text, plus=st.booleans())
def test_percent_decoding_agrees_with_urllib_and_maps_back_exactly(text: str, plus: bool) -> None:
    view = percent_decoded(text, plus=plus)
    if view is None:
        assert not re.search(r"%[0-9A-Fa-f]{2}", text)
        return
    assert view.text == _reference_decode(text, plus)
    assert view.original_span(0, len(view.text)) == (0, len(text))
    previous_end = 0
    for index, char in enumerate(view.text):
        start, end = view.original_span(index, index + 1)
        assert start == previous_end < end  # the characters tile the original in order
        assert _reference_decode(text[start:end], plus) == char
        previous_end = end


# -- clean output is untouched ------------------------------------------------------------


def _clean(text: str, stored: list[str]) -> bool:
    if any(anchor in text for anchor in ANCHORS):
        return False
    for secret in stored:
        data = secret.encode()
        if any(form in text for form in plain_forms(secret)):
            return False
        for offset in range(3):  # any 8-character run of the secret's base64 at any alignment
            encoded = base64.b64encode(b"\x00" * offset + data).decode()
            core = encoded[3 : min(len(encoded) - 3, 11)]
            if core and (core in text or core.translate(str.maketrans("+/", "-_")) in text):
                return False
    return True


@settings(max_examples=300, deadline=None)
@given(stored=st.lists(secrets, max_size=4), text=st.text(max_size=200))
def test_text_without_secrets_is_unchanged(stored: list[str], text: str) -> None:
    assume(_clean(text, stored))
    scanner = LeakScanner(stored)
    assert scanner.scan_text(text) == (text, 0)
    assert not scanner.contains_secret(text)


@settings(max_examples=200, deadline=None)
@given(stored=st.lists(secrets, max_size=4), value=json_values)
def test_json_without_secrets_is_returned_as_is(stored: list[str], value: Any) -> None:
    assume(all(_clean(s, stored) for s in _strings(value)))
    output, count = LeakScanner(stored).scan(value)
    assert count == 0 and output is value


@pytest.mark.parametrize(
    "text",
    [
        "sk-learn is a library",
        "task-1234 done",
        "ghp_short",
        "the bearer of bad news",
        "Bearer short",
        "AKIA alone",
        "AKIAIOSFODNN7EXAMPLEX",  # 17 characters after AKIA: not an access key id
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "xoxb-short",
        "AIza-too-short",
        "sk_live_short",
        '{"token_type": "Bearer", "expires_in": 3600}',
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    assert LeakScanner([]).scan_text(text) == (text, 0)


# -- credential shapes -------------------------------------------------------------------

SHAPE_EXAMPLES = {
    "openai_key": ["sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4", "sk-proj-" + "Ab9_" * 20],
    "anthropic_key": ["sk-ant-api03-" + "Zz9-" * 20 + "AA"],
    "aws_access_key": ["AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A"],
    "github_token": [
        "ghp_" + "a1B2" * 9,
        "gho_" + "Z" * 36,
        "ghu_" + "9" * 36,
        "ghs_" + "x" * 40,
        "ghr_" + "Q" * 36,
        "github_pat_11ABCDEFG0" + "x_Y" * 20,
    ],
    "stripe_key": ["sk_live_" + "51H8aZ" * 5, "rk_live_" + "9" * 24, "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"],
    "slack_token": [
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxp-1-2-3-abcdef",
        "xoxa-2-abcdefghij",
        "xoxr-abcdefghij12",
        "xoxs-0123456789ab",
    ],
    "google_api_key": ["AIza" + "SyA-9_" * 5 + "abcde"],
    "private_key": [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA75\nq1w==\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA\\n-----END OPENSSH PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",  # cut off: redacted to the end
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
    ],
    "bearer_token": ["eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.sig-_.~+/=", "opaque0123token"],
}


@pytest.mark.parametrize(("kind", "example"), [(k, e) for k, v in SHAPE_EXAMPLES.items() for e in v])
def test_each_credential_shape_is_caught(kind: str, example: str) -> None:
    scanner = LeakScanner([])
    text = f"Authorization: Bearer {example}" if kind == "bearer_token" else f"config: {example} (end)"
    output, count = scanner.scan_text(text)
    assert count == 1 and f"[REDACTED:{kind}]" in output
    body = example.split("-----")[2] if kind == "private_key" else example
    assert body not in output
    assert scanner.contains_secret(text)
    if kind == "bearer_token":
        assert output == "Authorization: Bearer [REDACTED:bearer_token]"
    elif "END" in example:
        assert output == f"config: [REDACTED:{kind}] (end)"


SHAPE_REGEXES = {
    "openai_key": r"sk-(proj-)?[A-Za-z0-9_-]{20,60}",
    "anthropic_key": r"sk-ant-api03-[A-Za-z0-9_-]{20,60}",
    "aws_access_key": r"(AKIA|ASIA)[A-Z0-9]{16}",
    "github_token": r"gh[pousr]_[A-Za-z0-9]{36,40}|github_pat_[A-Za-z0-9_]{22,60}",
    "stripe_key": r"[sr]k_(live|test)_[A-Za-z0-9]{16,40}",
    "slack_token": r"xox[abprs]-[A-Za-z0-9-]{10,50}",
    "google_api_key": r"AIza[0-9A-Za-z_-]{35}",
}


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    kind=st.sampled_from(sorted(SHAPE_REGEXES)),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_generated_keys_are_caught_anywhere(data: st.DataObject, kind: str, before: str, after: str) -> None:
    key = data.draw(st.from_regex(SHAPE_REGEXES[kind], fullmatch=True))
    output, count = LeakScanner([]).scan_text(f"{before} {key} {after}")
    assert count >= 1
    assert key not in output


# -- behaviour at the edges ---------------------------------------------------------------


def test_short_secrets_raw_always_encodings_only_from_min_length() -> None:
    scanner = LeakScanner(["pin7"])  # 4 characters: below the default min_length of 8
    assert scanner.scan_text("code pin7 ok") == ("code [REDACTED:secret] ok", 1)
    hex_form = b"pin7".hex()
    assert scanner.scan_text(f"hex {hex_form}") == (f"hex {hex_form}", 0)
    lowered = LeakScanner(["pin7"], min_length=4)
    assert lowered.scan_text(f"hex {hex_form}")[1] == 1
    assert LeakScanner(["a/b c"]).scan_text("q=a%2Fb%20c&x=a%2Fb+c") == (
        "q=[REDACTED:secret_url]&x=[REDACTED:secret_url]",
        2,
    )


def test_overlapping_secrets_leave_nothing_behind() -> None:
    scanner = LeakScanner(["abcdefgh12", "fgh12345zz", "12345"])
    assert scanner.scan_text("xx abcdefgh12345zz yy") == ("xx [REDACTED:secret] yy", 1)
    nested = LeakScanner(["password", "my-password-123"])
    assert nested.scan_text("my-password-123 and password") == ("[REDACTED:secret] and [REDACTED:secret]", 2)


def test_marker_never_holds_the_secret() -> None:
    secret = "Tr0ub4dor&3-horse"
    output, _ = LeakScanner([secret]).scan({"k": f"a {secret} b", "n": [secret.encode().hex()]})
    assert secret not in json.dumps(output) and MARKER.search(json.dumps(output))


def test_keys_numbers_and_objects_are_scanned() -> None:
    scanner = LeakScanner(["12345678901", "key-in-a-key"])
    value = {"key-in-a-key": 1, "n": 12345678901, "f": 0.5, "nested": ({"x": None, "y": True},), 7: "seven"}
    output, count = scanner.scan(value)
    assert count == 2
    assert output == {
        "[REDACTED:secret]": 1,
        "n": "[REDACTED:secret]",
        "f": 0.5,
        "nested": ({"x": None, "y": True},),
        7: "seven",
    }

    class Opaque:
        def __str__(self) -> str:
            return "holds key-in-a-key inside"

    assert scanner.scan([Opaque()])[0] == ["holds [REDACTED:secret] inside"]


def test_with_values_reuses_the_automaton() -> None:
    base = LeakScanner(["stored-secret-1"])
    assert base.with_values([]) is base
    assert base.with_values(["stored-secret-1", ""]) is base  # already known: nothing to add
    per_call = base.with_values(["derived-value-9"])
    assert per_call._literal is base._literal and per_call._anchor_detector is base._anchor_detector
    assert per_call.scan_text("stored-secret-1 derived-value-9")[1] == 2
    assert base.scan_text("derived-value-9") == ("derived-value-9", 0)  # the base is unchanged


def test_lone_surrogates_in_output() -> None:
    scanner = LeakScanner(["surrogate-neighbour"])
    output, count = scanner.scan_text("\ud800surrogate-neighbour\udfff")
    assert (output, count) == ("\ud800[REDACTED:secret]\udfff", 1)
    assert LeakScanner(["x\ud800yyyyyyy"]).scan_text("a x\ud800yyyyyyy b") == ("a [REDACTED:secret] b", 1)


def test_cyclic_output_fails_closed() -> None:
    scanner = LeakScanner(["cyclic-secret"])
    for first in ("cyclic-secret", "nothing here"):
        value: list[Any] = [first]
        value.append(value)
        output, count = scanner.scan(value)
        assert output == "[REDACTED:unscannable_output]" and count >= 1


def test_deep_output_is_scanned_by_the_careful_path() -> None:
    scanner = LeakScanner(["deep-secret-value"])
    clean: Any = "leaf"
    for _ in range(MAX_FAST_DEPTH + 20):
        clean = {"k": [clean]}
    assert scanner.scan(clean) == (clean, 0)
    leaking: Any = "a deep-secret-value here"
    for _ in range(MAX_FAST_DEPTH + 20):
        leaking = [leaking]
    output, count = scanner.scan(leaking)
    assert count == 1 and "deep-secret-value" not in json.dumps(output)


def test_bad_arguments() -> None:
    with pytest.raises(UsageError):
        LeakScanner(["x"], min_length=0)
    with pytest.raises(UsageError):
        LeakScanner([b"bytes"])  # type: ignore[list-item]


def test_an_empty_stored_value_is_ignored() -> None:
    scanner = LeakScanner(["", "stored-value-42"])
    assert scanner.scan_text("nothing here") == ("nothing here", 0)
    assert scanner.scan_text("x stored-value-42 y") == ("x [REDACTED:secret] y", 1)


def test_with_values_twice_with_the_same_value_adds_nothing_the_second_time() -> None:
    base = LeakScanner(["stored-secret-1"])
    once = base.with_values(["per-call-token-77"])
    assert once.with_values(["per-call-token-77"]) is once
    assert once.scan_text("per-call-token-77 and PER-CALL-TOKEN-77")[1] >= 1


def test_a_secret_split_over_strings_with_an_empty_one_between_is_redacted_in_each_part() -> None:
    scanner = LeakScanner(["split-secret-value"])
    output, count = scanner.scan(["split-se", "", "cret-value", "clean"])
    assert output[1:] == ["", output[2], "clean"] and count == 2
    assert "split-se" not in output[0] and "cret-value" not in output[2]


def test_the_careful_path_keeps_types_and_redacts_numbers_holding_a_secret() -> None:
    """Past MAX_FAST_DEPTH each leaf is judged alone: None, booleans and clean numbers stay as
    they are, tuples stay tuples, and a number whose digits are a secret becomes the marker."""
    scanner = LeakScanner(["98765432109876"])
    leaf = {"n": 98765432109876, "f": 1.5, "none": None, "yes": True, "t": ("a", 3)}
    value: Any = leaf
    for _ in range(MAX_FAST_DEPTH + 5):
        value = [value]
    output, count = scanner.scan(value)
    assert count == 1
    inner = output
    for _ in range(MAX_FAST_DEPTH + 5):
        (inner,) = inner
    assert inner == {"n": "[REDACTED:secret]", "f": 1.5, "none": None, "yes": True, "t": ("a", 3)}
    clean = {"n": 12, "t": (None, False)}
    for _ in range(MAX_FAST_DEPTH + 5):
        clean = {"k": clean}
    assert scanner.scan(clean) == (clean, 0)


@pytest.mark.parametrize("offset", range(5))
def test_a_base32_secret_inside_a_longer_blob_is_redacted_at_every_alignment(offset: int) -> None:
    secret = "base32-secret-xyz"
    blob = base64.b32encode(b"\x01" * offset + secret.encode() + b"\x02\x03").decode()
    output, count = LeakScanner([secret]).scan_text(f"id={blob} end")
    assert count == 1 and output.startswith("id=[REDACTED:secret_base32]") and output.endswith(" end")
    # Whatever is left of the blob decodes to nothing of the secret.
    left = output.removeprefix("id=[REDACTED:secret_base32]").removesuffix(" end")
    assert len(left.rstrip("=")) <= 3
