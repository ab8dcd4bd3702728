"""The executor's side of skills: ship the examples, read skills/, publish the index and the
use counts, and hand the tools what they need."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

import msgspec

from actors.executor.skills.runner import SkillRunner
from actors.executor.skills.tools import LoadSkill
from contracts.records import SkillRow, SkillsReport
from kit import skillmd
from kit.safegit import GitError, ensure_repo
from kit.skillmd import Skill, ship_examples

if TYPE_CHECKING:
    from actors.executor.actor import ExecutorActor

log = logging.getLogger(__name__)

REPORT_KEY = "tools.skills"
WATCH_SECS = 2.0


class SkillsService:
    """skills/ as the executor sees it: parsed skills, problems, use counts."""

    def __init__(self, actor: ExecutorActor) -> None:
        self.actor = actor
        self.root = actor.home / "skills"
        self.runner = SkillRunner(actor.home, actor.config.sandbox)
        self.skills: dict[str, Skill] = {}
        self.problems: dict[str, str] = {}
        self.problems_extra: dict[str, str] = {}  # set-up failures, reported with the folders
        self._stats: dict[str, SkillRow] = {}  # the counters of the last published report
        self._sig: tuple[tuple[str, int, int], ...] = ()
        self._published = b""
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Examples, the git repository (data/skills.git), saved counters, then skills/."""
        try:
            copied = await asyncio.to_thread(ship_examples, self.root)
            await asyncio.to_thread(ensure_repo, self.root)
            if copied:
                await self.commit(["."], f"add shipped skills: {', '.join(copied)}")
        except (OSError, GitError) as exc:  # skills/ unusable: every other tool still works
            log.error("setting up skills/ failed: %s", exc)
            self.problems_extra = {".": f"could not be set up ({exc}); skills are read as "
                                        "they are and write_skill may fail."}
        old = await self.actor.bus.kv_get_as(self.actor.subjects.kv_state, REPORT_KEY,
                                             SkillsReport)
        self._stats = {row.name: row for row in old.skills} if old else {}
        await self.refresh(force=True)
        self.actor.spawn(self._watch(), "skills")

    async def _watch(self) -> None:
        # Probe bubblewrap here, not in start(): a slow probe must not hold up the executor.
        await self.runner.ready()
        self._sig = ()  # republish with how scripts run here
        while True:
            self.actor.alive("skills", every=WATCH_SECS)
            await self.refresh()
            await asyncio.sleep(WATCH_SECS)

    def _signature(self) -> tuple[tuple[str, int, int], ...]:
        """mtime and size of every file under skills/ (a few small folders)."""
        sig = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                sig.append((path, st.st_mtime_ns, st.st_size))
        return tuple(sorted(sig))

    async def refresh(self, force: bool = False) -> None:
        """Re-read skills/ when a file changed; a bad SKILL.md is a problem, never a crash."""
        try:
            files = await asyncio.to_thread(self._signature)
            # Tools appearing later (an MCP server connecting) can make a skill available.
            tools = tuple((name, 0, 0) for name in sorted(
                set(self.actor.registry.names()) | set(self.actor.scripts.names())))
            sig = files + tools
            if sig == self._sig and not force:
                return
            self._sig = sig
            skills, problems = await asyncio.to_thread(skillmd.scan, self.root)
            self.skills = {s.name: s for s in skills}
            self.problems = {**self.problems_extra, **problems}
            for folder, why in problems.items():
                log.warning("skill %s cannot be used: %s", folder, why)
            await self.publish()
        except Exception:  # noqa: BLE001 - a bad folder or a KV hiccup must not stop tool calls
            log.exception("reading skills/ failed")

    def missing_tools(self, skill: Skill) -> list[str]:
        known = set(self.actor.registry.names()) | set(self.actor.scripts.names())
        return [t for t in skill.tools if t not in known]

    def report(self) -> SkillsReport:
        rows = []
        for skill in self.skills.values():
            old = self._stats.get(skill.name)
            missing = self.missing_tools(skill)
            rows.append(SkillRow(
                name=skill.name, description=skill.description, when_to_use=skill.when_to_use,
                tools=skill.tools, model_role=skill.model_role, scripts=skill.scripts,
                limits=msgspec.to_builtins(skill.limits), available=not missing,
                problem=f"needs {', '.join(missing)}, which is not available" if missing else "",
                loads=old.loads if old else 0, runs=old.runs if old else 0,
                failures=old.failures if old else 0, last_used=old.last_used if old else 0.0))
        return SkillsReport(skills=rows, problems=self.problems, sandbox=self.runner.describe())

    async def publish(self) -> None:
        """The index for the model (load_skill's description) and the report for people."""
        async with self._lock:
            report = self.report()
            load = self.actor.registry.get("load_skill")
            if isinstance(load, LoadSkill):
                load.describe(report.skills)
            data = msgspec.json.encode(report)
            if data != self._published:
                await self.actor.bus.kv_put(self.actor.subjects.kv_state, REPORT_KEY, data)
                self._published = data
        await self.actor.publish_tools()

    async def used(self, name: str, *, run: bool = False, ok: bool = True) -> None:
        """Count a load or a run of skill `name` (kept in the report across restarts)."""
        old = self._stats.get(name) or SkillRow(name=name, description="")
        self._stats[name] = msgspec.structs.replace(
            old, loads=old.loads + (not run), runs=old.runs + run,
            failures=old.failures + (run and not ok), last_used=time.time())
        try:
            await self.publish()
        except Exception:  # noqa: BLE001 - the call's result matters more than its count
            log.exception("publishing skill counts failed")

    async def commit(self, paths: list[str], message: str) -> str | None:
        """Commit paths in skills/ (data/skills.git); the short hash, None when unchanged."""
        from actors.executor.dynamic.git import commit_paths, git_lock

        async with git_lock():
            try:
                return await commit_paths(self.root, paths, message)
            except GitError as exc:
                log.warning("committing skills/ failed: %s", exc)
                raise

    def facts(self) -> dict[str, object]:
        """For ExecutorFacts (status): the usable skills and the folders that are not."""
        return {"skills": sorted(self.skills), "skill_problems": dict(self.problems)}

    def unknown(self, name: str) -> str:
        """The sentence for a skill that does not exist or cannot be read."""
        if name in self.problems:
            return (f"The skill {name} cannot be used: {self.problems[name]} Fix its SKILL.md "
                    "(or ask the owner to).")
        return f"Unknown skill {name!r}. Skills: {', '.join(sorted(self.skills)) or 'none'}."
