"""Skills through the real executor (and, for whole turns, every actor with the scripted model):
listed by name and one line, loaded on demand, scripts run under the skill's limits in
bubblewrap (no network, time and memory caps), a malformed SKILL.md reported, the agent's own
skills written only with the owner's approval and revertible."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from contracts.config import Settings
from contracts.records import ExecutorFacts, SkillsReport
from kit.safegit import run_git
from supervisor.cli.client import render_status
from supervisor.cli.skills import gather_skills, render_skills
from supervisor.cli.tools import revert_scripts
from tests.actors.harness import ALL, actors, chat
from tests.actors.test_dynamic_tools import Caller, eventually
from tests.capability import open_templates
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
pytestmark = [pytest.mark.usefixtures("clean_provider_env"),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]

PROBE = """---
name: probe
description: Tries what a skill script may not do.
limits:
  timeout_secs: 2
  memory_mb: 64
---
Run scripts/net.py with the host port, scripts/mem.py or scripts/sleep.py.
"""
NET = """import socket, sys
for host, port in (("127.0.0.1", int(sys.argv[1])), ("1.1.1.1", 53)):
    try:
        socket.create_connection((host, port), timeout=2).close()
        print("connected to", host)
    except OSError as exc:
        print("blocked", host, type(exc).__name__, exc)
"""
MEM = "import sys\ndata = bytearray(int(sys.argv[1]) << 20)\nprint('allocated', len(data))\n"
WRITE = """import pathlib
pathlib.Path("made-by-skill.txt").write_text("hi")
try:
    pathlib.Path("/skill/x").write_text("no")
except OSError as exc:
    print("skill folder read-only:", type(exc).__name__)
