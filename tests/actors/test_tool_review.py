"""The monthly tool review: unused or failing agent-created tools (from `_meta`) are proposed to
the owner for archiving; only the owner's approval archives them (git-tracked, revertible)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from actors.executor.dynamic.git import commit_paths, git
from actors.heartbeat.review import findings
from bus import Bus
from contracts.config import HeartbeatConfig, Settings
from contracts.records import ToolMeta
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
SOURCE = "import json, sys\njson.dump({'ok': True}, sys.stdout)\n"
DAY = 86400.0


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def meta(created: float, used: float | None = None, calls: int = 0, ok: int = 0) -> ToolMeta:
    return ToolMeta(created_at=iso(created), updated_at=iso(created), invocations=calls,
                    successes=ok, last_used=iso(used) if used else None,
                    last_error="exit code 3" if ok < calls else None)


def test_findings_name_unused_and_failing_tools_only() -> None:
    now = time.time()
    book = {"old": meta(now - 90 * DAY), "idle": meta(now - 90 * DAY, now - 40 * DAY, 5, 5),
            "busy": meta(now - 90 * DAY, now - DAY, 9, 9), "new": meta(now - 2 * DAY),
            "flaky": meta(now - 5 * DAY, now - DAY, 10, 2), "gone": meta(now - 90 * DAY)}
    found = findings(book, ["old", "idle", "busy", "new", "flaky"], HeartbeatConfig(), now)
    assert sorted(found) == ["flaky", "idle", "old"]
    assert found["old"].startswith("never used in the 90 days")
    assert found["idle"] == "unused for 40 days"
    assert found["flaky"].startswith("failing: 20% of 10 calls succeeded")


async def test_the_review_proposes_and_the_approval_archives(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    home = settings_for().home
    scripts = home / "scripts"
    for name in ("old_tool", "busy_tool"):
        (scripts / f"{name}.py").write_text(SOURCE)
        (scripts / f"{name}.json").write_text(
            f'{{"name": "{name}", "description": "{name}", "parameters": {{"type": "object"}}}}')
    await commit_paths(scripts, [f"{n}.{x}" for n in ("old_tool", "busy_tool")
                                 for x in ("py", "json")], "tools by hand")
    now = time.time()
    book = {"old_tool": meta(now - 90 * DAY), "busy_tool": meta(now - 90 * DAY, now - DAY, 3, 3)}
    await bus.kv_put(bus.subjects.kv_state, "tools.meta", msgspec.json.encode(book))
    (home / "agent.toml").write_text("[heartbeat]\ninterval_secs = 0.3\n"
                                     "tool_review = '* * * * * */2'  # every 2 s (seconds last)\n")
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with chat(settings) as owner, actors(settings, *ALL, "heartbeat"):
        prompt = await owner.next(("approval",), timeout=90)
        assert "archive_tools: old_tool" in prompt.text and "busy_tool" not in prompt.text
        assert "never used in the 90 days" in prompt.text
        assert (scripts / "old_tool.py").exists()  # nothing happens before the owner says yes
        await owner.say(f"/approve {prompt.ref}")
        reply = await owner.next(("reply",), timeout=90)  # the agent tells the owner
        assert "Archived old_tool to scripts/archive/" in reply.text
    assert (scripts / "archive" / "old_tool.py").exists()
    assert not (scripts / "old_tool.py").exists() and (scripts / "busy_tool.py").exists()
    _, log = await git(scripts, "log", "-1", "--format=%s")
    assert log.startswith("archive tools: old_tool")
