"""A loaded skill picks the model for the rest of its turn.

After a `load_skill` of skill S succeeds, the turn's following model calls go with the llm
role S when `[models.skills] S` is configured, else with the role its SKILL.md names in
`model_role` when `[models.roles]` has it; a role that is not configured changes nothing (the
turn keeps its model: the default, or a delegated role's). The llm actor resolves the role
(`models.skills.<role>`, then `models.roles.<role>`, then the default) and its limits
(`models.limits.<role>`). The choice is saved in the turn's state, so a redelivered event
republishes the same request; the next turn starts with its usual role again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from actors.planner import _delegate
from contracts import ToolResult
from contracts.records import SkillsReport

if TYPE_CHECKING:
    from actors.planner.actor import PlannerActor
    from actors.planner.state import TurnState

log = logging.getLogger(__name__)


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
    report = await planner.bus.kv_get_as(planner.subjects.kv_state, "tools.skills",
                                         SkillsReport)
    row = next((r for r in report.skills if r.name == name), None) if report else None
    if row is None or not row.model_role:
        return ""
    if row.model_role not in models.roles:
        log.info("skill %s names model_role %s, which [models.roles] does not configure: the "
                 "turn keeps its model", name, row.model_role)
        return ""
    return row.model_role
