"""Streamed model calls: the same answer as providers.complete, seen growing.

Each streamer returns what the non-streamed call returns (content, tool calls, usage, model)
and awaits `on_text(text so far)` whenever the text grew. The whole call is bounded by
`seconds` (the SDKs' own timeouts apply per read while streaming).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from actors.llm import _convert
from actors.llm.providers import OnText, ProviderError
from contracts.llm import ChatMessage, ToolCall, ToolSpec, Usage


async def openai(client: Any, model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                 max_tokens: int, seconds: float,
                 on_text: OnText) -> tuple[str, list[ToolCall], Usage, str]:
    """One streamed Chat Completions call (`stream=True`, usage in the last chunk)."""
    kw: dict[str, Any] = {}
    if tools:
        kw["tools"] = _convert.openai_tools(tools)
    local = "api.openai.com" not in os.environ.get("OPENAI_BASE_URL", "api.openai.com")
    kw["max_tokens" if local else "max_completion_tokens"] = max_tokens
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}  # index -> id, name, arguments (arguments arrive in pieces)
    usage = Usage()
    reported = ""
    answered = False
    async with asyncio.timeout(seconds):
        stream = await client.chat.completions.create(
            model=model, messages=_convert.openai_messages(messages), timeout=seconds,
            stream=True, stream_options={"include_usage": True}, **kw,
        )
        async for chunk in stream:
            reported = chunk.model or reported
            if chunk.usage is not None:
                usage = Usage(input_tokens=chunk.usage.prompt_tokens or 0,
                              output_tokens=chunk.usage.completion_tokens or 0)
            for choice in chunk.choices[:1]:
                answered = True
                delta = choice.delta
                for c in delta.tool_calls or []:
                    slot = calls.setdefault(c.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = c.id or slot["id"]
                    if c.function is not None:
                        slot["name"] = c.function.name or slot["name"]
                        slot["arguments"] += c.function.arguments or ""
                if delta.content:
                    text.append(delta.content)
                    await on_text("".join(text))
    if not answered:
        raise ProviderError(
            f"The openai provider returned no answer for model '{model}'. Try again.", retryable=True
        )
    tool_calls = [
        ToolCall(id=c["id"] or f"call_{i}", name=c["name"],
                 arguments=_convert.parse_arguments(c["arguments"]))
        for i, c in (sorted(calls.items()))
    ]
    return "".join(text), tool_calls, usage, reported


async def ollama(client: Any, model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                 max_tokens: int, seconds: float,
                 on_text: OnText) -> tuple[str, list[ToolCall], Usage, str]:
    """One streamed /api/chat call (NDJSON chunks; counts in the last, `done` one)."""
    text: list[str] = []
    tool_calls: list[ToolCall] = []
    usage = Usage()
    reported = ""
    async with asyncio.timeout(seconds):
        stream = await client.chat(
            model=model,
            messages=_convert.ollama_messages(messages),
            tools=_convert.ollama_tools(tools) or None,
            stream=True,
            options={"num_predict": max_tokens},
        )
        async for chunk in stream:
            reported = chunk.model or reported
            msg = chunk.message
            for c in msg.tool_calls or []:
                tool_calls.append(ToolCall(id=f"call_{len(tool_calls)}", name=c.function.name,
                                           arguments=dict(c.function.arguments or {})))
            if msg.content:
                text.append(msg.content)
                await on_text("".join(text))
            if chunk.done:
                usage = Usage(input_tokens=chunk.prompt_eval_count or 0,
                              output_tokens=chunk.eval_count or 0)
    return "".join(text), tool_calls, usage, reported


async def anthropic(client: Any, model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                    max_tokens: int, seconds: float,
                    on_text: OnText) -> tuple[str, list[ToolCall], Usage, str]:
    """One streamed Messages API call through the SDK's stream helper (final message rebuilt)."""
    system, msgs = _convert.anthropic_messages(messages)
    kw: dict[str, Any] = {}
    if system:
        kw["system"] = system
    if tools:
        kw["tools"] = _convert.anthropic_tools(tools)
    async with asyncio.timeout(seconds):
        async with client.messages.stream(
            model=model, messages=msgs, max_tokens=max_tokens, timeout=seconds, **kw
        ) as stream:
            async for event in stream:
                if event.type == "text" and event.snapshot:
                    await on_text(event.snapshot)
            final = await stream.get_final_message()
    return _convert.anthropic_result(final)
