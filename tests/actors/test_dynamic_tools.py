"""Agent-created tools through real actors (in-process), real NATS and the real scripts/ git repo."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from actors.executor.dynamic.git import commit_paths, revert_last
from actors.executor.dynamic.run import split_output
from actors.executor.dynamic.spec import SpecError, build_spec
from bus import Bus, codec
from contracts import ToolOutcome, ToolRequest, ToolResult
from contracts.config import Settings
from kit.safegit import run_git
from supervisor.cli.tools import gather_tools, render_tools, revert_scripts
from tests.actors.harness import ALL, actors, chat
from tests.capability import as_paired, open_templates
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]

ADD = (
    "import json, sys\n"
    "args = json.load(sys.stdin)\n"
    "print('adding', file=sys.stderr)\n"
    "json.dump({'sum': args['a'] + args['b']}, sys.stdout)\n"
)
BROKEN = "import sys\nprint('boom: cannot add today', file=sys.stderr)\nsys.exit(3)\n"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "required": ["a", "b"]}


def create_args(name: str, source: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{name}: adds two integers.",
            "parameters_schema": SCHEMA, "implementation": source, **extra}


def git_log(home: Path) -> list[str]:
    return run_git(home / "scripts", "log", "--format=%s")[1].splitlines()


def write_tool(home: Path, name: str, source: str, spec: dict[str, Any] | None = None) -> None:
    scripts = home / "scripts"
    (scripts / f"{name}.py").write_text(source)
    body = spec if spec is not None else {"name": name, "description": f"{name} by hand",
                                          "parameters": {"type": "object"}}
    (scripts / f"{name}.json").write_text(json.dumps(body))


async def state(bus: Bus, key: str) -> Any:
    raw = await bus.kv_get(bus.subjects.kv_state, key)
    return json.loads(raw) if raw else None


async def offered(bus: Bus) -> list[str]:
    return [s["name"] for s in await state(bus, "tools") or []]


async def eventually(check: Callable[[], Any], timeout: float = 20) -> Any:
    """Poll an async check until it returns something truthy (the registry reloads on its own)."""
    async with asyncio.timeout(timeout):
        while True:
            if value := await check():
                return value
            await asyncio.sleep(0.2)


class Caller:
    """Sends tool.request to the executor like the planner does and waits for the result."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.results: dict[str, asyncio.Future[ToolResult]] = {}
        self.outcomes: list[ToolOutcome] = []

    async def start(self) -> None:
        dec_result, dec_outcome = codec.decoder_for(ToolResult), codec.decoder_for(ToolOutcome)

        async def on_result(raw: Any) -> None:
            res = dec_result.decode(raw.data)
            fut = self.results.get(res.call_id)
            if fut is not None and not fut.done():
                fut.set_result(res)

        async def on_outcome(raw: Any) -> None:
            self.outcomes.append(dec_outcome.decode(raw.data))

        s = self.bus.subjects
        await self.bus.nc.subscribe(s.evt("tool", "result", "dyn"), cb=on_result)
        await self.bus.nc.subscribe(f"{s.p}.evt.tool.outcome.>", cb=on_outcome)

    async def call(self, name: str, args: dict[str, Any], is_owner: bool = True) -> ToolResult:
        call_id = uuid.uuid4().hex
        self.results[call_id] = asyncio.get_running_loop().create_future()
        req = as_paired(ToolRequest(id=f"dyn:{call_id}", session="dyn", turn_id="dyn:turn",
                                    step=0, call_id=call_id, name=name, arguments=args,
                                    is_owner=is_owner))
        await self.bus.publish(self.bus.subjects.cmd("executor", "run"), req)
        return await asyncio.wait_for(self.results[call_id], 60)


pytestmark = pytest.mark.usefixtures("clean_provider_env")


@pytest.fixture
async def caller(bus: Bus) -> Caller:
    c = Caller(bus)
    await c.start()
    return c


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    server = FakeLLM()
    await server.start("openai")
    yield server
    await server.stop()


