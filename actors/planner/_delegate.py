"""Delegation: the `delegate` tool, sub-sessions on the bus, and their way back to the parent.

A `delegate` call never reaches the executor. The planner checks the call (`_dag.parse`),
stores the workflow in wm_sessions `wf.<hash>` (compare-and-set) and answers the call at once,
so the parent's turn goes on. Each ready node runs as an ordinary session `<workflow>~<node>`
whose turn `<session>:task` the planner publishes on `in.delegate.*`: its own history, model
role, tool profile, budget slice (`budget_tokens`) and deadline; its model calls are charged
to the parent's session (`LlmRequest.budget_session`). When a sub-turn ends, the workflow is
updated by compare-and-set, the next nodes are published, and once every node is final one
deferred `tool.result` (`<workflow>:delegated`) starts a new turn in the parent session, as
an approval's result does. Every id derives from the parent's tool call, so redoing a step
after a kill -9 republishes identical messages, which JetStream and the sessions' turn lists
drop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from actors.planner import _dag, _guard
from actors.planner.state import SessionState, TurnState
from bus import Reject
from contracts import Delegation, Msg, ToolCall, ToolResult, ToolSpec, TurnRequest, short_hash
from contracts.records import Workflow
from contracts.templates import Template

if TYPE_CHECKING:
    from bus import Bus
    from bus.subjects import Subjects
    from contracts.config import Config

log = logging.getLogger(__name__)

TOOL = "delegate"


def spec(roles: list[str]) -> ToolSpec:
    """The `delegate` tool as the model sees it."""
    task = {
        "id": {"type": "string", "description": "short id, for depends_on"},
        "role": {"type": "string", "enum": roles},
        "task": {"type": "string", "description": "what the sub-agent should do"},
        "context": {"type": "string", "description": "facts it needs (it sees no history)"},
        "depends_on": {"type": "array", "items": {"type": "string"},
                       "description": "ids of tasks whose results it needs"},
        "budget_tokens": {"type": "integer"}, "deadline_secs": {"type": "number"},
    }
    return ToolSpec(
        name=TOOL,
        description=("Hand work to sub-agents that run in the background: one task (role, "
                     "task, context) or several `tasks` with depends_on (a task starts when "
                     "the ones it depends on are done and gets their results). The results "
                     "come back later as a new event; tell the user the work is under way."),
        parameters={"type": "object", "properties": {
            **{k: v for k, v in task.items() if k not in ("id", "depends_on")},
            "tasks": {"type": "array", "items": {"type": "object", "properties": task,
                                                 "required": ["role", "task"]}}}},
    )


def model_role(req: TurnRequest) -> str:
    return req.delegation.model_role if req.delegation else "default"


def payer(req: TurnRequest) -> str:
    """The session whose budget a turn's model calls are charged to."""
    return req.delegation.parent_session if req.delegation else ""


def _key(workflow_id: str) -> str:
    return f"wf.{short_hash(workflow_id, 32)}"


