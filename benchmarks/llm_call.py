"""CPU per model call in the llm actor's request path: the OpenAI SDK's typed `create` against
the prebuilt JSON body (`actors/llm/_openai_raw.py`), both through the same SDK client to the
scripted server in this process, with a short and a 40-message history. CPU time, not wall
time, so the figure holds on a busy machine.

    python -m benchmarks.llm_call
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from actors.llm import _convert, _openai_raw
from contracts.llm import ChatMessage, ToolSpec
from tests.fakes.llm_servers import FakeLLM

CALLS = 200


def _history(n: int) -> list[ChatMessage]:
    msgs = [ChatMessage(role="system", content="You are a helpful agent. " * 40)]
    for i in range(n):
        msgs.append(ChatMessage(role="user" if i % 2 == 0 else "assistant",
                                content=f"message {i}: " + "some words of a conversation " * 8))
    msgs.append(ChatMessage(role="user", content="hello there"))
    return msgs


TOOLS = [ToolSpec(name=f"tool_{i}", description="does a thing " * 5,
                  parameters={"type": "object", "properties": {"x": {"type": "string"}}})
         for i in range(12)]


async def _sdk(client: Any, msgs: list[ChatMessage]) -> None:
    await client.chat.completions.create(
        model="bench", messages=_convert.openai_messages(msgs),
        tools=_convert.openai_tools(TOOLS), max_tokens=256, timeout=30)


async def _raw(client: Any, msgs: list[ChatMessage]) -> None:
    body = _openai_raw.request_body("bench", msgs, TOOLS, 256)
    _openai_raw.parse(await _openai_raw.post(client, body, 30))


async def _cpu_ms(call: Any, client: Any, msgs: list[ChatMessage]) -> float:
    for _ in range(10):  # warm: connection pool, caches
        await call(client, msgs)
    t0 = time.process_time()
    for _ in range(CALLS):
        await call(client, msgs)
    return (time.process_time() - t0) * 1000 / CALLS


async def figures() -> list[dict[str, Any]]:
    """CPU-ms per call of this process (client and the in-process server together)."""
    import openai

    fake = FakeLLM()
    url = await fake.start("openai")
    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
    out = []
    try:
        for n in (2, 40):
            msgs = _history(n)
            sdk = await _cpu_ms(_sdk, client, msgs)
            raw = await _cpu_ms(_raw, client, msgs)
            out.append({"figure": f"llm request path, {n}-message history: CPU-ms per call, "
                                  "SDK create -> prebuilt JSON (incl. the in-process server)",
                        "value": f"{sdk:.2f} -> {raw:.2f}", "goal": "", "met": None,
                        "load": round(os.getloadavg()[0], 2)})
    finally:
        await client.close()
        await fake.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(figures()), indent=2))
