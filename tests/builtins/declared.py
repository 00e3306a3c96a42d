"""What Slack's, Telegram's and Brave's stand-ins accept and answer, checked against the
descriptions the providers publish on npm (installed by ``make builtins-deps`` into
``.cache/npm-declared``):

* Slack: ``@slack/web-api``'s ``WebClient``: each method's argument type and response type
  (``Parameters<WebClient["chat"]["postMessage"]>[0]``, ``Awaited<ReturnType<...>>``), the method
  names from ``dist/methods.js`` and the verb and form encoding from ``dist/WebClient.js``;
* Telegram: ``@grammyjs/types``'s ``ApiMethods``: each method's parameters and its result in the
  Bot API's ``ApiResponse`` envelope, and the method names (``keyof ApiMethods``).

* Brave: its own MCP server ``@brave/brave-search-mcp-server``: the LLM context API's parameters
  and answer as zod schemas (see ``_BRAVE_SCRIPT``).

Neither Slack nor Telegram publishes a machine-readable description of its API in a package registry:
no OpenAPI document or JSON Schema of Slack's Web API or of the Bot API is on npm or PyPI (Slack's
OpenAPI files live in a GitHub repository, Telegram documents its API as a web page, and the
community's generated OpenAPI of it is served from a web page). The TypeScript declarations are
the closest published description, so ``typescript-json-schema`` (npm) compiles them with
TypeScript's own type checker into JSON Schema (once per set of package versions, cached beside
them), and ``jsonschema`` validates each request and each answer against it. Every object there
is closed (``--noExtraProps``): a field the declarations do not have is an error, both ways.

A form or multipart body carries text: each value is read as the server reads it, the text where
the parameter takes text, else its JSON (numbers, booleans, objects). A file part of a multipart
body is ``{"pincer_upload": FILENAME}``, the type the declarations' file parameter is given here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError

NPM = Path(__file__).resolve().parents[2] / ".cache" / "npm-declared"
SLACK_DIST = NPM / "node_modules" / "@slack" / "web-api" / "dist"
GENERATOR = NPM / "node_modules" / ".bin" / "typescript-json-schema"
GENERATE_TIMEOUT_S = 600
UPLOAD_KEY = "pincer_upload"

# The methods the built-ins call (and the contract tests send on purpose).
SLACK_METHODS = (
    "auth.test", "chat.postMessage", "conversations.history", "conversations.list", "conversations.replies",
    "files.completeUploadExternal", "files.getUploadURLExternal", "reactions.add", "users.info",
)  # fmt: skip
TELEGRAM_METHODS = ("deleteMessage", "editMessageText", "getMe", "getUpdates", "sendDocument", "sendMessage", "sendPhoto")
PACKAGES = ("@slack/web-api", "@grammyjs/types", "typescript-json-schema", "typescript")
BRAVE_PACKAGES = ("@brave/brave-search-mcp-server", "zod")
# Brave's own MCP server declares, with zod, the parameters of Brave's LLM context API (as query
# parameters; it renames its "query" to the API's "q") and the API's answer; zod writes them as
# JSON Schema. Brave's web search answer is declared only as TypeScript types, erased from the
# package: nothing published describes it.
_BRAVE_SCRIPT = """
import { z } from "zod";
const base = "file://" + process.cwd() + "/node_modules/@brave/brave-search-mcp-server/dist/tools/llm_context/schemas/";
const input = await import(base + "input.js");
const output = await import(base + "output.js");
const options = { unrepresentable: "any", target: "draft-7" };
process.stdout.write(JSON.stringify({
  request: z.toJSONSchema(input.RequestParamsSchema, { ...options, io: "input" }),
  response: z.toJSONSchema(output.LlmContextSearchApiResponseSchema, { ...options, io: "output" }),
}));
"""


def _ident(method: str) -> str:
    return method.replace(".", "_")


# typescript-json-schema compiles an intersection with a union (``Update.message?: Message &
# Update.NonChannel``) into the object side alone, so a message's own fields would be refused (it
# does so erratically, by the order it meets the types in). ``WholeUpdate`` is ``Update`` with
# those messages checked as ``Message``: every field a message may have, without the narrowing of
# the update's kind (``chat`` of a channel post, ``edit_date`` of an edit). getUpdates' answer is
# checked against it (``ReturnType<ApiMethods["getUpdates"]>`` is ``Update[]``).
_MESSAGES = ("message", "edited_message", "channel_post", "edited_channel_post", "business_message",
             "edited_business_message", "guest_message")  # fmt: skip
_WHOLE_UPDATE = [
    'import type { Message, Update } from "@grammyjs/types";',
    f"export interface WholeUpdate extends Pick<Update, Exclude<keyof Update, {' | '.join(repr(k) for k in _MESSAGES)}>> {{",
    *(f"  {key}?: Message;" for key in _MESSAGES),
    "}",
]


def _bridge() -> str:
    """A TypeScript module whose exported types are each method's request and answer."""
    lines = [
        *_WHOLE_UPDATE,
        'import type { WebClient } from "@slack/web-api";',
        'import type { ApiMethods, ApiResponse } from "@grammyjs/types";',
        f"export interface UploadedFile {{ {UPLOAD_KEY}: string }}",
        "type M = ApiMethods<UploadedFile>;",
        "export type telegram__methods = keyof M;",
    ]
    for method in SLACK_METHODS:
        call = "WebClient" + "".join(f'["{part}"]' for part in method.split("."))
        lines.append(f"export type slack__{_ident(method)}__request = NonNullable<Parameters<{call}>[0]>;")
        lines.append(f"export type slack__{_ident(method)}__response = Awaited<ReturnType<{call}>>;")
    for method in TELEGRAM_METHODS:
        call = f'M["{method}"]'
        lines.append(f"export type telegram__{method}__request = "
                     f"Parameters<{call}> extends [] ? Record<string, never> : NonNullable<Parameters<{call}>[0]>;")  # fmt: skip
        result = "WholeUpdate[]" if method == "getUpdates" else f"ReturnType<{call}>"
        lines.append(f"export type telegram__{method}__response = ApiResponse<{result}>;")
    return "\n".join(lines) + "\n"


