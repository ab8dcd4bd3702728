"""The planner: one event-driven state machine per session, persisted in KV.

It never blocks on another actor. Each inbox event (a turn, recalled memories, a model
response, a tool result) advances the session's state, publishes what comes next with
deterministic ids, then saves the state. A crash between publish and save re-publishes the
same ids on redelivery, which JetStream dedupes; a crash after the save finds the event
already applied.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from actors.base import Actor
from actors.planner import _compact, _delegate, _guard, _skills, context
from actors.planner._delegate import Delegating
from actors.planner._faults import TurnFaults
from actors.planner._pte import PlanThenExecute
from actors.planner._session import SessionOps
from actors.planner._state_cache import StateCache
from actors.planner._templates import TemplateOps
from actors.planner._turing import ClaimCheck
from actors.planner._wfgc import WorkflowCollection
from actors.planner.principals import forged
from actors.planner.state import SessionState, TurnState, load
from bus import PublishError, Reject, Retry
from contracts import (
    ChatMessage,
    DeadLetter,
    LlmProgress,
    LlmRequest,
    LlmResponse,
    Recall,
    Recalled,
    Reply,
    SessionReset,
    SessionRetry,
    Sink,
    TaskOutcome,
    ToolResult,
    ToolSpec,
    TurnRequest,
    labels,
    short_hash,
    taint,
)
from state import budget

log = logging.getLogger(__name__)

PlannerInbox = (
    TurnRequest | Recalled | LlmResponse | LlmProgress | ToolResult | SessionReset | SessionRetry
)


class PlannerActor(Actor, WorkflowCollection, TurnFaults, SessionOps, TemplateOps,
                   PlanThenExecute, Delegating, ClaimCheck):
    name = "planner"
    inbox = PlannerInbox | DeadLetter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._locks: dict[str, asyncio.Lock] = {}
        self._deadlines: dict[str, float] = {}  # session -> its active step's deadline
        self._turns: dict[str, dict[str, Any]] = {}  # session -> its turn in progress, for status
        self._outage_known: bool | None = None  # whether the owner was told of an outage
        self._states = StateCache(self.bus, self.subjects.kv_sessions)
        self._tools_waited = False  # waited once for the executor's first tool list

    async def on_start(self) -> None:
        self.spawn(self._sweep(), "deadlines")

    def health_info(self) -> dict[str, Any]:
        return self.turns_info() | {"state_reads_saved": self._states.hits,
                                    "state_reads": self._states.misses}

    # -- state -----------------------------------------------------------------------------

    def _key(self, session: str) -> str:
        return f"s.{short_hash(session, 32)}"

    async def _load(self, session: str) -> SessionState:
        return load(await self._states.get(self._key(session)), session)

    async def _save(self, state: SessionState) -> None:
        # A compare-and-set on the revision read: if another writer got in between, the
        # event goes back to be applied again on a fresh read (the crash-before-save path).
        if not await self._states.put(self._key(state.session), await self._fit(state)):
            raise Retry(f"the state of {state.session} changed while an event was applied",
                        delay=0.1)

    def _lock(self, session: str) -> asyncio.Lock:
        return self._locks.setdefault(session, asyncio.Lock())

    async def handle(self, msg: PlannerInbox | DeadLetter) -> None:
        if isinstance(msg, DeadLetter):
            await self._on_dead_letter(msg)
            return
        # The planner reads four streams; one lock per session keeps its events in order.
        async with self._lock(msg.session):
            for attempt in range(3):
                state = await self._load(msg.session)
                if not await self._apply(state, msg):
                    return
                try:
                    await self._save(state)
                except Retry:
                    # Someone else wrote the state (replay's seed, an operator's tool): apply
                    # the event again on a fresh read NOW, still holding the session's lock.
                    # Handed back instead, an answer to what it published (same ids, so not
                    # sent twice) could arrive first and be dropped as stale, and the turn
                    # would wait out its step's deadline.
                    if attempt == 2:
                        raise
                    continue
                self._track(state)
                return

    async def _apply(self, state: SessionState, msg: PlannerInbox) -> bool:
        match msg:
            case TurnRequest():
                return await self._on_turn(state, msg)
            case Recalled():
                return await self._on_recalled(state, msg)
            case LlmResponse():
                return await self._on_llm(state, msg)
            case LlmProgress():
                return self._on_progress(state, msg)
            case ToolResult(deferred=True):
                return await self._on_turn(state, self._deferred_turn(state, msg))
            case ToolResult():
                return await self._on_tool(state, msg)
            case SessionReset():
                # Forgotten history no longer raises the session's label, and /reset drops the
                # turn in progress too (_on_reset).
                state.label = "public"
                # /reset starts a fresh session budget too (seed 000).
                await budget.renew(self.bus, state.session, force=True)
                return await self._on_reset(state, msg)
            case SessionRetry():
                return await self._on_retry(state, msg)
        return False

    # -- turns -----------------------------------------------------------------------------

    async def _on_turn(self, state: SessionState, req: TurnRequest) -> bool:
        why = forged(req, self.config.owner.principals)
        if why:
            await self.audit_decision("turn.refused", "refused", f"Refused a turn: {why}.", about=req.id,
                             principal=req.principal, session=req.session,
                             refs={"turn": req.id, "kind": req.principal_kind})
            raise Reject(f"inconsistent principal: {why}")
        await self._check_delegated(req)
        if state.knows(req.id):
            log.info("turn %s already accepted", req.id)
            return False
        if req.origin == "user":
            state.preview_interval, state.preview_sink = req.preview_interval, req.reply_to
        if state.active is not None:
            state.queue.append(req)
            return True
        await self._start(state, req)
        return True

    async def _start(self, state: SessionState, req: TurnRequest) -> None:
        if req.origin == "user" and await budget.renew(self.bus, req.session):
            log.info("session %s was paused by its budget; renewed by the user's message",
                     req.session)
        state.label = labels.join(state.label, req.label)
        # Taint is the turn's own (its text, then its tool results): the owner's next message
        # starts clean, so their chat gets no new approvals after a web page was read (seed
        # 003 taints per task too). A third party's text is never clean (contracts/taint.py).
        level = taint.join(req.taint, taint.floor(req.principal_kind))
        state.active = TurnState(request=req, label=state.label, taint=level,
                                 template=self._choose_template(state, req))
        self._arm(state.active, "recall")
        # No read up, no write down: only memories this turn may read and its chat may see.
        recall = Recall(id=f"{req.id}:recall", session=req.session, turn_id=req.id, query=req.text,
                        principal=req.principal, is_owner=req.is_owner, ceiling=state.label,
                        sink=f"{req.reply_to.channel}:{req.reply_to.chat}")
        await self.send(recall)

    def _deferred_turn(self, state: SessionState, result: ToolResult) -> TurnRequest:
        status = "succeeded" if result.ok else "failed"
        text = (
            f"[Event] The earlier {result.name} call {result.call_id} {status} after its turn "
            f"ended. Tell the user what happened.\n{result.output}"
        )
        sink = result.reply_to
        if sink is None:
            sink = Sink.parse(self.config.owner.sink)
        return TurnRequest(
            id=f"{result.id}:turn", session=result.session, principal="event", text=text,
            reply_to=sink, is_owner=True, origin="event", principal_kind="event",
            label=labels.join(labels.INTERNAL, result.label), taint=result.taint,
            # The chat's preview cadence, as its channel set it on the session's last user turn.
            preview_interval=state.preview_interval if sink == state.preview_sink else 0.0,
        )

    async def _on_recalled(self, state: SessionState, msg: Recalled) -> bool:
        turn = state.active
        if turn is None or turn.turn_id != msg.turn_id or turn.phase != "recall":
            return False
        if self._template(turn).plan_then_execute:
            await self._plan(state, turn, msg)
            return True
        system = context.system_prompt(self.settings, msg.hits, "", msg.owner_context,
                                       state.summary)
        if turn.request.delegation is not None:  # a sub-task: its role's instructions first
            system = f"{turn.request.delegation.prompt}\n\n{system}"
        turn.messages = [
            ChatMessage(role="system", content=system),
            *state.history,
            context.user_message(turn.request),
        ]
        turn.new_from = len(turn.messages) - 1
        self._arm(turn, "llm")
        tools = self._tools_for(turn, await self._offered_tools(turn))
        if not await _skills.preload(self, state, turn, tools):  # "/skill NAME ...": load first
            await self._ask_model(state, turn, tools)
        return True

    async def _ask_model(self, state: SessionState, turn: TurnState,
                         tools: list[ToolSpec]) -> None:
        purpose = _guard.purpose_of(turn.request)
        # The seed's 70/85/95 % warnings, as they stand at this step.
        note = await budget.budget_note(self.bus, self.config.budget, turn.request.session,
                                        purpose)
        req = LlmRequest(
            id=f"{turn.turn_id}:llm:{turn.step}", session=turn.request.session,
            turn_id=turn.turn_id, step=turn.step, messages=_guard.with_note(turn.messages, note),
            tools=tools, purpose=purpose, role=_skills.model_role(turn),
            budget_session=_delegate.payer(turn.request),
            # A plan is never shown: only answers are previewed.
            preview_to=turn.request.reply_to
            if turn.request.preview_interval > 0 and turn.stage != "plan" else None,
            preview_interval=turn.request.preview_interval, is_owner=turn.request.is_owner,
            label=turn.label, principal=turn.request.principal, template=turn.template,
        )
        try:
            await self.send(req)
        except PublishError as exc:  # too large, or the store refuses: the step has failed
            await self._step_failed(state, turn, "llm", str(exc))

    async def _on_llm(self, state: SessionState, msg: LlmResponse) -> bool:
        if msg.turn_id.endswith(":summary"):
            return await _compact.answered(self, state, msg)
        turn = state.active
        if turn is None or turn.turn_id != msg.turn_id or turn.phase != "llm":
            return False
        if turn.step != msg.step:
            return False
        await self._outage(msg)
        if msg.error:
            text = msg.error
            if msg.budget and turn.request.origin == "schedule" and (
                    _guard.purpose_of(turn.request) == "proactive"):
                text = "[NO_REPLY]"  # a proactive check has nothing to say about it
            await self._finish(state, text, record=False, failure=msg.error,
                               skipped=bool(msg.budget))
            return True
        halt = (_guard.check_repeats(turn, msg, self.config.budget)
                or _guard.check_tokens(turn, msg, self.config.budget))
        turn.tokens_used += msg.usage.input_tokens + msg.usage.output_tokens
        if halt is not None:
            log.warning("turn %s stopped: %s", turn.turn_id, halt.reason)
            await self._finish(state, halt.text, record=False, failure=halt.reason,
                               skipped=halt.skipped)
            return True
        if turn.stage:
            return await self._pte_step(state, turn, msg)
        turn.messages.append(
            ChatMessage(role="assistant", content=msg.content, tool_calls=msg.tool_calls)
        )
        if not msg.tool_calls:
            if not await self._claim_check(state, turn, msg.content):
                await self._finish(state, msg.content)
            return True
        await self._dispatch(state, turn, msg.tool_calls)
        await self._maybe_continue(state, turn)
        return True

    async def _on_tool(self, state: SessionState, msg: ToolResult) -> bool:
        turn = state.active
        if turn is None or turn.turn_id != msg.turn_id or turn.phase != "tools":
            return False
        if msg.step != turn.step or msg.call_id not in turn.calls or msg.call_id in turn.results:
            return False
        turn.results[msg.call_id] = msg
        await _skills.on_result(self, turn, msg)  # a loaded skill may pick the turn's model
        # The tool's data joins the conversation: the turn and the session carry its label.
        turn.label = labels.join(turn.label, msg.label)
        state.label = labels.join(state.label, msg.label)
        turn.taint = taint.join(turn.taint, msg.taint)
        turn.tool_failures += 0 if msg.ok else 1
        await self._maybe_continue(state, turn)
        return True

    async def _maybe_continue(self, state: SessionState, turn: TurnState) -> None:
        if any(c not in turn.results for c in turn.calls):
            return
        if turn.stage:  # plan-then-execute: the results go to the synthesizer
            await self._synthesize(state, turn)
            return
        for call_id in turn.calls:
            result = turn.results[call_id]
            turn.messages.append(
                ChatMessage(role="tool", content=result.output, tool_call_id=call_id,
                            name=result.name)
            )
        turn.step += 1
        self._arm(turn, "llm")
        turn.calls, turn.results = [], {}
        limit_hit = turn.tool_calls_used >= self._tool_limit(turn)
        tools = [] if limit_hit else self._tools_for(turn, await self._offered_tools(turn))
        await self._ask_model(state, turn, tools)

    async def _finish(self, state: SessionState, text: str, record: bool = True,
                      failure: str = "", skipped: bool = False) -> None:
        turn = state.active
        assert turn is not None
        req = turn.request
        if req.origin == "schedule":
            await self._task_outcome(turn, failure, skipped)
        if req.delegation is not None:  # a sub-task answers its workflow, not a chat
            await self._delegated_done(turn, text, failure)
        else:
            text = await self._cleared(turn, text)
            reply = Reply(
                id=f"{turn.turn_id}:reply", session=state.session, turn_id=turn.turn_id,
                sink=req.reply_to, text=text,
            )
            await self.send(reply)
        if record:
            dropped = state.append_history(turn.messages[turn.new_from :])
            dropped += await _compact.over_budget_share(self, state)
            if dropped:  # older history leaves the context: fold it into the rolling summary
                await _compact.fold(self, state, turn.turn_id, dropped)
        if failure and req.origin != "event":
            state.failed = req  # /retry runs it again
        state.remember_turn(turn.turn_id)
        state.active = None
        if state.queue:
            nxt = state.queue.pop(0)
            await self._start(state, nxt)

    async def _cleared(self, turn: TurnState, text: str) -> str:
        """No write down: an answer carrying data above what its sink is cleared for is
        withheld there (privacy.sink_rules), audited, and the chat told why."""
        sink = turn.request.reply_to
        where = f"{sink.channel}:{sink.chat}"
        if labels.cleared(turn.label, where, self.config.privacy.sink_rules,
                          self.config.owner.sink):
            return text
        why = (f"This answer was withheld: it carries data labelled {turn.label}, which may not "
               f"be sent to {where} (privacy.sink_rules in config.toml).")
        await self.audit_decision("sink.denied", "refused", why, about=turn.turn_id,
                         principal=turn.request.principal, session=turn.request.session,
                         refs={"label": turn.label, "sink": where, "turn": turn.turn_id})
        return why

    async def _task_outcome(self, turn: TurnState, failure: str, skipped: bool) -> None:
        """How a scheduled task's turn ended, for the supervisor (it disables failing tasks;
        a turn stopped by a spent budget is skipped, neither failed nor disabled for)."""
        if not failure and turn.tool_failures and turn.tool_failures >= turn.tool_calls_used:
            failure = f"all {turn.tool_failures} of its tool calls failed"
        task = turn.request.session.removeprefix("task:")
        outcome = TaskOutcome(id=f"{turn.turn_id}:task", task=task, turn_id=turn.turn_id,
                              ok=not failure and not skipped, reason=failure[:500],
                              skipped=skipped)
        await self.send(outcome)

    # -- shared facts ------------------------------------------------------------------------

    async def _tools(self) -> list[ToolSpec]:
        """Tool definitions the executor published. On a fresh home it may not have published
        yet: wait for them (bounded), or the first turns would be answered without tools."""
        deadline = time.monotonic() + (
            0 if self._tools_waited else self.config.planner.tools_wait_secs)
        while True:
            tools = await self.bus.kv_get_as(self.subjects.kv_state, "tools", list[ToolSpec])
            if tools is not None or time.monotonic() >= deadline:
                self._tools_waited = True  # later turns of this process do not wait
                return tools or []
            await asyncio.sleep(0.2)

