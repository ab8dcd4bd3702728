"""Task templates and capability tokens on the planner's side (seed 003 §4.5, §4.6).

The planner picks a turn's template from its principal and kind (set at the edge, checked by
principals.forged), offers the model only the tools the template allows, and gives every tool
call a signed capability token (kit/capability.py) bounded by the template. A call outside the
template gets no token: it is answered here with a refusal the model hears, and audited. The
executor checks every token again against the template it derives itself.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import msgspec

from contracts import Sink, ToolCall, ToolRequest, ToolResult, ToolSpec, templates
from contracts.capability import Capability
from kit import capability

if TYPE_CHECKING:
    from actors.planner.state import SessionState, TurnState

log = logging.getLogger(__name__)

#: How long a token is good for: a call is delivered within seconds; one held for the owner's
#: approval is checked against the approval's own single use, not this.
TOKEN_TTL_SECS = 600.0


def template_of(turn: TurnState, configured: dict[str, templates.Template]) -> templates.Template:
    return templates.get(turn.template, configured)


class TemplateOps:
    """Mixed into PlannerActor: template choice, offered tools, token issue."""

    _cap_key: bytes | None = None

    def _choose_template(self: Any, state: SessionState, req: Any) -> str:
        """The template of a turn; an event the system raised continues its session's one."""
        if req.principal_kind == "event":
            return state.template or "owner_chat"
        name = templates.choose(req.principal, req.principal_kind, req.is_owner,
                                self.config.privacy.templates)
        state.template = name
        return name

    def _template(self: Any, turn: TurnState) -> templates.Template:
        return template_of(turn, self.config.privacy.templates)

    async def _offered_tools(self: Any, turn: TurnState) -> list[ToolSpec]:
        """The published tools this turn's template allows."""
        template = self._template(turn)
        return [t for t in await self._tools() if template.allows_tool(t.name)]

    def _tool_limit(self: Any, turn: TurnState) -> int:
        limit = int(self.config.budget.max_tool_calls_per_turn)
        own = self._template(turn).max_tool_calls
        return min(limit, own) if own else limit

    def _limit_source(self: Any, turn: TurnState) -> str:
        own = self._template(turn).max_tool_calls
        if own and own < self.config.budget.max_tool_calls_per_turn:
            return f"task template {turn.template}"
        return "budget.max_tool_calls_per_turn"

    async def _dispatch(self: Any, state: SessionState, turn: TurnState,
                        calls: list[ToolCall]) -> None:
        """Send each call with its token, or answer it here when it is over the turn's limit
        or outside its template."""
        limit = self._tool_limit(turn)
        template = self._template(turn)
        self._arm(turn, "tools")
        turn.calls = [c.id for c in calls]
        turn.results = {}
        for i, call in enumerate(calls):
            rid = f"{turn.turn_id}:tool:{turn.step}:{i}"
            if turn.tool_calls_used >= limit:
                turn.results[call.id] = self._not_run(
                    state, turn, call, f"{rid}:limit",
                    f"Not run: this turn reached its limit of {limit} tool calls "
                    f"({self._limit_source(turn)}). Answer with what you have.")
                continue
            if not template.allows_tool(call.name):
                why = (f"Refused: {call.name} is outside what this conversation may use "
                       f"(task template {turn.template or 'none'}).")
                turn.results[call.id] = self._not_run(state, turn, call, f"{rid}:template", why)
                await self.audit_decision(
                    "capability.refused", "refused", why, about=rid,
                    principal=turn.request.principal, session=state.session,
                    refs={"tool": call.name, "template": turn.template, "request": rid})
                continue
            turn.tool_calls_used += 1
            if local := await self._local_call(state, turn, call, i):  # delegate, profiles
                turn.results[call.id] = local
                continue
            req = ToolRequest(
                id=rid, session=state.session, turn_id=turn.turn_id, step=turn.step,
                call_id=call.id, name=call.name, arguments=call.arguments,
                is_owner=turn.request.is_owner, reply_to=turn.request.reply_to,
                principal=turn.request.principal, label=turn.label, taint=turn.taint,
                extracted=turn.request.extracted,
            )
            req = msgspec.structs.replace(req, capability=self._issue(turn, req))
            await self.audit_decision(
                "capability.issued", "allowed",
                f"{call.name} may run once under template {turn.template}.", about=rid,
                principal=turn.request.principal, session=state.session,
                refs={"tool": call.name, "template": turn.template, "request": rid})
            await self.send(req)

    def _issue(self: Any, turn: TurnState, req: ToolRequest) -> Capability:
        if self._cap_key is None:
            self._cap_key = capability.load_key(self.home)
        template = self._template(turn)
        now = time.time()
        cap = Capability(
            request=req.id, session=req.session, turn_id=req.turn_id, template=turn.template,
            principal=req.principal, principal_kind=turn.request.principal_kind,
            tool=req.name, args=capability.digest(req.arguments),
            reply_to=_sink(req.reply_to), sinks=list(template.sinks),
            ceiling=template.data_ceiling, issued_at=now, expires_at=now + TOKEN_TTL_SECS,
        )
        return capability.sign(self._cap_key, cap)

    def _not_run(self: Any, state: SessionState, turn: TurnState, call: ToolCall, rid: str,
                 why: str) -> ToolResult:
        return ToolResult(id=rid, session=state.session, turn_id=turn.turn_id, step=turn.step,
                          call_id=call.id, name=call.name, ok=False, output=why)


def _sink(sink: Sink | None) -> str:
    return "" if sink is None else str(sink)
