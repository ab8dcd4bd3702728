"""The eight actors. Each runs as its own process: `wintermute actor NAME`."""

from __future__ import annotations

from contracts import routes

#: name -> "module:Class", imported only by the process that runs that actor.
ACTORS: dict[str, str] = {
    "memory": "actors.memory.actor:MemoryActor",
    "llm": "actors.llm.actor:LlmActor",
    "executor": "actors.executor.actor:ExecutorActor",
    "approval": "actors.approval.actor:ApprovalActor",
    "planner": "actors.planner.actor:PlannerActor",
    "observer": "actors.observer.actor:ObserverActor",
    "heartbeat": "actors.heartbeat.actor:HeartbeatActor",
    "channel": "actors.channel.actor:ChannelActor",
}

#: Stop order: intake first, so nothing new arrives while the rest finish (declared with the
#: actor names in contracts/routes.py, which the supervisor reads without importing actors).
STOP_ORDER = list(routes.STOP_ORDER)

if tuple(ACTORS) != routes.ACTORS:  # one list of actors: the table's, in start order
    raise RuntimeError("actors.ACTORS and contracts.routes.ACTORS disagree; keep them in step")
