"""The heartbeat: scheduled tasks (cron, interval, one-shot), HEARTBEAT.md cadences, proactive
checks, health.json and IDENTITY.md; the schedule follows agent.toml and HEARTBEAT.md edits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import msgspec

from actors.base import Actor
from actors.heartbeat.identity import render_identity
from actors.heartbeat.jobs import Job, load_jobs, sources_stamp
from contracts import (
    Health,
    MemoryDream,
    Notice,
    Sink,
    TurnRequest,
    short_hash,
    subject_token,
)
from contracts.records import ExecutorFacts, JobRun, MemoryFacts, Schedule, ScheduledJob
from state.holds import task_status

log = logging.getLogger(__name__)


class HeartbeatActor(Actor):
    name = "heartbeat"

    async def on_start(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.next_fire: dict[str, float] = {}
        self.last: dict[str, JobRun] = {}
        self._stamp: tuple[float, ...] | None = None
        self._told: set[str] = set()  # problems already reported to the owner
        self._published = b""
        for key in await self.bus.kv_keys(self.subjects.kv_state, "sched."):
            record = await self.bus.kv_get_as(self.subjects.kv_state, key, JobRun)
            if record is not None and record.name:
                self.last[record.name] = record
        await self._reload()
        self.spawn(self._loop(), "tick")

    def health_info(self) -> dict[str, Any]:
        return {"tasks": {k: round(v) for k, v in getattr(self, "next_fire", {}).items()}}

    async def _loop(self) -> None:
        while True:
            interval = self.settings.agent.heartbeat.interval_secs
            self.alive("tick", every=interval)
            await self._reload()
            await self._fire_due()
            await self._publish_schedule()
            await self._write_health()
            await self._write_identity()
            # Wake for the next due job even when the tick interval is long.
            wait = interval
            if self.next_fire:
                wait = max(0.2, min(interval, min(self.next_fire.values()) - time.time()))
            await asyncio.sleep(wait)

    async def _reload(self) -> None:
        """Pick up agent.toml and HEARTBEAT.md edits without a restart; a bad edit is reported
        (key and line) and the previous schedule keeps running."""
        stamp = sources_stamp(self.home)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        settings, jobs, fatal, skipped = await asyncio.to_thread(load_jobs, self.settings)
        for problem in fatal + skipped:
            log.error("schedule: %s", problem)
            suffix = (" The previous schedule keeps running until it is fixed." if fatal
                      else "")
            await self._tell_owner(f"{problem}.{suffix}".replace("..", "."))
        if settings is None:
            return
        self.settings = settings
        now = time.time()
        fresh = {job.name: job for job in jobs}
        for name, job in fresh.items():
            if self.jobs.get(name) != job or name not in self.next_fire:
                run = self.last.get(name)
                last = (run.last if run else None) or 0.0
                nxt = job.when.next_after(now, last, salt=name)
                if nxt is None:
                    self.next_fire.pop(name, None)
                else:
                    self.next_fire[name] = nxt
        for gone in set(self.next_fire) - set(fresh):
            self.next_fire.pop(gone)
        if set(fresh) != set(self.jobs):
            log.info("schedule: %s", ", ".join(f"{j.name} ({j.describe()})"
                                                for j in fresh.values()) or "nothing")
        self.jobs = fresh

    async def _tell_owner(self, text: str) -> None:
        if text in self._told:
            return
        self._told.add(text)
        try:
            sink = Sink.parse(self.config.owner.sink)
            notice = Notice(id=f"heartbeat:notice:{short_hash(text, 16)}", sink=sink,
                            text=text, source="heartbeat")
            await self.send(notice)
        except Exception as exc:  # noqa: BLE001 - the log line above already says it
            log.warning("could not tell the owner: %s", exc)

    async def _fire_due(self) -> None:
        now = time.time()
        for name, due in sorted(self.next_fire.items(), key=lambda kv: kv[1]):
            job = self.jobs.get(name)
            if due > now or job is None:
                continue
            outcome = await self._fire(job, due)
            await self._record(name, due, outcome)
            nxt = job.when.next_after(now, due, salt=name)
            if nxt is None:
                self.next_fire.pop(name, None)
            else:
                self.next_fire[name] = nxt

    async def _fire(self, job: Job, due: float) -> str:
        if job.kind == "task" and await self._disabled(job.name):
            return "skipped (disabled by the supervisor)"
        if job.kind == "review":  # reads _meta and asks the owner: no model call, no budget
            from actors.heartbeat.review import propose

            return await propose(self, f"{int(due)}", time.time())
        if job.kind == "dream":  # merges and decays without a model: no budget to check
            await self.send(MemoryDream(id=f"dream:{int(due)}", job=job.name))
            return "sent to memory"
        from state import budget

        spent = await budget.day_spent(self.bus, self.config.budget)
        if spent is not None:
            # Not a failure: the task is not disabled for it, and fires again next time.
            log.info("job %s skipped: %s", job.name, spent.message)
            if job.kind == "digest":  # background learning: the owner hears it stopped, once
                await self._tell_owner(f"Today's token budget is spent, so the weekly USER.md "
                                       f"digest was skipped ({time.strftime('%Y-%m-%d')}); it "
                                       "runs again at its next date (heartbeat.user_digest).")
            return "skipped (budget)"
        return await self.fire(job, f"{int(due)}")

    async def fire(self, job: Job, suffix: str) -> str:
        """Publish the job's turn (its id makes a repeated fire a no-op)."""
        sink = Sink.parse(job.sink or self.config.owner.sink)
        text = job.prompt
        if job.kind == "proactive":
            upcoming = ", ".join(
                f"{n} at {time.strftime('%H:%M', time.localtime(t))}"
                for n, t in sorted(self.next_fire.items(), key=lambda kv: kv[1])[:5]
                if n != job.name) or "none"
            text = job.prompt.format(now=time.strftime("%Y-%m-%d %H:%M %Z"), upcoming=upcoming)
        turn = TurnRequest(
            id=f"task:{job.name}:{suffix}", session=f"task:{job.name}", principal="heartbeat",
            text=text, reply_to=sink, is_owner=True, origin="schedule", principal_kind="cron", budget_tokens=job.budget,
            purpose="proactive" if job.kind == "proactive" else "heartbeat",
        )
        await self.send(turn)
        log.info("fired %s %s", job.kind, job.name)
        return "fired"

    async def _record(self, name: str, due: float, outcome: str) -> None:
        before = self.last.get(name)
        record = JobRun(name=name, last=due, outcome=outcome,
                        fires=(before.fires if before else 0) + (outcome == "fired"))
        self.last[name] = record
        with contextlib.suppress(Exception):
            await self.bus.kv_put(self.subjects.kv_state, f"sched.{subject_token(name)}",
                                  record)

    async def _publish_schedule(self) -> None:
        """The schedule as `wintermute tasks` shows it (wm_state key `schedule`)."""
        rows = []
        for j in self.jobs.values():
            run = self.last.get(j.name)
            rows.append(msgspec.convert({
                "name": j.name, "kind": j.kind, "when": j.describe(), "prompt": j.prompt,
                "sink": j.sink or self.config.owner.sink, "next": self.next_fire.get(j.name),
                "last": run.last if run else None, "outcome": run.outcome if run else None,
                "fires": run.fires if run else None}, ScheduledJob))
        doc = msgspec.json.encode(Schedule(enabled=self.settings.agent.heartbeat.enabled,
                                           jobs=rows))
        if doc != self._published:
            with contextlib.suppress(Exception):
                await self.bus.kv_put(self.subjects.kv_state, "schedule", doc)
                self._published = doc

    async def _disabled(self, name: str) -> bool:
        """The supervisor disabled this task after repeated failures (until the owner enables it)."""
        record = await task_status(self.bus, name)
        if record.status == "disabled":
            log.info("scheduled task %s is disabled by the supervisor (%s); skipped", name,
                     record.reason)
            return True
        return False

    async def _health(self) -> dict[str, Health]:
        bucket = self.subjects.kv_health
        actors: dict[str, Health] = {}
        try:
            for key in await self.bus.kv_keys(bucket):
                value = await self.bus.kv_get_as(bucket, key, Health)
                if value is not None:
                    actors[key] = value
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
                name: {"pid": h.pid, "healthy": time.time() - h.ts < stale}
                for name, h in actors.items()
            },
            "budget_today": {
                "used": await budget.used(self.bus, budget.day_key(
                    tz=self.config.budget.timezone)),
                "limit": self.config.budget.max_tokens_per_day,
            },
        }
        path = self.home / "health.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2))
        tmp.replace(path)

    async def _write_identity(self) -> None:
        executor = await self.bus.kv_get_as(self.subjects.kv_state, "executor", ExecutorFacts)
        memory = await self.bus.kv_get_as(self.subjects.kv_state, "memory", MemoryFacts)
        text = render_identity(self.settings, executor, memory)
        path = self.home / "IDENTITY.md"
        try:
            if path.read_text() == text:
                return
        except OSError:
            pass
        path.write_text(text)