class Delegating:
    """Mixed into PlannerActor, which provides the turn steps."""

    config: Config
    bus: Bus
    subjects: Subjects
    clock: Callable[[], float] = time.time

    async def send(self, msg: Msg) -> bool:
        raise NotImplementedError

    def _template(self, turn: TurnState) -> Template:
        raise NotImplementedError

    # -- the parent's side --------------------------------------------------------------------

    def _tools_for(self, turn: TurnState, tools: list[ToolSpec]) -> list[ToolSpec]:
        """A sub-task gets its role's tool profile; other turns get `delegate` as well."""
        d = turn.request.delegation
        if d is not None:
            return [t for t in tools if not d.tools or t.name in d.tools]
        # (`replay --rerun` seeds the tools a recorded request offered, `delegate` among them)
        if (self.config.delegation.enabled and all(t.name != TOOL for t in tools)
                and self._template(turn).allows_tool(TOOL)):
            return [*tools, spec(sorted(self.config.delegation.roles))]
        return tools

    async def _local_call(self, state: SessionState, turn: TurnState, call: ToolCall,
                          i: int) -> ToolResult | None:
        """The result of a call the planner answers itself (`delegate`, or a tool outside a
        sub-task's profile); None for a call that goes to the executor."""
        d = turn.request.delegation
        rid = f"{turn.turn_id}:tool:{turn.step}:{i}"
        if d is not None and (call.name == TOOL or (d.tools and call.name not in d.tools)):
            why = (f"Not run: {call.name} is not among the tools of the {d.role} role "
                   f"({', '.join(d.tools) or 'none'}); a sub-task cannot delegate further.")
        elif call.name == TOOL and self.config.delegation.enabled:
            why = await self._start_workflow(state, turn, call, rid)
            if not why:
                return ToolResult(
                    id=f"{rid}:result", session=state.session, turn_id=turn.turn_id,
                    step=turn.step, call_id=call.id, name=TOOL, ok=True,
                    output=("Delegated. The sub-tasks run in the background and their results "
                            "will follow as a new event; tell the user the work is under way."))
        else:
            return None
        return ToolResult(id=f"{rid}:result", session=state.session, turn_id=turn.turn_id,
                          step=turn.step, call_id=call.id, name=call.name, ok=False, output=why)

    async def _start_workflow(self, state: SessionState, turn: TurnState, call: ToolCall,
                              wf_id: str) -> str:
        """Store the workflow (once) and publish its first nodes; a sentence if refused."""
        try:
            nodes = _dag.parse(call.arguments, self.config.delegation)
        except _dag.DagError as exc:
            log.info("delegate call %s refused: %s", wf_id, exc)
            return f"Not delegated: {exc}"
        req = turn.request
        fresh = Workflow(
            id=wf_id, parent_session=state.session, parent_turn=turn.turn_id, step=turn.step,
            call_id=call.id, reply_to=req.reply_to, principal=req.principal,
            principal_kind=req.principal_kind, is_owner=req.is_owner, label=turn.label,
            purpose=_guard.purpose_of(req), created=self.clock(), nodes=nodes)
        wf = await self.bus.kv_update(
            self.subjects.kv_sessions, _key(wf_id),
            # A redone step finds its workflow stored and keeps it as it is.
            lambda cur: None if cur is not None else _dag.advance(fresh, fresh.created),
            kind=Workflow)
        assert wf is not None
        await self._publish_nodes(wf)
        return ""

    async def _publish_nodes(self, wf: Workflow) -> None:
        """Publish the turn of every running node (identical ids when repeated), or the
        workflow's result once every node is final."""
        if _dag.finished(wf):
            await self._report(wf)
            return
        for node in wf.nodes:
            if node.status != "running":
                continue
            role = self.config.delegation.roles.get(node.role)
            session = f"{wf.id}~{node.id}"
            hop = f":{node.hops}" if node.hops else ""
            await self.send(TurnRequest(
                id=f"{session}:task{hop}", session=session, principal=wf.principal,
                text=_dag.task_text(wf, node), reply_to=wf.reply_to, is_owner=wf.is_owner,
                origin="delegate", principal_kind=wf.principal_kind, label=wf.label,
                budget_tokens=node.budget_tokens, purpose=wf.purpose,
                delegation=Delegation(
                    workflow=wf.id, node=node.id, role=node.role,
                    parent_session=wf.parent_session, parent_turn=wf.parent_turn,
                    prompt=role.prompt if role else "", tools=role.tools if role else [],
                    model_role=role.model_role if role else "default",
                    deadline=node.started + node.deadline_secs),
            ))

    async def _report(self, wf: Workflow) -> None:
        ok, text = _dag.report(wf)
        await self.send(ToolResult(
            id=f"{wf.id}:delegated", session=wf.parent_session, turn_id=wf.parent_turn,
            step=wf.step, call_id=wf.call_id, name=TOOL, ok=ok, output=text, deferred=True,
            reply_to=wf.reply_to, label=wf.label))

    # -- the sub-task's side ------------------------------------------------------------------

    async def _check_delegated(self, req: TurnRequest) -> None:
        """A delegated turn must belong to a stored workflow: only the planner starts them."""
        d = req.delegation
        if d is None:
            return
        wf = await self.bus.kv_get_as(self.subjects.kv_sessions, _key(d.workflow), Workflow)
        if wf is None or req.session != f"{wf.id}~{d.node}" or not any(
                n.id == d.node for n in wf.nodes):
            raise Reject(f"a delegated turn for {d.workflow}/{d.node} has no such workflow")

    async def _delegated_done(self, turn: TurnState, text: str, failure: str) -> None:
        """A sub-task's turn ended: record it in its workflow and move the workflow on."""
        req = turn.request
        d = req.delegation
        assert d is not None
        timed_out = bool(failure) and d.deadline > 0 and self.clock() >= d.deadline
        status = "timed_out" if timed_out else "failed" if failure else "done"
        result = text if status == "done" else _partial(turn)
        hops = int(req.id.rsplit(":task:", 1)[1]) if ":task:" in req.id else 0
        now = self.clock()
        cont = self.config.delegation.continuations
        wf = await self.bus.kv_update(
            self.subjects.kv_sessions, _key(d.workflow),
            lambda cur: None if cur is None else _dag.settle(
                cur, d.node, hops, status, result, failure, now, cont, turn.label),
            kind=Workflow)
        if wf is None:
            log.warning("sub-task %s ended, but its workflow %s is gone", req.id, d.workflow)
            return
        await self._publish_nodes(wf)


def _partial(turn: TurnState) -> str:
    """What a sub-task had found when it stopped: its tool results and its own words."""
    found = [m.content.strip() for m in turn.messages[turn.new_from + 1:]
             if m.role in ("tool", "assistant") and m.content.strip()]
    return "\n".join(found)[-_dag.RESULT_CHARS:]
