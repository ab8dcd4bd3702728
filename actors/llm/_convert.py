"""Pure conversions between the neutral chat types and each provider's wire format."""

from __future__ import annotations

import json
from typing import Any

from contracts.llm import ChatMessage, ToolCall, ToolSpec, Usage

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _schema(tool: ToolSpec) -> dict[str, Any]:
    """The tool's JSON schema, or an empty object schema when it has none."""
    return dict(tool.parameters) if tool.parameters else dict(_EMPTY_SCHEMA)


def parse_arguments(text: str | None) -> dict[str, Any]:
    """Decode a JSON arguments string; anything that is not a JSON object becomes {"_raw": text}."""
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}


# --- OpenAI chat completions -------------------------------------------------------------


def openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages as OpenAI chat-completions messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as OpenAI function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": _schema(t)},
        }
        for t in tools
    ]


def openai_result(resp: Any) -> tuple[str, list[ToolCall], Usage, str]:
    """Content, tool calls, usage and model of an OpenAI ChatCompletion."""
    msg = resp.choices[0].message
    calls: list[ToolCall] = []
    for i, c in enumerate(msg.tool_calls or []):
        fn = getattr(c, "function", None)
        if fn is not None:
            calls.append(ToolCall(id=c.id or f"call_{i}", name=fn.name, arguments=parse_arguments(fn.arguments)))
        else:  # a "custom" tool call carries free text instead of JSON arguments
            custom = c.custom
            calls.append(ToolCall(id=c.id or f"call_{i}", name=custom.name, arguments={"_raw": custom.input}))
    u = resp.usage
    usage = Usage(
        input_tokens=(u.prompt_tokens or 0) if u else 0,
        output_tokens=(u.completion_tokens or 0) if u else 0,
    )
    return msg.content or "", calls, usage, resp.model or ""


# --- Anthropic messages --------------------------------------------------------------------


def anthropic_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """Neutral messages as (system text, Anthropic messages); tool results merge into one user turn."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if m.content:
                system.append(m.content)
        elif m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            last = out[-1] if out else None
            if (
                last is not None
                and last["role"] == "user"
                and isinstance(last["content"], list)
                and all(b.get("type") == "tool_result" for b in last["content"])
            ):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            )
            if not blocks:
                continue  # the API rejects empty assistant turns
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                out.append({"role": "assistant", "content": m.content})
            else:
                out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": m.content})
    return "\n\n".join(system), out


def anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Anthropic custom tools."""
    return [{"name": t.name, "description": t.description, "input_schema": _schema(t)} for t in tools]


def anthropic_result(resp: Any) -> tuple[str, list[ToolCall], Usage, str]:
    """Content, tool calls, usage and model of an Anthropic Message."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in resp.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {"_raw": block.input}
            calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(args)))
    u = resp.usage
    usage = Usage(input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0)
    return "".join(texts), calls, usage, str(resp.model or "")


# --- Ollama chat ---------------------------------------------------------------------------


def ollama_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages as Ollama chat messages; tool results name their tool (`tool_name`)."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            name = m.name or names.get(m.tool_call_id, "")
            out.append({"role": "tool", "content": m.content, "tool_name": name or None})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content,
                    "tool_calls": [
                        {"function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def ollama_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Ollama function tools."""
    return openai_tools(tools)


def ollama_result(resp: Any) -> tuple[str, list[ToolCall], Usage, str]:
    """Content, tool calls (with synthetic ids call_0, call_1, ...), usage and model of a ChatResponse."""
    msg = resp.message
    calls = [
        ToolCall(id=f"call_{i}", name=c.function.name, arguments=dict(c.function.arguments or {}))
        for i, c in enumerate(msg.tool_calls or [])
    ]
    usage = Usage(input_tokens=resp.prompt_eval_count or 0, output_tokens=resp.eval_count or 0)
    return msg.content or "", calls, usage, resp.model or ""