"""


def tool_call(tool: str, **arguments: object) -> str:
    return f"tool:{tool} {json.dumps(arguments)}"


def plant(home: Path, name: str, skill_md: str, scripts: dict[str, str] | None = None) -> None:
    folder = home / "skills" / name
    (folder / "scripts").mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(skill_md)
    for file, text in (scripts or {}).items():
        (folder / "scripts" / file).write_text(text)


async def report(bus: Bus) -> SkillsReport | None:
    return await bus.kv_get_as(bus.subjects.kv_state, "tools.skills", SkillsReport)


@pytest.fixture
def settings(settings_for: SettingsFor, home: Path) -> Settings:
    open_templates(home)  # non-owners may call any tool: the owner-only rule is what refuses
    return settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct")


@pytest.fixture
async def caller(bus: Bus) -> Caller:
    c = Caller(bus)
    await c.start()
    return c


async def test_a_shipped_skill_is_listed_loaded_and_its_script_run_in_a_turn(
    fake: FakeLLM, settings: Settings, home: Path,
) -> None:
    (home / "workspace").mkdir(exist_ok=True)
    (home / "workspace" / "draft.md").write_text("one two three\nfour five\n")
    async with actors(settings, *ALL), chat(settings) as c:
        echo = await c.ask("hello")
        assert echo == "echo: hello"
        tools = {t["function"]["name"]: t["function"] for t in fake.requests[-1]["tools"]}
        index = tools["load_skill"]["description"]  # names and one line each, no bodies
        assert "- word-count: Count the lines" in index and "- meeting-notes:" in index
        assert "Action items" not in index and "count.py" not in index

        body = await c.ask(tool_call("load_skill", name="word-count"))
        assert body.startswith("Tool said: # Skill word-count") and "scripts/count.py" in body
        counted = await c.ask(tool_call("run_skill_script", skill="word-count",
                                        script="scripts/count.py", args=["draft.md"]))
        assert '"lines": 2, "words": 5' in counted, counted

        data = await gather_skills(settings)
        rows = {r["name"]: r for r in data["skills"]}
        assert rows["word-count"]["loads"] == 1 and rows["word-count"]["runs"] == 1
        assert rows["meeting-notes"]["loads"] == 0 and data["source"] == "executor"
        table = {line.split()[0]: line.split()[1:4] for line in render_skills(data).splitlines()
                 if line.startswith(("word-count", "meeting-notes"))}
        assert table == {"word-count": ["1", "1", "0"], "meeting-notes": ["0", "0", "0"]}


async def test_scripts_run_without_network_and_within_time_and_memory(
    settings: Settings, home: Path, caller: Caller,
) -> None:
    plant(home, "probe", PROBE, {"net.py": NET, "mem.py": MEM, "sleep.py":
                                 "import time\ntime.sleep(30)\n", "write.py": WRITE})
    reached: list[str] = []
    server = await asyncio.start_server(lambda r, w: reached.append("x") or w.close(),
                                        "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, actors(settings, "executor"):
        await eventually(lambda: _listed(caller.bus, "probe"))

        def run(script: str, *args: str) -> Any:
            return caller.call("run_skill_script", {"skill": "probe", "script": script,
                                                    "args": list(args)})

        net = await run("scripts/net.py", str(port))
        assert "blocked 127.0.0.1" in net.output and "blocked 1.1.1.1" in net.output, net.output
        assert "connected" not in net.output and reached == []
        small = await run("scripts/mem.py", "8")
        assert small.ok and "allocated 8388608" in small.output, small.output
        mem = await run("scripts/mem.py", "300")  # over the skill's 64 MB
        assert not mem.ok and "allocated" not in mem.output, mem.output
        slow = await run("sleep.py")  # scripts/ may be left out
        assert not slow.ok and "limit of 2s and was killed" in slow.output
        wrote = await run("scripts/write.py")
        assert wrote.ok and "skill folder read-only" in wrote.output, wrote.output
        assert (home / "workspace" / "made-by-skill.txt").read_text() == "hi"
        missing = await run("scripts/nope.py")
        assert not missing.ok and "has no script" in missing.output
        guest = await caller.call("run_skill_script", {"skill": "probe", "script": "net.py"},
                                  is_owner=False)
        assert not guest.ok and "Only the owner" in guest.output
        rows = {r.name: r for r in (await report(caller.bus) or SkillsReport()).skills}
        assert rows["probe"].runs == 5 and rows["probe"].failures == 2


async def _listed(bus: Bus, name: str) -> bool:
    rep = await report(bus)
    return rep is not None and name in {r.name for r in rep.skills}


async def test_a_malformed_skill_md_is_reported_and_nothing_else_stops(
    settings: Settings, home: Path, caller: Caller,
) -> None:
    plant(home, "broken", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
    async with actors(settings, "executor"):
        rep = await eventually(lambda: report(caller.bus))
        assert "not valid YAML" in rep.problems["broken"]
        assert {"word-count", "meeting-notes"} <= {r.name for r in rep.skills}
        res = await caller.call("load_skill", {"name": "broken"})
        assert not res.ok and "cannot be used: the front matter is not valid YAML" in res.output
        ok = await caller.call("load_skill", {"name": "meeting-notes"})
        assert ok.ok and "Action items" in ok.output

        facts = await caller.bus.kv_get_as(caller.bus.subjects.kv_state, "executor",
                                           ExecutorFacts)
        assert facts is not None and "broken" in facts.skill_problems
        text = render_status({"executor": msgspec_builtins(facts)})
        assert "skill WARNING: skills/broken/SKILL.md cannot be used" in text
        assert "skills/broken/SKILL.md cannot be used" in render_skills(
            await gather_skills(settings))

        plant(home, "broken", "---\nname: broken\ndescription: Fixed now.\n---\nbody\n")
        await eventually(lambda: _listed(caller.bus, "broken"))  # hot reload


def msgspec_builtins(value: object) -> dict[str, Any]:
    import msgspec

    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


NEW_SKILL = """---
name: greet
description: Greets people in their language.
---
Say hello in the user's language.
"""


async def test_the_agent_writes_a_skill_only_with_approval_and_it_can_be_reverted(
    fake: FakeLLM, settings: Settings, home: Path,
) -> None:
    async with actors(settings, *ALL), chat(settings) as c:
        bad = await c.ask(tool_call("write_skill", name="greet", skill_md="no front matter"))
        assert "not usable" in bad and "Nothing was written" in bad
        held = await c.ask(tool_call("write_skill", name="greet", skill_md=NEW_SKILL,
                                     files={"references/langs.md": "en: hello"}))
        assert "Waiting for the owner's approval" in held
        assert not (home / "skills" / "greet").exists()
        prompt = await c.next(("approval",))
        assert "the skill greet" in prompt.text
        await c.say(f"/approve {prompt.ref}")
        told = await c.next(("reply",))
        assert "Created the skill greet" in told.text, told.text
        assert (home / "skills" / "greet" / "references" / "langs.md").read_text() == "en: hello"
        log = run_git(home / "skills", "log", "--format=%s")[1].splitlines()
        assert log == ["create skill: greet", "init skills repository"]
        listed = await c.ask("/skills")
        assert "greet — Greets people" in listed

        ok, text = await revert_scripts(settings, 30, repo="skills")
        assert ok and "create skill: greet" in text, text
        assert not (home / "skills" / "greet").exists()


def test_a_skill_never_gets_more_than_the_sandbox_ceilings(home: Path) -> None:
    from actors.executor.skills.runner import SkillRunner, script_command
    from contracts.config import SandboxConfig
    from kit.skillmd import SkillLimits

    runner = SkillRunner(home, SandboxConfig(memory_mb=100, pids_limit=10))
    capped = runner.capped(SkillLimits(memory_mb=500, pids=64, timeout_secs=5))
    assert (capped.memory_mb, capped.pids, capped.timeout_secs) == (100, 10, 5)
    assert script_command("scripts/a b.py", ["x; rm -rf /"]) == (
        "python3 '/skill/scripts/a b.py' 'x; rm -rf /'")


async def test_an_unusable_skills_folder_is_reported_and_the_executor_carries_on(
    settings: Settings, home: Path, caller: Caller,
) -> None:
    shutil.rmtree(home / "skills")
    (home / "skills").write_text("not a folder")
    async with actors(settings, "executor"):
        rep = await eventually(lambda: report(caller.bus))
        assert "could not be set up" in rep.problems["."] and rep.skills == []
        res = await caller.call("load_skill", {"name": "word-count"})
        assert not res.ok and "Unknown skill 'word-count'. Skills: none." in res.output
        assert "skills/: could not be set up" in render_skills(await gather_skills(settings))


TRANSLATE = """---
name: translate
description: Translate a text into plain English.
model_role: translator
---
Translate the text the user gives into plain English.
"""
ODD = """---
name: odd
description: Names a model role nobody configured.
model_role: nobody
---
Do the task.
"""


async def test_a_loaded_skill_picks_the_model_for_the_rest_of_its_turn(
    fake: FakeLLM, settings_for: SettingsFor, home: Path,
) -> None:
    open_templates(home)
    settings = settings_for(
        WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="direct",
        WM__MODELS__ROLES=json.dumps({"translator": "openai/translator-model"}),
        WM__MODELS__SKILLS=json.dumps({"meeting-notes": "openai/notes-model"}))
    plant(home, "translate", TRANSLATE)
    plant(home, "odd", ODD)

    async def models_of(text: str) -> list[str]:
        before = len(fake.requests)
        await c.ask(text)
        return [r["model"] for r in fake.requests[before:]]

    async with actors(settings, *ALL), chat(settings) as c:
        # model_role -> [models.roles]: the call after load_skill goes to the role's model.
        assert await models_of(tool_call("load_skill", name="translate")) == [
            "test-model", "translator-model"]
        assert await models_of("and now?") == ["test-model"]  # the next turn: its usual model
        # [models.skills.<name>] wins; no model_role needed.
        assert await models_of(tool_call("load_skill", name="meeting-notes")) == [
            "test-model", "notes-model"]
        # A role nobody configured and a failed load change nothing.
        assert await models_of(tool_call("load_skill", name="odd")) == [
            "test-model", "test-model"]
        assert await models_of(tool_call("load_skill", name="missing")) == [
            "test-model", "test-model"]

        # The user names the skill: the planner loads it before the first model call, which
        # then already goes with the skill's model and sees its body.
        before = len(fake.requests)
        answer = await c.ask("/skill translate Bonjour tout le monde")
        assert answer.startswith("Tool said: # Skill translate"), answer
        assert [r["model"] for r in fake.requests[before:]] == ["translator-model"]
        assert await models_of("Please use the meeting-notes skill on this.") == ["notes-model"]
        assert await models_of("use the unknown skill") == ["test-model"]  # not a listed skill
        before = len(fake.requests)
        assert "Unknown skill 'nope'" in await c.ask("/skill nope hi")
        assert [r["model"] for r in fake.requests[before:]] == ["test-model"]
        rows = {r["name"]: r for r in (await gather_skills(settings))["skills"]}
        assert rows["translate"]["loads"] == 2 and rows["meeting-notes"]["loads"] == 2
