"""Telegram under `wintermute up`: real processes, kill -9 of the channel, a stalled poller.

The Bot API is tests/fakes/telegram_server.py running in a thread of this test process; the
channel actor (a child of `up`) reaches it with python-telegram-bot over HTTP.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from tests.e2e.test_up import ROOT, free_port, status, stream_payloads, wait_for
from tests.fakes.telegram_server import TOKEN, FakeTelegram

pytestmark = pytest.mark.slow

FRIEND = 222


class ThreadedTelegram:
    """The fake Bot API on its own event loop in a daemon thread, driven from sync tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = FakeTelegram()
        self.run(self.server.start())

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def inside() -> Any:
            return fn(*args, **kwargs)

        return self.run(inside())

    def say(self, user: int, text: str) -> int:
        return int(self.call(lambda: self.server.inject(self.server.message(user, text))))

    def texts_to(self, chat: int) -> list[str]:
        return list(self.call(lambda: [m["text"] for m in self.server.messages_to(chat)]))

    def close(self) -> None:
        self.run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def telegram() -> Iterator[ThreadedTelegram]:
    server = ThreadedTelegram()
    yield server
    server.close()


@pytest.fixture(scope="module")
def up_tg(tmp_path_factory: pytest.TempPathFactory,
          telegram: ThreadedTelegram) -> Iterator[dict[str, Any]]:
    port = free_port()
    model = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "openai", "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert model.stdout is not None
    model_url = model.stdout.readline().strip()
    home = tmp_path_factory.mktemp("tg-home")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "WINTERMUTE_"))}
    env.update({
        "WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": model_url,
        "WM__MODELS__DEFAULT": "openai/test-model", "PYTHONUNBUFFERED": "1",
        "WINTERMUTE_TELEGRAM_TOKEN": TOKEN,
        "WM__CHANNELS__TELEGRAM__API_BASE_URL": telegram.server.api_base_url,
        "WM__CHANNELS__TELEGRAM__API_FILE_URL": telegram.server.api_file_url,
        "WM__CHANNELS__TELEGRAM__ALLOWED_USERS": f"[{FRIEND}]",
        "WM__CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS": "2",
        # A stalled link is noticed after stale_after (default 15 s, stretched on a busy
        # machine): 8 s, as in the other fault tests, halves the wait by the same rule.
        "WM__SUPERVISOR__STALE_AFTER_SECS": "8",
    })
    log = (home.parent / "up-telegram.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor.cli.main", "up"], env=env, cwd=ROOT, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    yield {"env": env, "home": home, "proc": proc}
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    model.terminate()
    model.wait(10)


def channel(env: dict[str, str]) -> dict[str, Any] | None:
    if not (os.path.exists(os.path.join(env["WINTERMUTE_HOME"], "data", "runtime.json"))):
        return None
    for a in status(env)["actors"]:
        if a["name"] == "channel" and a["healthy"] and a["pid"]:
            return a  # type: ignore[no-any-return]
    return None


def test_kill_9_of_the_channel_between_receive_and_send_replies_once(
    up_tg: dict[str, Any], telegram: ThreadedTelegram
) -> None:
    env = up_tg["env"]
    old = wait_for(lambda: channel(env), 60)["pid"]
    wait_for(lambda: telegram.call(lambda: telegram.server.of("getUpdates")), 30)
    update = telegram.say(FRIEND, "slow:3")
    turn_id = f"tg:{123456789}:{update}"
    wait_for(lambda: any(p.get("id") == turn_id for p in stream_payloads(env, "WM_IN")), 30)
    os.kill(old, signal.SIGKILL)  # the turn is stored; the model is still thinking
    wait_for(lambda: (a := channel(env)) and a["pid"] != old, 60)
    wait_for(lambda: telegram.texts_to(FRIEND), 60)
    telegram.say(FRIEND, "after the kill")
    wait_for(lambda: len(telegram.texts_to(FRIEND)) >= 2, 60)
    assert telegram.texts_to(FRIEND) == ["slept 3", "echo: after the kill"]
    assert [p["id"] for p in stream_payloads(env, "WM_IN") if p.get("id") == turn_id] == [turn_id]


def test_a_stalled_poller_is_noticed_and_the_channel_restarted(
    up_tg: dict[str, Any], telegram: ThreadedTelegram
) -> None:
    env = up_tg["env"]
    before = wait_for(lambda: channel(env), 60)
    telegram.call(telegram.server.stall, "getUpdates")
    stalled_at = time.monotonic()
    try:
        after = wait_for(lambda: (a := channel(env)) and a["pid"] != before["pid"] and a, 120)
    finally:
        telegram.call(telegram.server.release, "getUpdates")
    took = time.monotonic() - stalled_at
    assert after["restarts"] > before["restarts"]
    assert "telegram-poll" in (after["last_exit"] or ""), after
    print(f"stalled poller replaced after {took:.0f}s")  # a figure, not an assertion
    telegram.say(FRIEND, "are you back?")
    wait_for(lambda: "echo: are you back?" in telegram.texts_to(FRIEND), 60)
