"""`wintermute up` as a user runs it: a subprocess with embedded NATS and eight actor processes.

The model is a local server speaking the OpenAI API (tests/fakes/llm_servers.py) in its own
process; the real openai SDK in the llm actor talks to it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ACTORS
from supervisor.process.natsauth import connect_kwargs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wm(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "supervisor.cli.main", *args], env=env, cwd=ROOT, text=True,
        capture_output=True, timeout=timeout,
    )


def status(env: dict[str, str]) -> dict[str, Any]:
    out = wm(env, "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def wait_for(predicate: Any, timeout: float, interval: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def stream_payloads(env: dict[str, str], stream: str) -> list[dict[str, Any]]:
    """Every payload stored in a stream (what `nats stream view` shows)."""
    from bus import Bus

    async def read() -> list[dict[str, Any]]:
        home = Path(env["WINTERMUTE_HOME"])
        info = json.loads((home / "data" / "runtime.json").read_text())
        bus = await Bus(info["nats_url"], "wm").connect(
            timeout=30, **connect_kwargs(home, "supervisor"))
        try:
            si = await bus.js.stream_info(stream)
            out: list[dict[str, Any]] = []
            if not si.state.messages:
                return out
            for seq in range(si.state.first_seq, si.state.last_seq + 1):
                msg = await bus.js.get_msg(stream, seq)
                out.append(json.loads(msg.data))
            return out
        finally:
            await bus.close()

    return asyncio.run(read())


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "openai", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    yield url
    proc.terminate()
    proc.wait(10)


def start_up(home: Path, fake_openai: str) -> dict[str, Any]:
    """`wintermute up` in its own process group on a fresh home, with the fake model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_"))}
    env.update({
        "WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": fake_openai,
        "WM__MODELS__DEFAULT": "openai/test-model", "PYTHONUNBUFFERED": "1",
    })
    log = (home.parent / f"{home.name}-up.log").open("w")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli.main", "up"], env=env, cwd=ROOT, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    return {"env": env, "proc": proc, "home": home, "started": started}


def stop_up(inst: dict[str, Any]) -> None:
    proc = inst["proc"]
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def all_healthy(env: dict[str, str]) -> dict[str, Any] | None:
    """The status when all eight actors report healthy with a pid, else None."""
    if not (Path(env["WINTERMUTE_HOME"]) / "data" / "runtime.json").exists():
        return None
    out = wm(env, "status", "--json")
    if out.returncode != 0:
        return None
    st: dict[str, Any] = json.loads(out.stdout)
    ok = len(st["actors"]) == 8 and all(a["healthy"] and a["pid"] for a in st["actors"])
    return st if ok else None


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory, fake_openai: str) -> Iterator[dict[str, Any]]:
    """One instance shared by the tests of this module; every test may run first or alone, so
    the fixture hands it over only once all actors are healthy."""
    inst = start_up(tmp_path_factory.mktemp("e2e-home"), fake_openai)
    try:
        inst["healthy_after"] = None
        st = wait_for(lambda: all_healthy(inst["env"]), 120)
        inst["healthy_after"] = time.monotonic() - inst["started"]
        inst["first_status"] = st
        yield inst
    finally:
        stop_up(inst)


def test_all_eight_actors_healthy(up: dict[str, Any]) -> None:
    env = up["env"]
    st = up["first_status"]
    assert {a["name"] for a in st["actors"]} == set(ACTORS)
    assert st["nats"]["pid"] and st["nats"]["url"].startswith("nats://127.0.0.1:")
    from bus import Subjects

    assert set(st["streams"]) == {spec.name for spec in Subjects("wm").streams()}
    assert {"WM_IN", "WM_OUT", "WM_CMD", "WM_EVT", "WM_DLQ", "WM_AUDIT"} <= set(st["streams"])
    human = wm(env, "status").stdout
    assert "planner" in human and "HEALTHY" in human


