"""Session-level operations of the planner: /reset, /retry, a state too large to keep, the
owner's alert for a model outage, and the turns in progress that `status` shows."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from actors.planner.state import SessionState, dump
from contracts import LlmResponse, Notice, Reply, SessionReset, SessionRetry, Sink, TurnRequest

if TYPE_CHECKING:
    from bus import Bus
    from bus.subjects import Subjects
    from contracts.config import Config

log = logging.getLogger(__name__)

OUTAGE_KEY = "outage"  # in the sessions bucket: the model outage the owner was told about
STATE_LIMIT = 900_000  # bytes of one session's state; the server refuses over 1 MiB
TOO_LARGE = ("Sorry, this message ({kib} KiB) is too large for me to work with, so I dropped "
             "it. Send it in smaller parts, or as a file.")


class SessionOps:
    """Mixed into PlannerActor, which provides the turn steps."""

    config: Config
    bus: Bus
    subjects: Subjects
    clock: Callable[[], float] = time.time
    _turns: dict[str, dict[str, Any]]
    _outage_known: bool | None

    async def _on_turn(self, state: SessionState, req: TurnRequest) -> bool:
        raise NotImplementedError

    async def _finish(self, state: SessionState, text: str, record: bool = True,
                      failure: str = "") -> None:
        raise NotImplementedError

    # -- a state too large to keep -----------------------------------------------------------

    async def _fit(self, state: SessionState) -> bytes:
        """The state encoded under the KV payload limit: history goes first, then the largest
        waiting turns (each told so), then the turn in progress.

        A state that cannot be saved would fail every later event of the session.
        """
        data = dump(state)
        while len(data) > STATE_LIMIT and state.history:
            state.history = state.history[len(state.history) // 2 + 1 :]
            data = dump(state)
        while len(data) > STATE_LIMIT and state.queue:
            largest = max(state.queue, key=lambda q: len(q.text))
            state.queue.remove(largest)
            await self._too_large(state, largest)
            data = dump(state)
        if len(data) > STATE_LIMIT and state.active is not None:
            size = len(state.active.request.text) // 1024
            await self._finish(state, TOO_LARGE.format(kib=size), record=False)
            data = dump(state)
        if len(data) > STATE_LIMIT:
            state.failed = None
            data = dump(state)
        return data

    async def _too_large(self, state: SessionState, req: TurnRequest) -> None:
        text = TOO_LARGE.format(kib=len(req.text) // 1024)
        await self.bus.send(Reply(id=f"{req.id}:reply", session=state.session, turn_id=req.id,
                                  sink=req.reply_to, text=text))
        state.remember_turn(req.id)

    # -- /reset and /retry -----------------------------------------------------------------

    async def _on_reset(self, state: SessionState, msg: SessionReset) -> bool:
        dropped = (1 if state.active else 0) + len(state.queue)
        state.history, state.queue, state.active, state.failed = [], [], None, None
        # The reset conversation is archived (the observer learns from it): its summary goes too.
        state.summary, state.unsummarized, state.summarizing = "", [], ""
        log.info("session reset: history cleared, %d turn(s) dropped", dropped)
        return True

    async def _on_retry(self, state: SessionState, msg: SessionRetry) -> bool:
        failed = state.failed
        if failed is None:
            sink = msg.reply_to or Sink.parse(self.config.owner.sink)
            reply = Reply(id=f"{msg.id}:reply", session=state.session, turn_id=msg.id,
                          sink=sink, text="There is no failed message to try again here.")
            await self.bus.send(reply)
            return False
        state.failed = None
        await self._on_turn(state, msgspec.structs.replace(failed, id=msg.id))
        return True

    # -- model outages -----------------------------------------------------------------------

    async def _outage(self, msg: LlmResponse) -> None:
        """Tell the owner once when an outage starts failing turns, and once when it ends."""
        if not msg.error and self._outage_known is False:
            return  # the common case: an answer, and no outage to end
        bucket = self.subjects.kv_sessions
        known = await self.bus.kv_get(bucket, OUTAGE_KEY)
        self._outage_known = known is not None
        if msg.outage and not known:
            text = ("The model provider is failing: a turn could not be answered after "
                    f"retrying. {msg.error[:400]} Users are told, and can resend with /retry.")
        elif not msg.error and known:
            text = "The model provider answers again; the outage is over."
        else:
            return
        sink = Sink.parse(self.config.owner.sink)
        notice = Notice(id=f"{msg.id}:outage", sink=sink, text=text, source="planner")
        await self.bus.send(notice)
        await self.bus.kv_put(bucket, OUTAGE_KEY, msg.id.encode() if msg.outage else b"")
        self._outage_known = msg.outage  # an empty value reads as absent

    def turns_info(self) -> dict[str, Any]:
        """Turns in progress for `status`: the oldest first, overdue ones marked stuck."""
        now = self.clock()
        turns = sorted(self._turns.values(), key=lambda t: t["started"])
        shown = [{
            "session": t["session"], "turn": t["turn"], "phase": t["phase"],
            "age_secs": round(now - t["started"], 1),
            "step_secs": round(now - t["phase_since"], 1),
            "stuck": t["deadline"] <= now, "progress": t["progress"], "queued": t["queued"],
        } for t in turns[:20]]
        return {"active_turns": len(turns), "turns": shown,
                "stuck_turns": sum(1 for t in turns if t["deadline"] <= now)}
