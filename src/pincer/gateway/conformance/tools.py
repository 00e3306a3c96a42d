"""The conformance suite's fixture tools, named as its scenarios expect.

Each mirrors what the suite's scenario text asks for; none of them has effects. The
``test_input_required_result_*`` tools speak the 2026-07-28 multi-round flow directly through
:meth:`McpChannel.require_input`, with the exact input-request keys the scenarios check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from pincer.core.values import HostContext, ToolOutput
from pincer.gateway.conformance.runtime import NO_ARGS, FixtureTool, channel_of, fixture

__all__ = ["fixture_tools", "TEST_IMAGE_BASE64", "TEST_AUDIO_BASE64", "DYNAMIC_TOOL"]

# A 1x1 PNG and a minimal WAV, as the suite's reference server uses.
TEST_IMAGE_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
STEP_DELAY_S = 0.05  # the scenarios ask for ~50 ms between notifications
DYNAMIC_TOOL = "test_dynamic_tool"
_STATE_TOKEN = "fixture-state-v1"


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _content(*blocks: Mapping[str, Any]) -> ToolOutput:
    return ToolOutput(value=None, content=tuple(dict(b) for b in blocks))


def _name_schema(message: str, prop: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]},
        },
    }


def _sampling_request(text: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": _text(text)}], "maxTokens": max_tokens},
    }


_ROOTS_REQUEST: dict[str, Any] = {"method": "roots/list", "params": {}}


def _field(answer: Any, key: str) -> Any:
    content = answer.get("content") if isinstance(answer, Mapping) else None
    return content.get(key) if isinstance(content, Mapping) else None


def _sampled_text(answer: Any) -> str:
    content = answer.get("content") if isinstance(answer, Mapping) else None
    if isinstance(content, Mapping) and isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return "No response"


# -- content ---------------------------------------------------------------------------------


@fixture("test_simple_text", "Tests simple text content response")
async def simple_text(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return _content(_text("This is a simple text response for testing."))


@fixture("test_image_content", "Tests image content response")
async def image_content(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return _content({"type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png"})


@fixture("test_audio_content", "Tests audio content response")
async def audio_content(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return _content({"type": "audio", "data": TEST_AUDIO_BASE64, "mimeType": "audio/wav"})


@fixture("test_embedded_resource", "Tests embedded resource content response")
async def embedded_resource(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return _content({"type": "resource", "resource": resource})


@fixture("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)")
async def multiple_content(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": json.dumps({"test": "data", "value": 123}),
    }
    return _content(
        _text("Multiple content types test:"),
        {"type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png"},
        {"type": "resource", "resource": resource},
    )


@fixture("test_error_handling", "Tests error response handling")
async def error_handling(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return ToolOutput(value="This tool intentionally returns an error for testing", is_error=True)


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@fixture("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", JSON_SCHEMA_2020_12)
async def json_schema_tool(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return _content(_text(f"JSON Schema 2020-12 tool called with: {json.dumps(dict(args), sort_keys=True)}"))


_HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {
            "type": "string",
            "description": "Region, mirrored in the Mcp-Param-Region header",
            "x-mcp-header": "Region",
        },
        "query": {"type": "string", "description": "A query"},
    },
    "required": ["region"],
}


@fixture("test_custom_headers", "Echoes a parameter that clients mirror into an Mcp-Param header", _HEADER_SCHEMA)
async def custom_headers(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return _content(_text(f"region={args.get('region')}"))


# -- notifications ---------------------------------------------------------------------------


@fixture("test_tool_with_logging", "Tests tool that emits log messages during execution")
async def with_logging(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    await channel.log("info", "Tool execution started")
    await anyio.sleep(STEP_DELAY_S)
    await channel.log("info", "Tool processing data")
    await anyio.sleep(STEP_DELAY_S)
    await channel.log("info", "Tool execution completed")
    return _content(_text("Tool with logging executed successfully"))


@fixture("test_logging_tool", "Emits log messages (only delivered when the request opted in)")
async def logging_tool(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    await channel.log("info", "logging tool ran")
    return _content(_text("logged"))


@fixture("test_tool_with_progress", "Tests tool that reports progress notifications")
async def with_progress(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    for step in (0, 50, 100):
        await channel.progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await anyio.sleep(STEP_DELAY_S)
    return _content(_text("Progress reported: 0, 50, 100 of 100"))


@fixture("test_reconnection", "Closes its SSE stream mid-call to test client reconnection (SEP-1699)")
async def reconnection(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    await channel.close_stream()
    await anyio.sleep(STEP_DELAY_S * 4)
    return _content(_text("Reconnection test completed"))


# -- client requests (sampling, elicitation) -------------------------------------------------


@fixture(
    "test_sampling",
    "Tests server-initiated sampling (LLM completion request)",
    {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}},
        "required": ["prompt"],
    },
)
async def sampling(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    reply = await channel.sample([{"role": "user", "content": _text(str(args["prompt"]))}], max_tokens=100)
    return _content(_text(f"LLM response: {_sampled_text(reply)}"))


@fixture("test_missing_capability", "Needs the client's sampling capability; refused without it")
async def missing_capability(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    reply = await channel.sample([{"role": "user", "content": _text("ping")}], max_tokens=10)
    return _content(_text(f"LLM response: {_sampled_text(reply)}"))


_ELICIT_USER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


def _elicitation_text(prefix: str, reply: Mapping[str, Any]) -> str:
    return f"{prefix}: action={reply.get('action')}, content={json.dumps(reply.get('content') or {})}"


@fixture(
    "test_elicitation",
    "Tests server-initiated elicitation (user input request)",
    {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The message to show the user"}},
        "required": ["message"],
    },
)
async def elicitation(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    reply = await channel_of(host).elicit(str(args["message"]), _ELICIT_USER)
    return _content(_text(_elicitation_text("User response", reply)))


_SEP1034: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}


@fixture("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034")
async def elicitation_defaults(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    reply = await channel_of(host).elicit("Please review and update the form fields with defaults", _SEP1034)
    return _content(_text(_elicitation_text("Elicitation completed", reply)))


_SEP1330: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}


@fixture("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330")
async def elicitation_enums(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    reply = await channel_of(host).elicit("Please select options from the enum fields", _SEP1330)
    return _content(_text(_elicitation_text("Elicitation completed", reply)))


@fixture("test_streaming_elicitation", "Reports progress, then asks the user a question")
async def streaming_elicitation(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    await channel.progress(0, 1, "about to ask")
    reply = await channel.elicit(
        "Continue?", {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}, key="continue"
    )
    return _content(_text(_elicitation_text("Streaming elicitation", reply)))


# -- 2026-07-28 multi-round (InputRequiredResult) ------------------------------------------------


@fixture("test_input_required_result_elicitation", "Asks for the user's name through an InputRequiredResult")
async def irr_elicitation(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    name = _field(channel.answer("user_name"), "name")
    if not isinstance(name, str):
        channel.require_input({"user_name": _name_schema("What is your name?", "name")})
    return _content(_text(f"Hello, {name}!"))


@fixture("test_input_required_result_sampling", "Asks the client's model a question through an InputRequiredResult")
async def irr_sampling(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    answer = channel.answer("capital_question")
    if not isinstance(answer, Mapping):
        channel.require_input({"capital_question": _sampling_request("What is the capital of France?", 100)})
    return _content(_text(f"Sampling said: {_sampled_text(answer)}"))


@fixture("test_input_required_result_list_roots", "Asks for the client's roots through an InputRequiredResult")
async def irr_roots(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    answer = channel.answer("client_roots")
    roots = answer.get("roots") if isinstance(answer, Mapping) else None
    if not isinstance(roots, list):
        channel.require_input({"client_roots": _ROOTS_REQUEST})
    uris = [str(r.get("uri")) for r in roots if isinstance(r, Mapping)]
    return _content(_text(f"Roots: {', '.join(uris) or 'none'}"))


@fixture("test_input_required_result_request_state", "Round-trips an opaque requestState")
async def irr_request_state(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    answer = channel.answer("confirm")
    if not isinstance(answer, Mapping) or channel.request_state != _STATE_TOKEN:
        request = {
            "method": "elicitation/create",
            "params": {
                "message": "Please confirm",
                "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
            },
        }
        channel.require_input({"confirm": request}, state=_STATE_TOKEN)
    return _content(_text(f"state-ok: confirmed={_field(answer, 'ok')}"))


@fixture("test_input_required_result_multiple_inputs", "Asks for an elicitation, a sampling and the roots at once")
async def irr_multiple(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    keys = ("user_name", "greeting", "client_roots")
    if any(channel.answer(k) is None for k in keys):
        channel.require_input(
            {
                "user_name": _name_schema("What is your name?", "name"),
                "greeting": _sampling_request("Generate a greeting", 50),
                "client_roots": _ROOTS_REQUEST,
            },
            state=_STATE_TOKEN,
        )
    name = _field(channel.answer("user_name"), "name")
    return _content(_text(f"Got all three inputs for {name}: {_sampled_text(channel.answer('greeting'))}"))


@fixture("test_input_required_result_multi_round", "Asks two questions in two rounds")
async def irr_multi_round(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    name = _field(channel.answer("step1"), "name")
    if not isinstance(name, str):
        channel.require_input({"step1": _name_schema("Step 1: What is your name?", "name")}, state="round-1")
    color = _field(channel.answer("step2"), "color")
    if not isinstance(color, str):
        channel.require_input({"step2": _name_schema("Step 2: What is your favorite color?", "color")}, state="round-2")
    return _content(_text(f"{name} likes {color}"))


@fixture("test_input_required_result_tampered_state", "Issues an integrity-protected requestState")
async def irr_tampered(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    answer = channel.answer("confirm")
    if not isinstance(answer, Mapping):
        channel.require_input({"confirm": _name_schema("Please confirm", "ok")}, state=_STATE_TOKEN)
    return _content(_text("state verified"))


@fixture("test_input_required_result_capabilities", "Asks only for what the client declared it can answer")
async def irr_capabilities(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    channel = channel_of(host)
    wanted: dict[str, Any] = {}
    if channel.has_capability("elicitation") and channel.answer("user_name") is None:
        wanted["user_name"] = _name_schema("What is your name?", "name")
    if channel.has_capability("sampling") and channel.answer("greeting") is None:
        wanted["greeting"] = _sampling_request("Generate a greeting", 50)
    if channel.has_capability("roots") and channel.answer("client_roots") is None:
        wanted["client_roots"] = _ROOTS_REQUEST
    if wanted:
        channel.require_input(wanted)
    return _content(_text("answered everything the client can answer"))


def fixture_tools(*, toggle_tool: Callable[[], bool], toggle_prompt: Callable[[], bool]) -> list[FixtureTool]:
    """Every fixture tool; the two triggers change the tool and prompt lists when called."""

    @fixture("test_trigger_tool_change", "Adds or removes test_dynamic_tool, changing the tool list")
    async def trigger_tool(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        present = toggle_tool()
        return _content(_text(f"{DYNAMIC_TOOL} {'added' if present else 'removed'}"))

    @fixture("test_trigger_prompt_change", "Adds or removes a prompt, changing the prompt list")
    async def trigger_prompt(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        present = toggle_prompt()
        return _content(_text(f"dynamic prompt {'added' if present else 'removed'}"))

    return [
        simple_text, image_content, audio_content, embedded_resource, multiple_content, error_handling,
        json_schema_tool, custom_headers, with_logging, logging_tool, with_progress, reconnection,
        sampling, missing_capability, elicitation, elicitation_defaults, elicitation_enums,
        streaming_elicitation, irr_elicitation, irr_sampling, irr_roots, irr_request_state, irr_multiple,
        irr_multi_round, irr_tampered, irr_capabilities, trigger_tool, trigger_prompt,
    ]  # fmt: skip


@fixture(DYNAMIC_TOOL, "A tool that test_trigger_tool_change adds and removes", NO_ARGS)
async def dynamic_tool(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
    return _content(_text("dynamic"))
