"""Skills: folders with a SKILL.md in WINTERMUTE_HOME/skills, offered by name and one line,
loaded on demand, their scripts run in a sandbox under the skill's limits (README, Skills)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.executor.skills.service import SkillsService
from actors.executor.skills.tools import skill_tools

if TYPE_CHECKING:
    from actors.executor.actor import ExecutorActor

__all__ = ["SkillsService", "attach_skills"]


async def attach_skills(actor: ExecutorActor) -> SkillsService:
    """Register the skill tools with the executor and start reading skills/."""
    service = SkillsService(actor)
    for tool in skill_tools(service):
        actor.registry.add(tool)
    await service.start()
    return service
