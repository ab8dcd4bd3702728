"""What keeps one stuck message from stopping a conversation: step deadlines and dead letters.

Every step of a turn (recall, model call, tool calls) has a deadline kept in the session state.
A sweep finds steps past theirs; a dead letter that belongs to the active turn ends the step at
once. Optional steps (recall, memory tools) fail soft: the turn goes on without them. Any other
failed step ends the turn with a sentence to the user and starts the next queued turn, so the
session is never left waiting on something that will not come.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from actors.planner.state import SessionState, TurnState
from contracts import (
    DeadLetter,
    LlmProgress,
    Recalled,
    Reply,
    ToolResult,
    TurnRequest,
)

if TYPE_CHECKING:
    from bus import Bus
    from bus.subjects import Subjects
    from contracts.config import Config

log = logging.getLogger(__name__)

#: Tools whose failure a turn survives: remembering is a side effect, not the answer.
OPTIONAL_TOOLS = frozenset({"memory_save", "memory_search"})
RETRY_HINT = "Send /retry to try this message again, or /reset if the conversation stays stuck."


class _Ref(msgspec.Struct, kw_only=True):
    """The fields of a dead-lettered payload that say which turn and step it belonged to."""

    type: str = ""
    session: str = ""
    turn_id: str = ""
    step: int = -1
    call_id: str = ""
    name: str = ""
    for_call: _Ref | None = None


_ref_dec = msgspec.json.Decoder(_Ref)
#: The phase of a turn that a dead-lettered message of each type belongs to.
_PHASES = {"memory.recall": "recall", "memory.recalled": "recall", "llm.request": "llm",
           "llm.response": "llm", "llm.progress": "llm", "tool.request": "tools",
           "tool.result": "tools"}


class TurnFaults:
    """Planner behaviour for faults; mixed into PlannerActor, which provides the steps."""

    config: Config
    bus: Bus
    subjects: Subjects
    clock: Callable[[], float] = time.time
    _deadlines: dict[str, float]
    _turns: dict[str, dict[str, Any]]

    # -- provided by PlannerActor ----------------------------------------------------------

    async def _load(self, session: str) -> SessionState:
        raise NotImplementedError

    async def _save(self, state: SessionState) -> None:
        raise NotImplementedError

    def _lock(self, session: str) -> asyncio.Lock:
        raise NotImplementedError

    async def _on_turn(self, state: SessionState, req: TurnRequest) -> bool:
        raise NotImplementedError

    async def _on_recalled(self, state: SessionState, msg: Recalled) -> bool:
        raise NotImplementedError

    async def _on_tool(self, state: SessionState, msg: ToolResult) -> bool:
        raise NotImplementedError

    async def _finish(self, state: SessionState, text: str, record: bool = True,
                      failure: str = "") -> None:
        raise NotImplementedError

    def alive(self, loop: str, every: float = 1.0) -> None:
        raise NotImplementedError

    async def _maybe_collect(self, now: float) -> None:  # _wfgc.py, earlier in the MRO
        raise NotImplementedError

    # -- deadlines -------------------------------------------------------------------------

    def _arm(self, turn: TurnState, phase: str) -> None:
        """Enter `phase` with a fresh deadline."""
        cfg = self.config.planner
        limit = {"recall": cfg.recall_deadline_secs, "llm": cfg.model_silence_secs,
                 "tools": cfg.tool_deadline_secs}[phase]
        now = self.clock()
        turn.phase, turn.phase_since, turn.deadline, turn.progress = phase, now, now + limit, ""
        d = turn.request.delegation
        if d is not None and d.deadline:  # a sub-task's steps end with its own deadline
            turn.deadline = min(turn.deadline, max(d.deadline, now))
        turn.started = turn.started or now

    def _track(self, state: SessionState) -> None:
        """Keep the sweep's index and the status summary in step with a saved state."""
        turn = state.active
        if turn is None:
            self._deadlines.pop(state.session, None)
            self._turns.pop(state.session, None)
            return
        if not turn.deadline:  # saved before deadlines existed: give it a fresh one now
            self._arm(turn, turn.phase)
        self._deadlines[state.session] = turn.deadline
        self._turns[state.session] = {
            "session": state.session, "turn": turn.turn_id, "phase": turn.phase,
            "started": turn.started, "phase_since": turn.phase_since,
            "deadline": turn.deadline, "progress": turn.progress, "queued": len(state.queue),
        }

    async def _index_sessions(self) -> None:
        """Find the sessions with a turn in progress (after a restart, or an upgrade)."""
        for key in await self.bus.kv_keys(self.subjects.kv_sessions, "s."):
            data = await self.bus.kv_get(self.subjects.kv_sessions, key)
            if not data:
                continue
            try:
                state = msgspec.json.decode(data, type=SessionState)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("session state %s unreadable (%s); skipped", key, exc)
                continue
            self._track(state)

    async def _sweep(self) -> None:
        """Expire steps past their deadline, forever (a background loop in health)."""
        every = self.config.planner.sweep_every_secs
        await self._index_sessions()
        while True:
            self.alive("deadlines", every)
            now = self.clock()
            for session, when in list(self._deadlines.items()):
                if when > now:
                    continue
                try:
                    await self._expire(session)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - one session's trouble must not stop the sweep
                    log.exception("expiring the turn of %s failed; trying again", session)
            await self._maybe_collect(now)  # finished delegation workflows (_wfgc.py)
            await asyncio.sleep(every)

    async def _expire(self, session: str) -> None:
        async with self._lock(session):
            state = await self._load(session)
            turn = state.active
            if turn is not None and turn.deadline and turn.deadline <= self.clock():
                waited = round(self.clock() - turn.phase_since)
                await self._step_failed(state, turn, turn.phase, f"no answer in {waited} s")
                await self._save(state)
            self._track(state)

    # -- a step that failed or will never answer ------------------------------------------

    async def _step_failed(self, state: SessionState, turn: TurnState, phase: str,
                           why: str, names: list[str] | None = None) -> None:
        """End `phase` of the active turn: soft for optional steps, else end the turn."""
        log.warning("turn %s: the %s step failed: %s", turn.turn_id, phase, why)
        if phase == "recall":
            recalled = Recalled(id=f"{turn.turn_id}:recall:skipped", session=state.session,
                                turn_id=turn.turn_id, error=why)
            await self._on_recalled(state, recalled)
            return
        if phase == "tools":
            pending = _pending_calls(turn)
            stuck = [n for c, n in pending.items() if names is None or n in names]
            if stuck and all(n in OPTIONAL_TOOLS for n in stuck):
                for call_id, name in pending.items():
                    if names is None or name in names:
                        await self._on_tool(state, _skipped(state, turn, call_id, name, why))
                return
            what = f"the tool call {', '.join(stuck) or 'of this turn'}"
        else:
            what = "the model call"
        text = (f"Sorry, I could not finish this message: {what} failed ({why}). "
                f"{RETRY_HINT}")
        await self._finish(state, text, record=False, failure=text)

    async def _on_dead_letter(self, letter: DeadLetter) -> None:
        """A message of an active turn was dead-lettered: that step will never answer."""
        try:
            ref = _ref_dec.decode(letter.payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # not a turn's message (or cut at 64 KiB): the deadline still applies
        if ref.for_call is not None:
            ref = ref.for_call
        if ref.type == "turn.request" and letter.actor == "planner":
            await self._refused_turn(letter)
            return
        if not ref.session or not ref.turn_id:
            return
        async with self._lock(ref.session):
            state = await self._load(ref.session)
            turn = state.active
            if turn is None or turn.turn_id != ref.turn_id:
                return
            if ref.step >= 0 and ref.step != turn.step:
                return  # an earlier step's message: that step is already over
            why = f"the {letter.actor} actor gave up on it: {letter.reason[:300]}"
            phase = "tools" if ref.call_id else _PHASES.get(ref.type, turn.phase)
            if phase != turn.phase:
                return  # a step the turn is no longer (or not yet) at
            if phase == "tools" and ref.call_id not in _pending_calls(turn):
                return
            await self._step_failed(state, turn, phase, why, [ref.name] if ref.call_id else None)
            await self._save(state)
            self._track(state)

    async def _refused_turn(self, letter: DeadLetter) -> None:
        """The planner could not even accept a turn: tell its sender, who would wait forever."""
        try:
            req = msgspec.json.decode(letter.payload, type=TurnRequest)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # cut at 64 KiB or not a turn: nothing to answer to
        async with self._lock(req.session):
            state = await self._load(req.session)
            if state.knows(req.id):
                return
        text = (f"Sorry, I could not take this message ({letter.reason[:200]}). Please send it "
                "again; /reset clears the conversation if this keeps happening.")
        reply = Reply(id=f"{req.id}:refused", session=req.session, turn_id=req.id,
                      sink=req.reply_to, text=text)
        await self.bus.send(reply)

    def _on_progress(self, state: SessionState, msg: LlmProgress) -> bool:
        """The llm is still at it: the model step's deadline starts again."""
        turn = state.active
        if turn is None or turn.turn_id != msg.turn_id or turn.phase != "llm":
            return False
        if turn.step != msg.step:
            return False
        turn.deadline = self.clock() + self.config.planner.model_silence_secs
        turn.progress = msg.reason or "working"
        return True

def _pending_calls(turn: TurnState) -> dict[str, str]:
    """Tool calls of the current step still waiting for a result: call id -> tool name."""
    names: dict[str, str] = {}
    for message in reversed(turn.messages):
        if message.role == "assistant":
            names = {c.id: c.name for c in message.tool_calls}
            break
    return {c: names.get(c, "") for c in turn.calls if c not in turn.results}


def _skipped(state: SessionState, turn: TurnState, call_id: str, name: str,
             why: str) -> ToolResult:
    i = turn.calls.index(call_id)
    return ToolResult(
        id=f"{turn.turn_id}:tool:{turn.step}:{i}:skipped", session=state.session,
        turn_id=turn.turn_id, step=turn.step, call_id=call_id, name=name, ok=False,
        output=f"The {name} call did not complete ({why}); nothing was stored or found. "
        "Go on without it.",
    )
