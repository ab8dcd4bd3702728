"""The heartbeat: task kinds, HEARTBEAT.md cadences, live reload, budgets, `wintermute tasks`."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from contracts.config import ConfigError, Settings, load_settings
from contracts.schedule import ScheduleError, cadence_when, parse_every, parse_heartbeat_md
from state import budget
from supervisor.cli.tasks import gather_tasks, render_tasks, run_task
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]


# -- parsing ----------------------------------------------------------------------------------


def test_intervals_and_cadences() -> None:
    assert parse_every("90s") == 90 and parse_every("15m") == 900 and parse_every("2h") == 7200
    with pytest.raises(ScheduleError):
        parse_every("soon")
    daily = cadence_when("daily", "Project status")
    assert daily == cadence_when("Daily", "Project status")  # stable across restarts
    minute, hour = daily.cron.split()[:2]
    assert 0 <= int(minute) < 60 and 6 <= int(hour) <= 22
    assert cadence_when("every 30m", "x").every == 1800


def test_heartbeat_md_entries_and_errors_naming_the_line() -> None:
    text = ("# HEARTBEAT.md\n\n## Email triage\n- Cadence: hourly\n- Prompt: Check my mail\n"
            "and say if anything is urgent\n\n## Broken\n- Prompt: no cadence here\n\n"
            "## Odd\nCadence: fortnightly-ish\nPrompt: x\n")
    entries, errors = parse_heartbeat_md(text)
    assert [e.name for e in entries] == ["heartbeat-email-triage"]
    assert entries[0].prompt == "Check my mail\nand say if anything is urgent"
    assert len(errors) == 2
    assert "line 8 ('## Broken')" in errors[0] and "missing Cadence" in errors[0]
    assert "line 11 ('## Odd')" in errors[1] and "fortnightly-ish" in errors[1]


@pytest.mark.parametrize(("task", "message"), [
    ("name='a'\nevery='soon'\nprompt='x'\n", "'scheduled_tasks[0].every' (a)"),
    ("name='a'\nat='tomorrow'\nprompt='x'\n", "'scheduled_tasks[0].at' (a)"),
    ("name='a'\ncron='0 8 * * *'\nevery='1h'\nprompt='x'\n", "exactly one of cron, every or at"),
    ("name='a'\nevery='1h'\n", "needs a prompt or a tool"),
])
def test_bad_tasks_name_the_entry(tmp_path: Path, task: str, message: str) -> None:
    (tmp_path / "agent.toml").write_text("[[scheduled_tasks]]\n" + task)
    with pytest.raises(ConfigError, match="agent.toml") as err:
        load_settings(tmp_path, {})
    assert message in str(err.value)


# -- the actor ----------------------------------------------------------------------------------


def agent_toml(home: Path, body: str, interval: float = 0.5) -> None:
    (home / "agent.toml").write_text(f"[heartbeat]\ninterval_secs = {interval}\n{body}")


async def schedule(bus: Bus) -> dict[str, Any]:
    raw = await bus.kv_get(bus.subjects.kv_state, "schedule")
    return json.loads(raw) if raw else {}


async def wait_for(check: Any, timeout: float = 30) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            value = await check()
            if value:
                return value
            await asyncio.sleep(0.1)


@pytest.fixture
def settings(fake: FakeLLM, settings_for: SettingsFor) -> Settings:
    return settings_for(WM__MODELS__DEFAULT="openai/test-model")


async def test_interval_and_one_shot_tasks_fire_and_edits_apply_live(
    settings: Settings, settings_for: SettingsFor, bus: Bus,
) -> None:
    home = settings.home
    soon = (dt.datetime.now() + dt.timedelta(seconds=1)).isoformat(timespec="seconds")
    agent_toml(home, "[[scheduled_tasks]]\nname='often'\nevery='1s'\nprompt='often ping'\n"
                     "sink='terminal:reports'\n"
                     f"[[scheduled_tasks]]\nname='once'\nat='{soon}'\nprompt='once ping'\n"
                     "sink='terminal:reports'\n")
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with chat(settings, "reports") as reports, chat(settings) as owner, \
            actors(settings, *ALL, "heartbeat") as running:
        got: list[str] = []
        while len([t for t in got if "often ping" in t]) < 2 or not any("once" in t for t in got):
            got.append((await reports.next(("reply",), timeout=30)).text)
        # A HEARTBEAT.md written while it runs is picked up, no restart.
        (home / "HEARTBEAT.md").write_text(
            "## Quick look\n- Cadence: every 1s\n- Prompt: cadence ping\n- Sink: terminal:reports\n")
        while not any("cadence ping" in t for t in got):
            got.append((await reports.next(("reply",), timeout=30)).text)
        # A broken agent.toml edit: the owner is told (naming the key); the schedule goes on.
        agent_toml(home, "[[scheduled_tasks]]\nname='often'\nevery='whenever'\nprompt='x'\n")
        notice = await owner.next(("notice",), timeout=30)
        assert "'scheduled_tasks[0].every'" in notice.text
        assert "previous schedule keeps running" in notice.text
        before = len([t for t in got if "often ping" in t])
        while len([t for t in got if "often ping" in t]) < before + 1:
            got.append((await reports.next(("reply",), timeout=30)).text)
        # The one-shot task fired once, and not again after a heartbeat restart.
        await running.stop("heartbeat")
        await running.start("heartbeat")
        doc = await wait_for(lambda: schedule(bus))
        once = next(j for j in doc["jobs"] if j["name"] == "once")
        assert once["next"] is None and once["fires"] == 1
    assert len([t for t in got if "once ping" in t]) == 1


async def test_disabled_heartbeat_fires_nothing_and_budget_skips_are_not_failures(
    settings: Settings, settings_for: SettingsFor, bus: Bus,
) -> None:
    home = settings.home
    agent_toml(home, "[heartbeat]\n", interval=0.3)
    (home / "agent.toml").write_text(
        "[heartbeat]\nenabled = false\ninterval_secs = 0.3\n"
        "[[scheduled_tasks]]\nname='quiet'\nevery='1s'\nprompt='should not run'\n")
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__BUDGET__MAX_TOKENS_PER_DAY="1000")
    async with actors(settings, "heartbeat"):
        doc = await wait_for(lambda: schedule(bus))
        assert doc == {"enabled": False, "jobs": []}
        view = await gather_tasks(settings)
        assert "heartbeat is off" in render_tasks(view)
        # On again, with the day's budget already spent: skipped, not failed, not disabled.
        await budget.add(bus, budget.day_key(), 5000)
        (home / "agent.toml").write_text(
            "[heartbeat]\ninterval_secs = 0.3\nuser_digest = '* * * * * *'\n"
            "[[scheduled_tasks]]\nname='quiet'\nevery='1s'\nprompt='should not run'\n")

        async def skipped() -> Any:
            jobs = (await schedule(bus)).get("jobs") or []
            digest = next((j for j in jobs if j["name"] == "user_digest"), {})
            return (jobs and jobs[0].get("outcome") == "skipped (budget)"
                    and digest.get("outcome") == "skipped (budget)" and jobs[0])

        job = await wait_for(skipped)
        assert job["fires"] == 0
        # the weekly USER.md digest stops with one notice to the owner, not one per skip
        await wait_for(lambda: _digest_notices(bus))
        first = await _last_fire(bus, "user_digest")
        await wait_for(lambda: _skipped_since(bus, "user_digest", first + 1.5))
        assert len(await _digest_notices(bus)) == 1
        view = await gather_tasks(settings)
        assert view["jobs"][0]["disabled"] is False
        assert "skipped (budget)" in render_tasks(view)


async def test_tasks_run_fires_a_job_now(settings: Settings, settings_for: SettingsFor,
                                         bus: Bus) -> None:
    agent_toml(settings.home, "[[scheduled_tasks]]\nname='weekly'\ncron='0 9 * * 1'\n"
                              "prompt='weekly report'\nsink='terminal:reports'\n")
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with chat(settings, "reports") as reports, actors(settings, *ALL, "heartbeat"):
        await wait_for(lambda: schedule(bus))
        done, text = await run_task(settings, "weekly")
        assert done and "terminal:reports" in text
        reply = await reports.next(("reply",), timeout=30)
        assert "weekly report" in reply.text
        missing, why = await run_task(settings, "nope")
        assert not missing and "weekly" in why
        view = await gather_tasks(settings)
        job, review, dreaming, digest = view["jobs"]  # tool review, dreaming, USER.md digest
        assert digest["name"] == "user_digest" and digest["when"] == "cron 0 5 * * 0"
        assert review["name"] == "tool_review" and review["when"] == "cron 0 4 1 * *"
        assert dreaming["name"] == "dreaming" and dreaming["when"] == "cron 30 3 * * *"
        assert job["name"] == "weekly" and job["next"] and job["when"] == "cron 0 9 * * 1"


async def _digest_notices(bus: Bus) -> list[dict[str, Any]]:
    info = await bus.js.stream_info(bus.subjects.stream_out)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = json.loads((await bus.js.get_msg(bus.subjects.stream_out, seq)).data)
        if msg["type"] == "notice" and "USER.md digest was skipped" in msg["text"]:
            found.append(msg)
    return found


async def _last_fire(bus: Bus, name: str) -> float:
    jobs = (await schedule(bus)).get("jobs") or []
    return float(next(j for j in jobs if j["name"] == name)["last"])


async def _skipped_since(bus: Bus, name: str, since: float) -> bool:
    """The job was skipped again (for the budget) at or after `since`."""
    jobs = (await schedule(bus)).get("jobs") or []
    job = next((j for j in jobs if j["name"] == name), {})
    return job.get("outcome") == "skipped (budget)" and (job.get("last") or 0) >= since