def _versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    found = {}
    for name in packages:
        manifest = NPM / "node_modules" / name / "package.json"
        found[name] = json.loads(manifest.read_text("utf-8"))["version"]
    return found


@functools.cache
def definitions() -> dict[str, Any]:
    """The JSON Schema definitions compiled from the declarations (cached by input)."""
    bridge = _bridge()
    key = hashlib.sha256((bridge + json.dumps(_versions(), sort_keys=True)).encode()).hexdigest()[:16]
    folder = NPM / "declared"
    output = folder / f"{key}.json"
    if not output.is_file():
        folder.mkdir(exist_ok=True)
        source = folder / f"{key}.ts"
        if not source.is_file():
            partial = folder / f".{key}.{uuid.uuid4().hex}.ts"
            partial.write_text(bridge, "utf-8")
            os.replace(partial, source)
        partial = folder / f".{key}.{uuid.uuid4().hex}.json"
        done = subprocess.run(
            [str(GENERATOR), str(source), "*", "--required", "--noExtraProps", "--strictNullChecks", "--ignoreErrors",
             "-o", str(partial)],
            cwd=NPM, capture_output=True, text=True, timeout=GENERATE_TIMEOUT_S,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"typescript-json-schema failed on {source}: {done.stderr[-2000:]}")
        os.replace(partial, output)
    return json.loads(output.read_text("utf-8"))["definitions"]


@functools.cache
def brave_llm_context() -> dict[str, Any]:
    """``{"request": schema, "response": schema}`` of Brave's LLM context API (cached by input)."""
    key = hashlib.sha256((_BRAVE_SCRIPT + json.dumps(_versions(BRAVE_PACKAGES), sort_keys=True)).encode()).hexdigest()[:16]
    folder = NPM / "declared"
    output = folder / f"brave-{key}.json"
    if not output.is_file():
        folder.mkdir(exist_ok=True)
        done = subprocess.run(["node", "--input-type=module", "-e", _BRAVE_SCRIPT], cwd=NPM, capture_output=True,
                              text=True, timeout=GENERATE_TIMEOUT_S)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"zod could not write Brave's schemas: {done.stderr[-2000:]}")
        partial = folder / f".brave-{key}.{uuid.uuid4().hex}.json"
        partial.write_text(done.stdout, "utf-8")
        os.replace(partial, output)
    schemas = json.loads(output.read_text("utf-8"))
    # The API's parameters are all the schema names (zod only strips others): a request naming
    # another one sends something Brave does not read.
    schemas["request"]["additionalProperties"] = False
    return schemas


def brave_llm_context_problems(body: Any, answer: Any | None = None) -> list[str]:
    """Why a POST /res/v1/llm/context body (``q`` for the schema's ``query``), or its answer, does
    not fit what Brave's own MCP server declares."""
    schemas = brave_llm_context()
    found: list[str] = []
    if body is not None:
        renamed = {("query" if k == "q" else k): v for k, v in body.items()} if isinstance(body, dict) else body
        errors = _smallest(list(Draft7Validator(schemas["request"]).iter_errors(renamed)))
        found += [_describe(e).replace("'query'", "'q'") for e in errors]
    if answer is not None:
        found += [f"answer: {_describe(e)}" for e in _smallest(list(Draft7Validator(schemas["response"]).iter_errors(answer)))]
    return found


