"""Faults that once stopped a chat for good, against a real `wintermute up`: a model outage
(retried, then one sentence and one owner alert, then /retry), a memory store that cannot
write, and `status` telling the truth about turns in progress."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator

import pytest

from benchmarks.chaos_kit import ROOT, Driver, FakeModel, Instance, read_stream, running_up

pytestmark = pytest.mark.slow

ENV = {
    "WM__SUPERVISOR__STALE_AFTER_SECS": "8",
    "WM__MODELS__RETRY_DEADLINE_SECS": "4",
    "WM__MODELS__BREAKER__COOLDOWN_SECS": "1",  # tried again soon after the outage ends
}


def script_faults(model: FakeModel, faults: list[str]) -> None:
    """Script the model server's next answers (it runs in its own process)."""
    base = model.url.removesuffix("/v1")
    req = urllib.request.Request(f"{base}/_fake/faults", data=json.dumps(faults).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


@pytest.fixture(scope="module")
async def up(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Instance, FakeModel]]:
    async with running_up(tmp_path_factory.mktemp("faults-up") / "home", ENV) as (inst, model):
        yield inst, model


def sh(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), text=True, capture_output=True, timeout=60, **kw)  # type: ignore[call-overload, no-any-return]


async def ask(driver: Driver, text: str, timeout: float = 90) -> str:
    input_id = await driver.send(text)
    assert await driver.wait([input_id], timeout) == [], f"no reply to {text!r}"
    return driver.texts[input_id]


async def delivered(inst: Instance, match: str, timeout: float = 60) -> list[dict[str, object]]:
    """Deliveries to the owner's terminal whose text contains `match`."""
    assert inst.bus is not None
    deadline = time.monotonic() + timeout
    while True:
        events, _ = await read_stream(inst.bus, inst.bus.subjects.stream_evt,
                                      "wm.evt.channel.delivered.owner")
        found = [e for e in events if match in str(e.get("text", ""))]
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


async def test_model_outage_is_retried_then_told_once_and_retry_resends(
    up: tuple[Instance, FakeModel]
) -> None:
    inst, model = up
    assert inst.bus is not None
    driver = Driver(inst.bus)
    script_faults(model, ["500"] * 6)  # two attempts of the llm actor fail (3 SDK tries each)
    assert await ask(driver, "through the storm") == "echo: through the storm"
    script_faults(model, ["500"] * 1000)
    for text in ("first in the outage", "second in the outage"):
        reply = await ask(driver, text)
        assert "couldn't reach any configured model" in reply
        assert "HTTP 500" in reply or "circuit open" in reply  # the breaker opened
    script_faults(model, [])
    await driver.send("/retry")
    assert await delivered(inst, "echo: second in the outage")
    assert await delivered(inst, "answers again")
    alerts = await delivered(inst, "model provider is failing", timeout=0)
    assert len(alerts) == 1  # one per outage, not per failed turn


async def test_memory_store_that_cannot_write_does_not_stop_the_chat(
    up: tuple[Instance, FakeModel]
) -> None:
    inst, _ = up
    assert inst.bus is not None
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    driver = Driver(inst.bus)
    memory = inst.home / "data" / "memory"
    assert (await ask(driver, "remember: before the fault")).startswith("Tool said: Saved")
    if sh("chattr", "-R", "+i", str(memory)).returncode:
        pytest.skip("chattr +i is not permitted here")
    try:
        saved = await ask(driver, "remember: during the fault")
        assert "Not saved" in saved and "memory store failed" in saved
        assert await ask(driver, "still talking?") == "echo: still talking?"
    finally:
        sh("chattr", "-R", "-i", str(memory))


async def test_status_shows_turns_and_a_fresh_record(up: tuple[Instance, FakeModel]) -> None:
    inst, _ = up
    out = sh(sys.executable, "-m", "supervisor.cli.main", "status", "--json", env=inst.env,
             cwd=ROOT)
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["stale"] is False and status["age_secs"] < 10
    assert status["turns"]["stuck_turns"] == 0
    assert status["storage"]["limit"] > 0 and status["storage"]["full"] is False