async def test_self_coding_loop_create_call_break_revert(
    fake: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch, home: Path,
    bus: Bus,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with actors(settings, *ALL), chat(settings) as c:
        reply = await c.ask("tool:create_tool " + json.dumps(create_args("add_numbers", ADD)))
        assert "Created tool add_numbers" in reply, reply
        assert git_log(home)[0] == "create tool: add_numbers"
        assert "add_numbers" in await offered(bus)

        reply = await c.ask('tool:add_numbers {"a": 2, "b": 40}')
        assert reply == 'Tool said: {"sum": 42}'
        meta = (await state(bus, "tools.meta"))["add_numbers"]
        assert meta["invocations"] == 1 and meta["successes"] == 1 and meta["version"] == 1

        reply = await c.ask("tool:create_tool " + json.dumps(create_args("add_numbers", BROKEN)))
        assert "Updated tool add_numbers" in reply, reply
        assert git_log(home)[0] == "update tool: add_numbers"
        reply = await c.ask('tool:add_numbers {"a": 2, "b": 40}')
        assert "failed with exit code 3" in reply and "boom: cannot add today" in reply, reply

        notice = await c.ask("/revert")
        assert "Asked the executor" in notice
        done = await c.next(("notice",))
        assert "Reverted “update tool: add_numbers”" in done.text, done.text
        assert git_log(home)[0] == "revert: update tool: add_numbers"
        assert (home / "scripts" / "add_numbers.py").read_text() == ADD

        reply = await c.ask('tool:add_numbers {"a": 1, "b": 1}')
        assert reply == 'Tool said: {"sum": 2}'
        meta = (await state(bus, "tools.meta"))["add_numbers"]
        assert meta["invocations"] == 3 and meta["successes"] == 2 and meta["version"] == 3
        assert "boom: cannot add today" in meta["last_error"]


async def test_create_tool_validates_and_commits(
    settings_for: SettingsFor, home: Path, caller: Caller
) -> None:
    open_templates(home)  # non-owners may call any tool: the owner-only rule is what refuses
    settings = settings_for()
    async with actors(settings, "executor"):
        for bad in ("../evil", "Evil", "a/b", "", "execute_command"):
            res = await caller.call("create_tool", create_args(bad, ADD))
            assert not res.ok and "Nothing was saved" in res.output, (bad, res.output)
        res = await caller.call("create_tool", create_args("syntax", "def broken(:\n"))
        assert not res.ok and "does not parse" in res.output
        assert not list((home / "scripts").glob("*.py"))

        res = await caller.call("create_tool", create_args("add_numbers", ADD),
                                is_owner=False)
        assert not res.ok and "Only the owner" in res.output
        res = await caller.call("create_tool", create_args("add_numbers", ADD, timeout_secs=5))
        assert res.ok, res.output
        res = await caller.call("create_tool", create_args("add_numbers", ADD, timeout_secs=5))
        assert res.ok and "unchanged" in res.output
        assert git_log(home) == ["create tool: add_numbers", "init scripts repository"]
        spec = json.loads((home / "scripts" / "add_numbers.json").read_text())
        assert spec["timeout_secs"] == 5 and "_meta" not in spec

        res = await caller.call("add_numbers", {"a": 1, "b": 2}, is_owner=False)
        assert not res.ok and "Only the owner" in res.output
        res = await caller.call("add_numbers", {"a": 1, "b": 2})
        assert res.ok and json.loads(res.output) == {"sum": 3}
        outcome = await eventually(lambda: _outcome(caller, "add_numbers"))
        assert outcome.ok and outcome.version == 1


async def test_create_tool_never_writes_through_a_planted_link(
    settings_for: SettingsFor, home: Path, caller: Caller
) -> None:
    """Links the sandbox planted in scripts/ at the tool's file names point at config.toml;
    create_tool replaces the links and leaves config.toml alone (sandbox → host, issue 16)."""
    settings = settings_for()
    config = home / "config.toml"
    before = config.read_bytes()
    for name in ("linked.py", "linked.json", "peek.py", "peek.json"):
        (home / "scripts" / name).symlink_to(config)
    async with actors(settings, "executor"):
        res = await caller.call("create_tool", create_args("linked", ADD))
        assert res.ok, res.output
        peek = await caller.call("peek", {})  # the registry does not read through links either
        assert not peek.ok and "symbolic link" in peek.output and "principals" not in peek.output
    assert config.read_bytes() == before
    assert not (home / "scripts" / "linked.py").is_symlink()
    assert (home / "scripts" / "linked.py").read_text() == ADD


async def _outcome(caller: Caller, tool: str) -> ToolOutcome | None:
    return next((o for o in caller.outcomes if o.tool == tool), None)


async def test_hand_edits_reload_and_failures_are_tool_errors(
    settings_for: SettingsFor, home: Path, bus: Bus, caller: Caller
) -> None:
    settings = settings_for()
    async with actors(settings, "executor"):
        write_tool(home, "hello", "import json\nprint(json.dumps({'hi': 1}))\n")
        assert "hello" in await eventually(lambda: offered(bus))  # the watcher, no request
        res = await caller.call("hello", {})
        assert res.ok and json.loads(res.output) == {"hi": 1}

        write_tool(home, "hello", "print('not json')\n")
        res = await caller.call("hello", {})
        assert not res.ok and "not valid JSON" in res.output

        write_tool(home, "slow", "import time\ntime.sleep(30)\n",
                   {"name": "slow", "description": "sleeps", "timeout_secs": 1})
        res = await caller.call("slow", {})
        assert not res.ok and "timed out after 1s" in res.output

        write_tool(home, "oops", "print(1)\n", {"name": "other", "description": "x"})
        res = await caller.call("oops", {})
        assert not res.ok and "cannot be loaded" in res.output and "must match" in res.output

        held = {"status": "quarantined", "reason": "it kept failing"}
        await bus.kv_put(bus.subjects.kv_tools, "slow", json.dumps(held).encode())
        rows = {r["name"]: r for r in await gather_tools(settings)}
        assert rows["slow"]["status"] == "quarantined"
        assert rows["slow"]["status_reason"] == "it kept failing"
        assert rows["execute_command"]["status"] == "ok"
        assert rows["oops"]["status"] == "broken"
        assert rows["slow"]["meta"]["timeouts"] == 1
        assert rows["hello"]["meta"]["invocations"] == 2
        assert rows["hello"]["meta"]["version"] == 2
        table = render_tools(list(rows.values()))
        assert "create_tool" in table and "broken" in table


async def test_dynamic_tool_budget_ranks_by_recency(
    settings_for: SettingsFor, home: Path, bus: Bus, caller: Caller
) -> None:
    for name in ("t_one", "t_two", "t_three"):
        write_tool(home, name, "print('{}')\n")
    settings = settings_for(WM__BUDGET__MAX_DYNAMIC_TOOLS_PER_TURN="2")
    async with actors(settings, "executor"):
        names = await eventually(lambda: offered(bus))
        assert {"execute_command", "create_tool", "memory_save"} <= set(names)
        dynamic = [n for n in names if n.startswith("t_")]
        assert len(dynamic) == 2
        left_out = ({"t_one", "t_two", "t_three"} - set(dynamic)).pop()
        res = await caller.call(left_out, {})  # still callable, and now the most recent
        assert res.ok, res.output
        names = await offered(bus)
        assert left_out in names and len([n for n in names if n.startswith("t_")]) == 2


async def test_cli_revert_and_nothing_to_revert(
    settings_for: SettingsFor, home: Path, caller: Caller
) -> None:
    settings = settings_for()
    async with actors(settings, "executor"):
        ok, text = await revert_scripts(settings, timeout=30)
        assert not ok and "Nothing to revert" in text
        res = await caller.call("create_tool", create_args("add_numbers", ADD))
        assert res.ok, res.output
        ok, text = await revert_scripts(settings, timeout=30)
        assert ok and "create tool: add_numbers" in text, text
        assert not (home / "scripts" / "add_numbers.py").exists()
        res = await caller.call("add_numbers", {"a": 1, "b": 2})
        assert not res.ok and "Unknown tool" in res.output


async def test_git_config_planted_in_scripts_never_runs_on_the_host(
    settings_for: SettingsFor, home: Path, caller: Caller
) -> None:
    """What a sandboxed command can write into scripts/ (a .git with hooks, fsmonitor and
    filters, a .gitattributes): create_tool, a dependency commit and `wintermute revert`
    through the real executor run none of it (issue 16; more in tests/kit/test_safegit.py)."""
    from tests.kit.test_safegit import fired, plant

    marker = home / "workspace" / "pwned"
    plant(home / "scripts", marker)
    settings = settings_for()
    async with actors(settings, "executor"):
        res = await caller.call("create_tool", create_args("add_numbers", ADD))
        assert res.ok, res.output
        (home / "scripts" / "requirements.txt").write_text("requests\n")
        await eventually(lambda: _logged(home, "update dependencies: requirements.txt"))
        ok, text = await revert_scripts(settings, timeout=30)
        assert ok, text
    assert not fired(marker)


async def _logged(home: Path, subject: str) -> bool:
    return subject in git_log(home)


async def test_dependency_files_are_committed(
    settings_for: SettingsFor, home: Path, bus: Bus
) -> None:
    settings = settings_for()
    async with actors(settings, "executor"):
        await eventually(lambda: offered(bus))  # started: edits from now on are watched
        (home / "scripts" / "requirements.txt").write_text("feedparser\n")

        async def committed() -> bool:
            return "update dependencies: requirements.txt" in git_log(home)

        await eventually(committed)


def test_specs_and_output_parsing() -> None:
    with pytest.raises(SpecError, match="not allowed"):
        build_spec("../x", "d", {})
    with pytest.raises(SpecError, match="at most 200"):
        build_spec("x", "d" * 201, {})
    with pytest.raises(SpecError, match="between 1 and"):
        build_spec("x", "d", {}, 0)
    bare = build_spec("x", "d", {"q": {"type": "string"}})
    assert bare.parameters == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert split_output('{"a": 1}\n__m 0\nwarn\n', "__m") == ('{"a": 1}', 0, "warn\n")
    assert split_output("killed", "__m") == ("killed", None, "")


async def test_revert_checks_head_and_undoes_an_undo(home: Path) -> None:
    repo = home / "scripts"
    (repo / "x.py").write_text("print(1)\n")
    assert await commit_paths(repo, ["x.py"], "create tool: x")
    stale = await revert_last(repo, expect_head="0123456789")
    assert not stale.ok and "Not reverted" in stale.text
    undo = await revert_last(repo)
    assert undo.ok and not (repo / "x.py").exists()
    redo = await revert_last(repo)
    assert redo.ok and "is back" in redo.text and (repo / "x.py").exists()
    # attacks on host-side git through scripts/: tests/kit/test_safegit.py