@functools.cache
def _validator(name: str) -> Draft7Validator:
    defs = definitions()
    if name not in defs:
        raise KeyError(name)
    return Draft7Validator({"$ref": f"#/definitions/{name}", "definitions": defs})


def _property_schemas(schema: dict[str, Any], name: str, depth: int = 0) -> list[dict[str, Any]]:
    """Every schema the property ``name`` may have under ``schema`` (through $ref and unions)."""
    if depth > 8:
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = definitions().get(_unquote_ref(ref))
        return _property_schemas(target, name, depth + 1) if target else []
    found = [schema["properties"][name]] if name in schema.get("properties", {}) else []
    for key in ("anyOf", "oneOf", "allOf"):
        for part in schema.get(key, []):
            found += _property_schemas(part, name, depth + 1)
    return found


def _unquote_ref(ref: str) -> str:
    from urllib.parse import unquote

    return unquote(ref.removeprefix("#/definitions/"))


def _fits(schema: dict[str, Any], value: Any) -> bool:
    return Draft7Validator({**schema, "definitions": definitions()}).is_valid(value)


def read_text_values(api: str, method: str, values: dict[str, Any]) -> dict[str, Any]:
    """A form or multipart body's text values as the server reads them: the text where the
    parameter takes text, else its JSON. Other values (file parts) are kept."""
    schema = definitions()[f"{api}__{_ident(method)}__request"]
    out: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(value, str):
            out[key] = value
            continue
        options = _property_schemas(schema, key)
        if not options or any(_fits(s, value) for s in options):
            out[key] = value
            continue
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def problems(name: str, instance: Any) -> list[str]:
    """Why ``instance`` does not fit the definition ``name``; [] when it does."""
    return [_describe(e) for e in _smallest(list(_validator(name).iter_errors(instance)))]


def request_problems(api: str, method: str, body: dict[str, Any]) -> list[str]:
    return problems(f"{api}__{_ident(method)}__request", body)


def answer_problems(api: str, method: str, answer: Any) -> list[str]:
    return [f"answer: {p}" for p in problems(f"{api}__{_ident(method)}__response", answer)]


def _smallest(errors: list[ValidationError]) -> list[ValidationError]:
    """Errors to report: under a union, those of the alternative that came closest (the fewest
    errors at the union's own level, where a wrong ``ok`` or a missing field shows, then fewest)."""
    out: list[ValidationError] = []
    for error in errors:
        if error.validator in ("anyOf", "oneOf") and error.context:
            by_branch: dict[Any, list[ValidationError]] = {}
            for sub in error.context:
                by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
            closest = min(by_branch.values(), key=lambda errs: (sum(not e.relative_path for e in errs), len(errs)))
            out += _smallest(closest)
        else:
            out.append(error)
    return out


def _describe(error: ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return "; ".join(f"unknown parameter {'.'.join(filter(None, (where, k)))!r}" for k in extra)
    if error.validator == "required":
        missing = re.search(r"'([^']+)' is a required property", error.message)
        name = missing.group(1) if missing else error.message
        return f"missing required parameter {'.'.join(filter(None, (where, name)))!r}"
    shown = json.dumps(error.instance)[:60]
    if error.validator == "type":
        return f"{where or 'the body'!r} is {shown}, not {error.validator_value}"
    if error.validator in ("enum", "const"):
        allowed = error.validator_value if error.validator == "enum" else [error.validator_value]
        return f"{where or 'the body'!r} is {shown}, not one of {json.dumps(allowed)[:120]}"
    return f"{where or 'the body'!r}: {error.message[:200]}"


@functools.cache
def telegram_methods() -> frozenset[str]:
    """Every method of the Bot API as ``ApiMethods`` declares it."""
    return frozenset(definitions()["telegram__methods"]["enum"])


@functools.cache
def slack_method_names() -> frozenset[str]:
    """Every method WebClient binds (``bindApiCall(this, 'chat.postMessage')`` in methods.js)."""
    text = (SLACK_DIST / "methods.js").read_text("utf-8")
    return frozenset(re.findall(r"bindApiCall(?:WithOptionalArgument)?\(this, '([\w.]+)'\)", text))


@functools.cache
def slack_http_shape() -> tuple[str, str]:
    """The verb and form encoding WebClient sends every method with (dist/WebClient.js)."""
    text = (SLACK_DIST / "WebClient.js").read_text("utf-8")
    verb = re.search(r"method: '(\w+)'", text)
    encoding = re.search(r"'Content-Type': '(application/x-www-form-urlencoded)'", text)
    if verb is None or encoding is None:
        raise ValueError("WebClient.js no longer names its verb or form encoding")
    return verb.group(1), encoding.group(1)