def test_the_embedded_server_takes_only_its_own_users(up: dict[str, Any]) -> None:
    import nats

    folder = up["home"] / "data" / "nats"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "server.json").stat().st_mode) == 0o600
    assert not (folder / "users.json").exists()  # no plaintext passwords, nkeys instead
    info = json.loads((up["home"] / "data" / "runtime.json").read_text())

    async def anonymous() -> None:
        await nats.connect(info["nats_url"], allow_reconnect=False, max_reconnect_attempts=0)

    with pytest.raises(Exception, match="(?i)authorization"):
        asyncio.run(anonymous())
    # Each actor process runs as its own NATS user.
    for actor in status(up["env"])["actors"]:
        environ = Path(f"/proc/{actor['pid']}/environ").read_bytes().split(b"\0")
        assert f"WM__NATS__USER={actor['name']}".encode() in environ
        seed = (folder / "keys" / f"{actor['name']}.nk").read_bytes().strip()
        assert not any(seed in var for var in environ)  # the path to its key, not the key


def test_conversations_and_credentials_are_private(up: dict[str, Any]) -> None:
    """Logs (every conversation and tool output), keys and the store: 0600 in 0700 folders."""
    home = up["home"]
    assert wm(up["env"], "chat", "--once", "a private word").returncode == 0
    events = home / "logs" / "events.jsonl"
    wait_for(lambda: events.exists() and b"a private word" in events.read_bytes(), 30)
    for top in ("logs", "data"):
        assert stat.S_IMODE((home / top).stat().st_mode) == 0o700, top
    logs = {p.name for p in (home / "logs").iterdir()}
    assert {"events.jsonl", "nats-server.log", *(f"{a}.log" for a in ACTORS)} <= logs
    private = [*(home / "logs").iterdir(), *(home / "data" / "nats").rglob("*"),
               home / "data" / "runtime.json"]
    for path in private:
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path


def test_chat_once_gets_the_answer_and_a_tool_runs(up: dict[str, Any]) -> None:
    env = up["env"]
    out = wm(env, "chat", "--once", "hello wintermute", "--timeout", "30")
    assert out.returncode == 0 and out.stdout.strip() == "echo: hello wintermute"
    out = wm(env, "chat", "--once", "run: echo e2e-$((40+2)) > proof.txt; cat proof.txt")
    assert out.returncode == 0 and "e2e-42" in out.stdout
    assert (up["home"] / "workspace" / "proof.txt").read_text().strip() == "e2e-42"


def test_replay_and_rerun_work_as_the_cli_user(up: dict[str, Any]) -> None:
    env = up["env"]
    assert wm(env, "chat", "--once", "replay me").returncode == 0
    out = wm(env, "replay", "--rerun")
    assert out.returncode == 0, out.stderr
    assert "replay me" in out.stdout and "reply: same" in out.stdout, out.stdout


def test_tap_shows_a_turn_as_it_happens(up: dict[str, Any]) -> None:
    env = up["env"]
    tap = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli.main", "tap"], env=env, cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert tap.stderr is not None and "tapping" in tap.stderr.readline()
        assert wm(env, "chat", "--once", "tap this").returncode == 0
        time.sleep(0.5)
    finally:
        tap.terminate()
        output, _ = tap.communicate(timeout=10)
    for kind in ("terminal.input", "turn.request", "llm.request", "llm.response", "turn.reply",
                 "channel.delivered"):
        assert kind in output, f"{kind} missing from tap output:\n{output}"


def pid_of(env: dict[str, str], name: str) -> int | None:
    for a in status(env)["actors"]:
        if a["name"] == name:
            return a["pid"] if a["healthy"] else None
    return None


