"""One Chat Completions call through the OpenAI SDK's client at its HTTP level.

`client.chat.completions.create` walks every message through the SDK's typed-dict
transformation and builds pydantic models of the answer: measured, ~45 % of the llm actor's
CPU per call, growing with the history. Here the body is our own JSON (built from the neutral
messages, encoded once by msgspec) and the answer is decoded by msgspec into the few fields we
read. The SDK's client still does what matters: base URL, key, headers, timeouts, connection
pool, and HTTP errors raised as its exceptions (so `providers._map_error` reads them as before).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from actors.llm import _convert
from contracts.llm import ChatMessage, ToolCall, ToolSpec, Usage


class _Function(msgspec.Struct):
    name: str = ""
    arguments: str | None = None


class _Custom(msgspec.Struct):
    name: str = ""
    input: str = ""


class _Call(msgspec.Struct):
    id: str | None = None
    function: _Function | None = None
    custom: _Custom | None = None


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_Call] | None = None


class _Choice(msgspec.Struct):
    message: _Message = msgspec.field(default_factory=_Message)


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    model: str | None = None


_decoder = msgspec.json.Decoder(_Completion)
_encoder = msgspec.json.Encoder()
_HEADERS = {"Content-Type": "application/json"}


class Malformed(Exception):
    """The server answered 200 with a body that is not a chat completion."""


def request_body(model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                 max_tokens: int) -> bytes:
    """The Chat Completions request as JSON bytes."""
    body: dict[str, Any] = {"model": model, "messages": _convert.openai_messages(messages)}
    if tools:
        body["tools"] = _convert.openai_tools(tools)
    # api.openai.com's newer models only accept max_completion_tokens; local servers know max_tokens.
    local = "api.openai.com" not in os.environ.get("OPENAI_BASE_URL", "api.openai.com")
    body["max_tokens" if local else "max_completion_tokens"] = max_tokens
    return _encoder.encode(body)


def parse(data: bytes) -> tuple[str, list[ToolCall], Usage, str] | None:
    """Content, tool calls, usage and model of a completion body; None when it has no choice.
    Raises Malformed for a body that is not a completion."""
    try:
        resp = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise Malformed(str(exc)) from exc
    if not resp.choices:
        return None
    msg = resp.choices[0].message
    calls: list[ToolCall] = []
    for i, c in enumerate(msg.tool_calls or []):
        cid = c.id or f"call_{i}"
        if c.function is not None:
            calls.append(ToolCall(id=cid, name=c.function.name,
                                  arguments=_convert.parse_arguments(c.function.arguments)))
        elif c.custom is not None:  # a "custom" tool call carries free text, not JSON
            calls.append(ToolCall(id=cid, name=c.custom.name, arguments={"_raw": c.custom.input}))
    u = resp.usage
    usage = Usage(input_tokens=(u.prompt_tokens or 0) if u else 0,
                  output_tokens=(u.completion_tokens or 0) if u else 0)
    return msg.content or "", calls, usage, resp.model or ""


async def post(client: Any, body: bytes, seconds: float) -> bytes:
    """POST the prebuilt body to /chat/completions; the raw answer body."""
    import httpx2

    resp = await client.post("/chat/completions", cast_to=httpx2.Response, content=body,
                             options={"timeout": seconds, "headers": _HEADERS})
    return bytes(await resp.aread())
