"""send_message (text and workspace files to the session's chat or an explicit sink) and
escalate (ask the oracle model through the llm actor; its answer arrives as the tool result)."""

from __future__ import annotations

import asyncio
import mimetypes

from actors.executor._limits import RateLimiter
from actors.executor.base import Tool, ToolContext, ToolOutput, arg_str
from contracts import (
    ChatMessage,
    LlmRequest,
    Reply,
    Sink,
    ToolRequest,
    ToolSpec,
    audit_event,
    labels,
)
from kit.outbound import Refused, check_file

MESSAGE_RATE_LIMIT = 20  # per minute: a runaway loop must not flood a chat
ORACLE_SYSTEM = (
    "You are the oracle: a more capable model that an AI agent consults when it is stuck on a "
    "hard problem (architecture, subtle bugs, large code, an approach that keeps failing). "
    "Answer the agent's question directly and completely; it will act on your answer."
)
NO_ORACLE = (
    "No oracle model is configured, so escalate is unavailable. Ask the owner to add "
    '[models.roles] oracle = "provider/model" to config.toml (or WM__MODELS__ROLES__ORACLE).'
)


def attach(ctx: ToolContext, ref: str) -> str:
    """The workspace-relative path of a file that may be sent, or Refused with the reason."""
    return check_file(ctx.workspace, ref, ctx.scanner)


def file_kind(path: str) -> str:
    """image, audio, video or document, from the file name."""
    mime = mimetypes.guess_type(path)[0] or ""
    major = mime.split("/")[0]
    return major if major in ("image", "audio", "video") else "document"


class SendMessage(Tool):
    spec = ToolSpec(
        name="send_message",
        description=(
            "Send a message now, before your final answer: to this conversation's chat, or "
            "(owner only) to an explicit sink such as 'telegram:12345' or 'terminal:owner'. "
            "Attach workspace files with files=[...] (they are delivered by the channel)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The message text."},
                "files": {"type": "array", "items": {"type": "string"},
                          "description": "Workspace-relative paths of files to attach."},
                "sink": {"type": "string",
                         "description": "channel:chat[:thread]; default: this conversation."},
            },
            "required": ["text"],
        },
    )
    side_effects = False  # the message id is derived from the call, so a re-send is dropped
    outbound = True

    def __init__(self) -> None:
        self.limiter = RateLimiter(MESSAGE_RATE_LIMIT)

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        """Another chat than this conversation's, or the owner's own, needs the owner's yes:
        a steered model must not message third parties on its own."""
        try:
            sink = self._sink(req)
        except (Refused, ValueError):
            return ""  # run() refuses it with the reason
        own = {req.reply_to, _owner_sink(ctx)} - {None}
        return "" if sink in own else f"it sends a message to another chat ({sink})"

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        text = arg_str(req, "text")
        files = req.arguments.get("files") or []
        if not isinstance(files, list):
            files = [files]
        if not text.strip() and not files:
            return ToolOutput(ok=False, output="send_message needs some text or files.")
        try:
            sink = self._sink(req)
            paths = await asyncio.to_thread(lambda: [attach(ctx, str(f)) for f in files])
        except (Refused, ValueError) as exc:
            return ToolOutput(ok=False, output=str(exc))
        refusal = self.limiter.refusal(self.name) or await _clearance(req, sink, ctx)
        if refusal:
            return ToolOutput(ok=False, output=refusal)
        # Files travel as `[file: path]` markers, which the channel adapters turn into uploads.
        body = "\n".join([ctx.redactor.redact(text).strip(), *(f"[file: {p}]" for p in paths)])
        reply = Reply(id=f"{req.id}:message", session=req.session, turn_id=req.id,
                      sink=sink, text=body.strip())
        await ctx.bus.send(reply)
        kinds = ", ".join(f"{p} ({file_kind(p)})" for p in paths)
        return ToolOutput(ok=True, output=f"Sent to {sink}" + (f" with {kinds}." if kinds else "."))

    def _sink(self, req: ToolRequest) -> Sink:
        explicit = arg_str(req, "sink").strip()
        if not explicit:
            if req.reply_to is None:
                raise Refused("This conversation has no chat to send to; name a sink.")
            return req.reply_to
        sink = Sink.parse(explicit)
        if not req.is_owner and sink != req.reply_to:
            raise Refused("Only the owner's conversations may send to other chats.")
        return sink


async def _clearance(req: ToolRequest, sink: Sink, ctx: ToolContext) -> str:
    """No write down: the turn's data may go only to sinks cleared for its label (audited)."""
    where = f"{sink.channel}:{sink.chat}"
    if labels.cleared(req.label, where, ctx.config.privacy.sink_rules, ctx.config.owner.sink):
        return ""
    why = (f"Not sent: this conversation carries data labelled {req.label}, which may not be "
           f"sent to {where} (privacy.sink_rules in config.toml).")
    await ctx.bus.send(audit_event("executor", "sink.denied", "refused", why, about=req.id,
                                   session=req.session,
                                   refs={"label": req.label, "sink": where, "tool": req.name}))
    return why


def _owner_sink(ctx: ToolContext) -> Sink | None:
    try:
        return Sink.parse(ctx.config.owner.sink) if ctx.config.owner.sink else None
    except ValueError:
        return None


class Escalate(Tool):
    spec = ToolSpec(
        name="escalate",
        description=(
            "Ask a more powerful model for help. Use for complex architecture decisions, "
            "debugging subtle issues, analysing large code, or when your current approach "
            "fails. Costs more tokens."
        ),
        parameters={
            "type": "object",
            "properties": {
                "question": {"type": "string",
                             "description": "The question or problem to escalate."},
                "context": {"type": "string",
                            "description": "Relevant context: code, errors, what you tried."},
            },
            "required": ["question"],
        },
    )
    side_effects = False  # ids are derived from the call: a redelivery asks only once
    outbound = True  # the oracle may be a cloud model

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput | None:
        models = ctx.config.models
        if not (models.roles.get("oracle") or models.skills.get("oracle")):
            return ToolOutput(ok=False, output=NO_ORACLE)
        question = arg_str(req, "question").strip()
        if not question:
            return ToolOutput(ok=False, output="escalate needs a 'question'.")
        context = arg_str(req, "context").strip()
        prompt = question + (f"\n\nContext:\n{context}" if context else "")
        ask = LlmRequest(
            id=f"{req.id}:escalate", session=req.session, turn_id=req.turn_id, step=req.step,
            role="oracle", for_call=req, purpose="escalation",
            label=req.label, principal=req.principal,  # routed like the turn's data
            messages=[ChatMessage(role="system", content=ORACLE_SYSTEM),
                      ChatMessage(role="user", content=ctx.redactor.redact(prompt))],
        )
        await ctx.bus.send(ask)
        return None  # the llm actor publishes the ToolResult
