"""AGENTS.md and USER.md behind the WriteGate: the executor owns them.

The sandbox sees only workspace/ and scripts/, so a command cannot write the home's prompt
files ("Read-only file system"); the agent proposes changes with the `edit_agent_file` tool, the
observer (reflection) and the heartbeat (digests) with `home.propose` messages, and the owner
reviews, lists and reverts them (`/memory history|pending|apply|drop|revert`, `wintermute
memory history|revert`). Versions live in `data/home.git`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from actors.executor.base import Tool, ToolContext, ToolOutput, arg_str
from actors.executor.gate.core import WriteGate
from actors.executor.gate.revert import history, revert
from bus import Reject
from contracts import HomeAnswer, HomeCommand, HomeEditPropose, Notice, ToolRequest, ToolSpec
from contracts import short_hash as _hash
from kit.modellist import json_list

if TYPE_CHECKING:
    from actors.executor.actor import ExecutorActor

FILES = ("AGENTS.md", "USER.md")
POLICY_KEYS = {"AGENTS.md": "agents_md", "USER.md": "user_md"}
TOOL = "edit_agent_file"


def home_gate(actor: ExecutorActor) -> WriteGate:
    """The gate over the home's AGENTS.md and USER.md."""

    def policy_of(path: str) -> tuple[str, str]:
        key = POLICY_KEYS[path]
        return str(getattr(actor.config.memory, key)), f"memory.{key}"

    return WriteGate(actor, "home", actor.home, actor.home / "data" / "home.git", FILES, policy_of)


MAX_LESSONS = 10
MAX_LESSON_CHARS = 300
_lessons = msgspec.json.Decoder(list[str])


def bullets(answer: str) -> str:
    """A model's lessons (a JSON list of sentences, inside prose or a code fence too) as
    bullet lines ("" for an empty list); ValueError saying why it is not such a list."""
    items: list[str] = json_list(answer, _lessons, "the model's answer", "a list of sentences")
    if len(items) > MAX_LESSONS:
        raise ValueError(f"the model gave {len(items)} lessons; at most {MAX_LESSONS}")
    lines = [" ".join(item.split()) for item in items]
    if any(not line or len(line) > MAX_LESSON_CHARS for line in lines):
        raise ValueError(f"each lesson must be 1 to {MAX_LESSON_CHARS} characters")
    return "".join(f"- {line}\n" for line in lines)


def compose(gate: WriteGate, path: str, text: str, append: str) -> str:
    """The whole new text: `text`, or the file as it is now with `append` added at its end.
    ValueError unless exactly one is given, or for a file the gate does not write (checked
    before anything is read)."""
    if path not in gate.files:
        raise ValueError(f"{path!r} is not one of the files this gate writes "
                         f"({', '.join(gate.files)})")
    if bool(text.strip()) == bool(append.strip()):
        raise ValueError("give exactly one of 'text' (the whole new file) and 'append'")
    if text.strip():
        return text if text.endswith("\n") else text + "\n"
    current = gate.read(path)
    joint = "" if not current or current.endswith("\n") else "\n"
    return f"{current}{joint}{append.strip(chr(10))}\n"


def hint(command: str) -> str:
    """What to add to a command's output when it named the prompt files: in a sandbox it fails
    ("Read-only file system") or writes a copy the agent never reads."""
    if not any(name in command for name in FILES):
        return ""
    return (f"\n(To change AGENTS.md or USER.md use the {TOOL} tool: it puts the change to the "
            "owner and keeps it revertible; commands cannot write them from a sandbox.)")


