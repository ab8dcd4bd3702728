"""The graduated taint rule in the executor (seed 003 §4.4, invariant D): a write that carries
tainted content waits for the owner; reads never do, and neither does anything in a clean turn
(the owner's own chat, untouched by outside content, sees no new approvals).

A call is a write unless its tool is in `privacy.read_tools` (web_request with GET or HEAD
reads; send_message to the conversation's own chat is its reply, which goes there anyway; a
non-owner's memory_save stays in their own scope).
Its content is "structured" when every string in its arguments is a typed value, an extracted
value of the turn (kit/extract.py) or one of the tool's own enum choices; anything else is
free text. The turn's taint travels on the ToolRequest (set by the planner from the turn and
its tool results), never from the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts import ToolRequest, taint
from kit.extract import enums, free_text, vocabulary

if TYPE_CHECKING:
    from actors.executor.base import Tool
    from contracts.config import Config


#: Labels by provenance (seed 003 §4.3) for tools whose data has a known origin; the owner's
#: executor.tool_labels win. A web page came from the open internet: public.
DEFAULT_LABELS = {"web_fetch": "public"}


def output_taint(name: str, config: Config) -> taint.Taint:
    """How tainted a tool's output is: privacy.tool_taint, else raw for MCP tools (content
    from another service), clean for the rest."""
    level = config.privacy.tool_taint.get(name)
    if level in taint.LEVELS:
        return level  # checked against LEVELS at config load
    return taint.RAW if "__" in name else taint.CLEAN


def is_write(req: ToolRequest, config: Config) -> bool:
    """Whether this call changes something outside the turn."""
    if req.name in config.privacy.read_tools:
        return False
    if req.name == "web_request":
        method = str(req.arguments.get("method") or "GET").upper()
        return method not in ("GET", "HEAD")
    if req.name == "send_message":
        sink = str(req.arguments.get("sink") or "").strip()
        own = req.reply_to is not None and sink in ("", str(req.reply_to))
        # Someone else's turn naming another chat is refused outright (messaging.py).
        return (not own and req.is_owner) or bool(req.arguments.get("files"))
    if req.name == "memory_save":
        # A non-owner's memories land in their own scope (actors/memory/scopes.py), which the
        # owner's turns never read: no deputy to confuse. The owner's memory is what matters.
        return req.is_owner
    return True


def held(req: ToolRequest, tool: Tool, config: Config) -> str:
    """Why this call needs the owner's approval under the graduated rule, or ""."""
    if req.taint == taint.CLEAN or not is_write(req, config):
        return ""
    text = free_text(req.arguments, vocabulary(req.extracted) | enums(tool.spec.parameters))
    if not taint.needs_approval(req.taint, bool(text)):
        return ""
    if req.taint == taint.RAW:
        return (f"{req.name} writes while this conversation carries raw outside content "
                "(a web page, a webhook, someone else's message), which could be steering it")
    sample = text[0][:60]
    return (f"{req.name} writes free text ({sample!r}) in a conversation built from extracted "
            "outside content; only its structured fields are approved without you")