@pytest.mark.parametrize("victim", list(ACTORS))
def test_kill_9_mid_turn_loses_nothing_and_answers_once(up: dict[str, Any], victim: str) -> None:
    env = up["env"]
    old = wait_for(lambda: pid_of(env, victim), 30)
    text = f"slow:1.5 during {victim} kill"
    chat = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli.main", "chat", "--once", text, "--timeout", "60"],
        env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    time.sleep(0.8)  # the turn is in flight: at the model, or between actors
    os.kill(old, signal.SIGKILL)
    # How fast it comes back is a figure of `just chaos`, not a pass mark: a busy machine is slow.
    new = wait_for(lambda: (p := pid_of(env, victim)) and p != old and p, 60)
    out, err = chat.communicate(timeout=90)
    assert chat.returncode == 0, err
    assert out.strip() == "slept 1.5"
    assert new != old
    turns = [p for p in stream_payloads(env, "WM_IN") if p.get("text") == text]
    assert len(turns) == 1
    delivered = [p for p in stream_payloads(env, "WM_EVT")
                 if p["type"] == "channel.delivered" and p["ref"] == turns[0]["id"]]
    assert len(delivered) == 1, delivered
    replies = [p for p in stream_payloads(env, "WM_OUT")
               if p["type"] == "turn.reply" and p["turn_id"] == turns[0]["id"]]
    assert len(replies) == 1, replies


def test_every_payload_in_the_streams_is_typed_json(up: dict[str, Any]) -> None:
    env = up["env"]
    for stream in ("WM_IN", "WM_OUT", "WM_CMD", "WM_EVT"):
        for payload in stream_payloads(env, stream):
            assert isinstance(payload, dict) and payload.get("type"), (stream, payload)


def test_garbage_on_every_inbox_is_dead_lettered_and_nobody_dies(up: dict[str, Any]) -> None:
    env = up["env"]
    from bus import Bus, Subjects

    s = Subjects("wm")
    inboxes = [
        s.inbound("terminal", "owner"), s.cmd("llm", "complete"), s.cmd("executor", "run"),
        s.cmd("memory", "recall"), s.cmd("approval", "decide"), s.cmd("channel", "terminal"),
        s.cmd("planner", "reset"), s.outbound("terminal", "owner"),
        s.evt("llm", "response", "x"), s.evt("approval", "resolved", "x"),
    ]
    before = {a["name"]: a["restarts"] for a in status(env)["actors"]}
    dlq_before = len(stream_payloads(env, "WM_DLQ"))

    async def flood() -> None:
        info = json.loads((up["home"] / "data" / "runtime.json").read_text())
        bus = await Bus(info["nats_url"], "wm").connect(
            timeout=30, **connect_kwargs(up["home"], "supervisor"))
        for subject in inboxes:
            for bad in (b"\xff\xfe garbage", b'{"type": "turn.request"', b"[1,2,3]",
                        b'{"type":"llm.request","id":"x","session":5}', b"x" * 900_000):
                await bus.js.publish(subject, bad)
        await bus.close()

    asyncio.run(flood())
    expected = dlq_before + 5 * len(inboxes)
    wait_for(lambda: len(stream_payloads(env, "WM_DLQ")) >= expected, 30)
    letters = stream_payloads(env, "WM_DLQ")[dlq_before:]
    assert all(letter["type"] == "deadletter" and letter["reason"] for letter in letters)
    assert {letter["subject"] for letter in letters} == set(inboxes)
    after = {a["name"]: a["restarts"] for a in status(env)["actors"]}
    assert after == before, "garbage must not crash any actor"
    out = wm(env, "chat", "--once", "still alive?")
    assert out.stdout.strip() == "echo: still alive?"


def test_sigterm_stops_every_process_within_15s(
    tmp_path_factory: pytest.TempPathFactory, fake_openai: str,
) -> None:
    # Its own instance: stopping the shared one would break whichever test runs after it.
    up = start_up(tmp_path_factory.mktemp("e2e-sigterm"), fake_openai)
    try:
        st = wait_for(lambda: all_healthy(up["env"]), 120)
        _sigterm_and_check(up, st)
    finally:
        stop_up(up)


def _sigterm_and_check(up: dict[str, Any], st: dict[str, Any]) -> None:
    pids = [a["pid"] for a in st["actors"] if a["pid"]] + [st["nats"]["pid"]]
    proc = up["proc"]
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    took = time.monotonic() - started

    def all_gone() -> bool:
        gone = True
        for pid in pids:
            try:
                os.kill(pid, 0)
                gone = False
            except ProcessLookupError:
                pass
        return gone

    wait_for(all_gone, max(0.5, 15 - took))
    assert took < 15
    assert proc.returncode == 0
    assert not (up["home"] / "data" / "runtime.json").exists()