class EditAgentFile(Tool):
    spec = ToolSpec(
        name=TOOL,
        description=(
            "Propose a change to AGENTS.md (lessons learned while working, read in every "
            "conversation) or USER.md (what you know about the owner). Commands cannot write "
            "these files; this tool can. The change is applied once the owner approves it (or "
            "at once when the owner allowed that) and can be reverted. Give 'append' (lines to "
            "add at the end) or 'text' (the whole new file), and a short 'reason'."
        ),
        parameters={
            "type": "object",
            "properties": {
                "file": {"type": "string", "enum": list(FILES)},
                "append": {"type": "string", "description": "Lines to add at the end."},
                "text": {"type": "string", "description": "The whole new content."},
                "reason": {"type": "string", "description": "Why, in one sentence."},
            },
            "required": ["file", "reason"],
        },
    )
    side_effects = False  # the gate is idempotent by the proposal id (derived from the call)

    def __init__(self, gate: WriteGate) -> None:
        self.gate = gate

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        path = arg_str(req, "file")
        try:
            text = compose(self.gate, path, ctx.redactor.redact(arg_str(req, "text")),
                           ctx.redactor.redact(arg_str(req, "append")))
            p = await self.gate.propose(
                _hash(req.id, 8), path, text, reason=arg_str(req, "reason"),
                by=f"the agent ({req.principal or req.session})", is_owner=req.is_owner,
                session=req.session)
        except (ValueError, KeyError) as exc:
            return ToolOutput(ok=False, output=f"{TOOL}: {exc}. Nothing was changed.")
        if p.status == "pending":
            return ToolOutput(ok=True, output=(
                f"Proposed as change {p.id}; the owner was asked to approve it. It is not in "
                "effect yet: it is applied once approved."))
        return ToolOutput(ok=p.status == "applied", output=self.gate.describe(p),
                          refused=p.status == "refused")


class HomeFiles:
    """The executor's side of the gate: the tool, proposals from other actors, commands."""

    def __init__(self, actor: ExecutorActor) -> None:
        self.actor = actor
        self.gate = home_gate(actor)
        self.tool = EditAgentFile(self.gate)

    async def propose(self, msg: HomeEditPropose) -> None:
        """A change from the observer; malformed: dead-lettered, nothing read or written."""
        redact = self.actor.ctx.redactor.redact
        try:
            append = msg.append
            if msg.lessons:
                if msg.append:
                    raise ValueError("give 'lessons' or 'append', not both")
                append = bullets(msg.lessons)
                if not append:
                    return  # the model found nothing to learn
            text = compose(self.gate, msg.path, redact(msg.text), redact(append))
            await self.gate.propose(_hash(msg.id, 8), msg.path, text, reason=msg.reason,
                                    by=msg.by or "another actor", is_owner=msg.is_owner,
                                    session=msg.session)
        except ValueError as exc:
            raise Reject(f"malformed change proposal from {msg.by or 'unknown'}: {exc}") from exc

    async def command(self, msg: HomeCommand) -> None:
        ok, text, commit = False, "Only the owner can see or change AGENTS.md's versions.", ""
        if msg.is_owner:
            ok, text, commit = await self._do(msg)
        await self.actor.send(HomeAnswer(id=f"{msg.id}:answer", request=msg.id, ok=ok, text=text,
                                         commit=commit))
        if msg.reply_to is not None:
            await self.actor.send(Notice(id=f"{msg.id}:notice", sink=msg.reply_to, text=text,
                                         source="executor"))

    async def _do(self, msg: HomeCommand) -> tuple[bool, str, str]:
        arg = msg.arg.strip()
        match msg.action:
            case "history":
                return True, await history(self.gate), ""
            case "pending":
                return True, await self._pending(), ""
            case "apply" | "drop":
                ok, text = await self.gate.decide(arg, approve=msg.action == "apply",
                                                  by=f"the owner ({msg.principal})")
                return ok, text, ""
            case "revert":
                return await self._revert(msg, arg)
        return False, (f"Unknown action {msg.action!r}: use history, pending, apply, drop or "
                       "revert."), ""

    async def _pending(self) -> str:
        waiting = await self.gate.pending()
        if not waiting:
            return "No changes to AGENTS.md or USER.md wait for approval."
        return "\n".join(f"{p.id}  {p.path}  by {p.by}: {p.reason}" for p in waiting) + (
            "\n`/memory apply ID` applies one, `/memory drop ID` drops it.")

    async def _revert(self, msg: HomeCommand, version: str) -> tuple[bool, str, str]:
        # Once only, like scripts/ reverts: a redelivery after a crash does not revert twice.
        bus: Any = self.actor.bus
        key = "homerevert." + _hash(msg.id, 32)
        if await bus.kv_get(self.actor.subjects.kv_done, key) is not None:
            return False, ("The executor restarted while reverting; it was not run again. "
                           "Check `/memory history`."), ""
        await bus.kv_put(self.actor.subjects.kv_done, key, b"started")
        return await revert(self.gate, version, by=f"the owner ({msg.principal})")
