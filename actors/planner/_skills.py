"""A loaded skill picks the model for the rest of its turn.

After a `load_skill` of skill S succeeds, the turn's following model calls go with the llm
role S when `[models.skills] S` is configured, else with the role its SKILL.md names in
`model_role` when `[models.roles]` has it; a role that is not configured changes nothing (the
turn keeps its model: the default, or a delegated role's). The llm actor resolves the role
(`models.skills.<role>`, then `models.roles.<role>`, then the default) and its limits
(`models.limits.<role>`). The choice is saved in the turn's state, so a redelivered event
republishes the same request; the next turn starts with its usual role again.

The planner also loads a skill by itself when the user's message names it: "/skill NAME ..."
at its start (any name: an unknown one gets the executor's "Unknown skill" answer, which the
model passes on), or "use the NAME skill" anywhere for a skill the executor lists. The load is
an ordinary load_skill call through the executor (gate, counts, audit), made before the first
model call, so that call already sees the body and goes with the skill's model. Only where
load_skill is offered (a template or a delegated role's profile without it: no load), and not
in plan-then-execute turns (their planner sees the skill index and may load it), nor for
event and webhook turns, whose text is data rather than someone's request.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from actors.planner import _delegate
from contracts import ChatMessage, ToolCall, ToolResult, ToolSpec, short_hash
from contracts.records import SkillsReport

if TYPE_CHECKING:
    from actors.planner.actor import PlannerActor
    from actors.planner.state import SessionState, TurnState

log = logging.getLogger(__name__)

COMMAND = re.compile(r"^\s*/skill\s+([A-Za-z0-9][A-Za-z0-9_-]{0,47})(?=[\s:,]|$)")
# Their text is data (a tool's result, a webhook's body), not someone asking for a skill.
DATA_ORIGINS = ("event", "webhook")
USE = re.compile(r"\buse\s+the\s+([A-Za-z0-9][A-Za-z0-9_-]{0,47})\s+skill\b", re.I)


def model_role(turn: TurnState) -> str:
    """The llm role of this turn's next model call."""
    return turn.skill_role or _delegate.model_role(turn.request)


def loaded_skill(turn: TurnState, call_id: str) -> str:
    """The skill a load_skill call of this step named ("" if none)."""
    for message in reversed(turn.messages):
        for call in message.tool_calls or ():
            if call.id == call_id:
                name = call.arguments.get("name")
                return name.strip() if isinstance(name, str) else ""
    return ""


async def on_result(planner: PlannerActor, turn: TurnState, msg: ToolResult) -> None:
    """Switch the turn's model role when a skill that names one was loaded."""
    if msg.name != "load_skill" or not msg.ok:
        return
    name = loaded_skill(turn, msg.call_id)
    role = await role_of(planner, name) if name else ""
    if role and role != turn.skill_role:
        log.info("turn %s: skill %s loaded, model role %s", turn.turn_id, name, role)
        turn.skill_role = role


async def role_of(planner: PlannerActor, name: str) -> str:
    """The configured llm role for skill `name`, or "" when it has none."""
    models = planner.config.models
    if name in models.skills:
        return name
    report = await _report(planner)
    row = next((r for r in report.skills if r.name == name), None) if report else None
    if row is None or not row.model_role:
        return ""
    if row.model_role not in models.roles:
        log.info("skill %s names model_role %s, which [models.roles] does not configure: the "
                 "turn keeps its model", name, row.model_role)
        return ""
    return row.model_role


async def named_skill(planner: PlannerActor, text: str) -> str:
    """The skill the user's message asks for by name ("" if none)."""
    if m := COMMAND.match(text):
        return m.group(1).lower()
    wanted = [n.lower() for n in USE.findall(text)]
    if not wanted:
        return ""
    report = await _report(planner)
    listed = {r.name for r in report.skills if r.available} if report else set()
    return next((n for n in wanted if n in listed), "")


async def preload(planner: PlannerActor, state: SessionState, turn: TurnState,
                  tools: list[ToolSpec]) -> bool:
    """Load the skill the user named before the first model call; False if none was named."""
    if turn.request.origin in DATA_ORIGINS or not any(t.name == "load_skill" for t in tools):
        return False
    name = await named_skill(planner, turn.request.text)
    if not name:
        return False
    # The id is derived from the turn (a redelivery makes the same call) and uses only
    # letters, digits and _ (Anthropic's tool_use ids allow no more).
    call = ToolCall(id=f"skill_{short_hash(turn.turn_id, 20)}", name="load_skill",
                    arguments={"name": name})
    turn.messages.append(ChatMessage(role="assistant", content="", tool_calls=[call]))
    log.info("turn %s names the skill %s: loading it first", turn.turn_id, name)
    await planner._dispatch(state, turn, [call])
    await planner._maybe_continue(state, turn)
    return True


async def _report(planner: PlannerActor) -> SkillsReport | None:
    return await planner.bus.kv_get_as(planner.subjects.kv_state, "tools.skills", SkillsReport)
