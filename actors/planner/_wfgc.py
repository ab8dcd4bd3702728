"""Finished delegation workflows are collected: the `wf.<hash>` record and the state of each
of its sub-sessions leave wm_sessions once the workflow has been finished for
`[delegation] keep_finished_hours` (default a week), so delegations do not pile up in the
bucket for ever.

Runs from the planner's deadline sweep, at its first round and then every COLLECT_EVERY
seconds. Idempotent: a round cut short (a crash) deletes what is left the next time; a
sub-session that has a turn or a queue (it never should once its node is final) keeps the
workflow for a later round. What the turns said stays in the streams' history.
"""

from __future__ import annotations

import logging
from typing import Any

from actors.planner import _dag
from contracts.records import Workflow

log = logging.getLogger(__name__)

COLLECT_EVERY = 3600.0


class WorkflowCollection:
    """Mixed into PlannerActor: removing workflows finished long enough ago."""

    _collected_at: float | None = None

    async def _maybe_collect(self: Any, now: float) -> None:
        if self._collected_at is not None and now - self._collected_at < COLLECT_EVERY:
            return
        self._collected_at = now
        try:
            if removed := await self._collect_workflows(now):
                log.info("removed %d finished delegation workflow(s) and their sub-sessions",
                         removed)
        except Exception:  # noqa: BLE001 - tidying must never stop the deadline sweep
            log.exception("collecting finished workflows failed; trying again in an hour")

    async def _collect_workflows(self: Any, now: float) -> int:
        """Delete the workflows finished at least `keep_finished_hours` ago; how many."""
        keep = self.config.delegation.keep_finished_hours * 3600.0
        bucket = self.subjects.kv_sessions
        removed = 0
        for key in await self.bus.kv_keys(bucket, "wf."):
            wf = await self.bus.kv_get_as(bucket, key, Workflow)
            if wf is None or not _dag.finished(wf) or now - _finished_at(wf) < keep:
                continue
            if await self._drop_sub_sessions(wf):
                await self.bus.kv_delete(bucket, key)
                removed += 1
        return removed

    async def _drop_sub_sessions(self: Any, wf: Workflow) -> bool:
        """Delete the state of each of the workflow's sub-sessions; False when one is busy."""
        for node in wf.nodes:
            session = f"{wf.id}~{node.id}"
            async with self._lock(session):
                state = await self._load(session)
                if state.active is not None or state.queue:
                    log.warning("workflow %s: sub-session %s is still busy; kept", wf.id, session)
                    return False
                key = self._key(session)
                await self.bus.kv_delete(self.subjects.kv_sessions, key)
                self._states.forget(key)
        return True


def _finished_at(wf: Workflow) -> float:
    """When the workflow ended; for a record written before it kept that, the latest its last
    node could have ended (its start plus its deadline)."""
    if wf.finished:
        return wf.finished
    return max([wf.created, *(n.started + n.deadline_secs for n in wf.nodes if n.started)])
