"""The heartbeat: periodic tick, health.json, IDENTITY.md, and cron-scheduled tasks."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from actors.base import Actor
from actors.heartbeat.identity import render_identity
from contracts import Sink, TurnRequest
from state.holds import task_status

log = logging.getLogger(__name__)


class HeartbeatActor(Actor):
    name = "heartbeat"

    async def on_start(self) -> None:
        from croniter import croniter

        now = time.time()
        self.next_fire: dict[str, float] = {}
        for task in self.settings.agent.scheduled_tasks:
            if task.enabled:
                self.next_fire[task.name] = croniter(task.cron, now).get_next(float)
        self.spawn(self._loop(), "tick")

    def health_info(self) -> dict[str, Any]:
        return {"tasks": {k: round(v) for k, v in getattr(self, "next_fire", {}).items()}}

    async def _loop(self) -> None:
        interval = self.settings.agent.heartbeat.interval_secs
        while True:
            self.alive("tick", every=interval)
            await self._fire_due()
            await self._write_health()
            await self._write_identity()
            # Wake for the next due task even when the tick interval is long.
            wait = interval
            if self.next_fire:
                wait = max(0.2, min(interval, min(self.next_fire.values()) - time.time()))
            await asyncio.sleep(wait)

    async def _fire_due(self) -> None:
        from croniter import croniter

        now = time.time()
        for task in self.settings.agent.scheduled_tasks:
            due = self.next_fire.get(task.name)
            if due is None or due > now:
                continue
            if await self._disabled(task.name):
                self.next_fire[task.name] = croniter(task.cron, now).get_next(float)
                continue
            sink = Sink.parse(task.sink or self.config.owner.sink)
            turn = TurnRequest(
                id=f"task:{task.name}:{int(due)}", session=f"task:{task.name}",
                principal="heartbeat", text=task.prompt or f"Run the scheduled task {task.name}.",
                reply_to=sink, is_owner=True, origin="schedule",
            )
            await self.send(turn)
            log.info("fired scheduled task %s", task.name)
            self.next_fire[task.name] = croniter(task.cron, now).get_next(float)

    async def _disabled(self, name: str) -> bool:
        """The supervisor disabled this task after repeated failures (until the owner enables it)."""
        record = await task_status(self.bus, name)
        if record.get("status") == "disabled":
            log.info("scheduled task %s is disabled by the supervisor (%s); skipped", name,
                     record.get("reason", ""))
            return True
        return False

    async def _health(self) -> dict[str, Any]:
        bucket = self.subjects.kv_health
        actors: dict[str, Any] = {}
        try:
            for key in await self.bus.kv_keys(bucket):
                value = await self.bus.kv_get(bucket, key)
                if value:
                    actors[key] = json.loads(value)
        except Exception as exc:  # noqa: BLE001 - NATS restarting: next tick
            log.debug("health read: %s", exc)
        return actors

    async def _write_health(self) -> None:
        from state import budget

        actors = await self._health()
        stale = self.config.supervisor.stale_after_secs
        doc = {
            "status": "running",
            "last_heartbeat": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "actors": {
                name: {"pid": h.get("pid"), "healthy": time.time() - h.get("ts", 0) < stale}
                for name, h in actors.items()
            },
            "budget_today": {
                "used": await budget.used(self.bus, budget.day_key()),
                "limit": self.config.budget.max_tokens_per_day,
            },
        }
        path = self.home / "health.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(path)

    async def _write_identity(self) -> None:
        executor = await self.bus.kv_get(self.subjects.kv_state, "executor")
        memory = await self.bus.kv_get(self.subjects.kv_state, "memory")
        text = render_identity(
            self.settings,
            json.loads(executor) if executor else {},
            json.loads(memory) if memory else {},
        )
        path = self.home / "IDENTITY.md"
        try:
            if path.read_text() == text:
                return
        except OSError:
            pass
        path.write_text(text)
