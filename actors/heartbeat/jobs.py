"""What the heartbeat fires: agent.toml tasks, HEARTBEAT.md cadences and proactive checks.

Built from the files on disk; a bad edit never replaces a working schedule: `load_jobs` returns
the errors (each naming the entry and key or line) and the heartbeat keeps the previous jobs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from contracts.config import ConfigError, Settings, load_agent
from contracts.schedule import When, parse_heartbeat_md, when_of

PROACTIVE_PROMPT = (
    "[Proactive check] It is {now}. Should you do anything proactive right now? Consider: "
    "checking in on something the user mentioned, health-checking a tool that has been flaky, "
    "preparing for an upcoming scheduled task ({upcoming}). If nothing is worth the user's "
    "attention, answer exactly [NO_REPLY]."
)


DIGEST_PROMPT = (
    "[Weekly digest] Bring USER.md, the owner's profile, up to date. Search your memory "
    "(memory_search) for what you know about the owner: facts, preferences, people, places, "
    "routines and corrections; merge it with the profile under \"# User (USER.md)\", organised "
    "by topic, short, dropping what is outdated and inventing nothing. Then call "
    "edit_agent_file with file USER.md, the whole new text and a one-line reason; the owner "
    "reviews the change. If nothing would change, answer exactly [NO_REPLY]."
)


@dataclass(frozen=True)
class Job:
    """One schedulable unit of work: a turn with a prompt, for an explicit sink."""

    name: str
    # task | cadence | proactive | review (the monthly tool review) | dream (memory's nightly
    # dreaming) | digest (the weekly USER.md digest, a turn); review makes no model call, dream
    # none here (the memory actor may ask the model to reword duplicates)
    kind: str
    when: When
    prompt: str
    sink: str  # "" = the owner's sink (explicit in config.toml)
    budget: int = 0  # tokens one run may use (budget_tokens, proactive_budget); 0: no own cap

    def describe(self) -> str:
        if self.when.cron:
            return f"cron {self.when.cron}"
        if self.when.every:
            return f"every {self.when.every:g}s"
        return "at " + time.strftime("%Y-%m-%d %H:%M", time.localtime(self.when.at))


def task_prompt(prompt: str, tool: str, arguments: dict[str, object]) -> str:
    if not tool:
        return prompt
    call = f"Run the tool {tool} with the arguments {json.dumps(arguments, sort_keys=True)}"
    return f"{call}, then {prompt}" if prompt else f"{call} and report its result briefly."


def jobs_from(settings: Settings, heartbeat_md: str) -> tuple[list[Job], list[str]]:
    """Every enabled job, and the HEARTBEAT.md entries that were skipped (with reasons)."""
    hb = settings.agent.heartbeat
    if not hb.enabled:
        return [], []
    jobs: list[Job] = []
    for i, t in enumerate(settings.agent.scheduled_tasks):
        if t.enabled:
            when = when_of(t.cron, t.every, t.at, t.jitter_secs, f"scheduled_tasks[{i}]")
            jobs.append(Job(t.name, "task", when, task_prompt(t.prompt, t.tool, t.arguments),
                            t.sink, t.budget_tokens))
    if hb.tool_review:  # checked when agent.toml was loaded
        jobs.append(Job("tool_review", "review", When(cron=hb.tool_review), "", ""))
    if hb.dreaming:  # the memory actor's nightly pass (actors/memory/_dream.py)
        jobs.append(Job("dreaming", "dream", When(cron=hb.dreaming), "", ""))
    if hb.user_digest:  # checked when agent.toml was loaded
        jobs.append(Job("user_digest", "digest", When(cron=hb.user_digest), DIGEST_PROMPT, ""))
    cadences, errors = parse_heartbeat_md(heartbeat_md)
    jobs += [Job(c.name, "cadence", c.when, c.prompt, c.sink) for c in cadences]
    if hb.proactive:
        jobs.append(Job("proactive", "proactive",
                        When(every=max(60.0, hb.proactive_interval_mins * 60)), PROACTIVE_PROMPT,
                        "", hb.proactive_budget))
    return jobs, errors


def load_jobs(settings: Settings) -> tuple[Settings | None, list[Job], list[str], list[str]]:
    """(settings with agent.toml as it is now, jobs, fatal errors, skipped-entry errors).

    A fatal error (agent.toml invalid) means: keep the previous schedule. config.toml is not
    re-read here: the other actors read it at start, so its changes take a restart."""
    home = settings.home
    try:
        agent = load_agent(home)
    except ConfigError as exc:
        return None, [], [str(exc)], []
    try:
        text = (home / "HEARTBEAT.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    fresh = Settings(home=home, config=settings.config, agent=agent)
    jobs, skipped = jobs_from(fresh, text)
    return fresh, jobs, [], skipped


def sources_stamp(home: Path) -> tuple[float, ...]:
    """Modification times of the files the schedule comes from (0 for a missing one)."""
    stamp = []
    for name in ("agent.toml", "HEARTBEAT.md"):
        try:
            stamp.append((home / name).stat().st_mtime)
        except OSError:
            stamp.append(0.0)
    return tuple(stamp)
