"""The escalate tool's answer: the oracle's response becomes the waiting call's ToolResult."""

from __future__ import annotations

import os
from typing import Any

from contracts import LlmResponse, ToolRequest, ToolResult
from kit.redact import Redactor


def _redactor(actor: Any) -> Redactor:
    """One redactor per llm actor: .env values, secret-looking variables (model keys too)."""
    redactor = getattr(actor, "_escalate_redactor", None)
    if redactor is None:
        redactor = Redactor.from_env(actor.home / ".env", os.environ)
        actor._escalate_redactor = redactor
    return redactor


async def answer_call(actor: Any, call: ToolRequest, response: LlmResponse) -> None:
    """Publish the oracle's answer (or why there is none) as the call's result, redacted."""
    if response.error:
        ok, text = False, f"The oracle could not answer: {response.error}"
    else:
        ok, text = True, f"The oracle ({response.model}) answered:\n{response.content}"
    result = ToolResult(
        id=f"{call.id}:result", session=call.session, turn_id=call.turn_id, step=call.step,
        call_id=call.call_id, name=call.name, ok=ok, output=_redactor(actor).redact(text),
        reply_to=call.reply_to,
    )
    await actor.send(result)
