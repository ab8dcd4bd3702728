"""Comparing a re-run with its recording: model requests, model answers, tool calls, replies.

Generated prompt parts are pinned to what the recording saw: IDENTITY.md (written by the
heartbeat from live state) is given to the re-run planner as recorded (`identity_of`), and the
budget note (from the live token counters) is left out of the comparison. Everything the owner
edits (the soul in agent.toml, AGENTS.md, USER.md) and the planner's own logic is compared.
"""

from __future__ import annotations

import difflib

import msgspec

from contracts import ChatMessage, LlmRequest, LlmResponse, ToolCall

# The section headers of the planner's system prompt (actors/planner/context.py).
IDENTITY = "\n\n# Identity (IDENTITY.md)\n"
BUDGET = "\n\n# Budget\n"
_NEXT = ("\n\n# Lessons (AGENTS.md)\n", "\n\n# User (USER.md)\n", "\n\n# Relevant memories\n",
         BUDGET, "\n\nReply with [NO_REPLY]")


def _section(system: str, header: str) -> tuple[int, int] | None:
    """(start, end) of one section, header included, or None."""
    text = "\n\n" + system
    start = text.find(header)
    if start < 0:
        return None
    ends = [i for i in (text.find(h, start + len(header)) for h in _NEXT) if i > start]
    end = min(ends, default=len(text))
    return max(start - 2, 0), end - 2


def identity_of(request: LlmRequest) -> str | None:
    """IDENTITY.md as the recorded turn's system prompt had it (None: it had none)."""
    if not request.messages or request.messages[0].role != "system":
        return None
    system = request.messages[0].content
    span = _section(system, IDENTITY)
    if span is None:
        return None
    body = ("\n\n" + system)[span[0] + 2: span[1] + 2]
    return body.removeprefix(IDENTITY)


def _without_budget(message: ChatMessage) -> ChatMessage:
    if message.role != "system":
        return message
    span = _section(message.content, BUDGET)
    if span is None:
        return message
    content = message.content[:span[0]] + message.content[span[1]:]
    return msgspec.structs.replace(message, content=content)


def describe(m: ChatMessage) -> str:
    calls = ", ".join(call_text(c) for c in m.tool_calls)
    return f"[{m.role}] {m.content}" + (f" calls {calls}" if calls else "")


def call_text(c: ToolCall) -> str:
    return f"{c.name}({msgspec.json.encode(c.arguments).decode()})"


def _delta(a: str, b: str, limit: int = 8) -> str:
    lines = [line for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="",
                                                   n=0)
             if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    more = f" | ... {len(lines) - limit} more" if len(lines) > limit else ""
    return " | ".join(lines[:limit]) + more


def compare_requests(old: LlmRequest, new: LlmRequest) -> list[str]:
    """Differences between the recorded and the re-run model request, as readable lines."""
    diffs: list[str] = []
    if [t.name for t in old.tools] != [t.name for t in new.tools]:
        diffs.append(f"tools offered: {[t.name for t in old.tools]} -> {[t.name for t in new.tools]}")
    if len(old.messages) != len(new.messages):
        diffs.append(f"{len(old.messages)} messages -> {len(new.messages)}")
    for i, (a, b) in enumerate(zip(old.messages, new.messages, strict=False)):
        a, b = _without_budget(a), _without_budget(b)
        if describe(a) != describe(b):
            diffs.append(f"message {i} ({a.role}) changed: " + _delta(describe(a), describe(b)))
    return diffs


def compare_answers(old: LlmResponse | None, new: LlmResponse) -> list[str]:
    """How a live model's answer differs from the recorded one: text and tool calls."""
    if old is None:
        return ["the recording has no answer at this step"]
    diffs: list[str] = []
    if old.error or new.error:
        if old.error != new.error:
            diffs.append(f"error: {old.error!r} -> {new.error!r}")
    if old.content != new.content:
        diffs.append(f"answer: {old.content[:300]!r} -> {new.content[:300]!r}")
    before = [call_text(c) for c in old.tool_calls]
    after = [call_text(c) for c in new.tool_calls]
    if before != after:
        diffs.append(f"tool calls: {before} -> {after}")
    return diffs
