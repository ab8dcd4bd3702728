"""Faults through real actors (in-process) and real NATS: a conversation must never die.

A failing memory store, a model outage, a model that never answers, an oversized message and
a dead letter each end (or soften) one step; the session always takes the next message.
Deadlines are made short through config, never waited out with sleeps.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.planner.actor import PlannerActor
from bus import Bus
from bus.codec import encode
from contracts import DeadLetter, Delivered, LlmRequest, Sink, TurnRequest
from contracts.config import Settings
from tests.actors.harness import ALL, Chat, Running, actors, chat
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
NO_LLM = tuple(a for a in ALL if a != "llm")


def model(fake: FakeLLM, **extra: str) -> dict[str, str]:
    return {"WM__MODELS__DEFAULT": "openai/test-model", **extra}


def planner(running: Running) -> PlannerActor:
    actor = running.procs["planner"][0].actor
    assert isinstance(actor, PlannerActor)
    return actor


async def until(check: Callable[[], bool], timeout: float = 30) -> None:
    """Wait (with a deadline) for a fact about an in-process actor to become true."""
    async with asyncio.timeout(timeout):
        while not check():  # noqa: ASYNC110 - the planner's state has no event to await
            await asyncio.sleep(0.05)


@pytest.fixture
def immutable() -> Iterator[Callable[[Path], None]]:
    """Make a folder tree unwritable even for root (chattr +i), undone afterwards."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    done: list[Path] = []

    def apply(path: Path) -> None:
        if subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("chattr +i is not permitted here")
        done.append(path)

    yield apply
    for path in done:
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)


async def test_memory_store_failing_turns_are_still_answered(
    fake: FakeLLM, settings_for: SettingsFor, immutable: Callable[[Path], None]
) -> None:
    settings = settings_for(**model(fake))
    async with actors(settings, *ALL), chat(settings) as c:
        assert (await c.ask("remember: the first fact")).startswith("Tool said: Saved as memory")
        immutable(settings.home / "data" / "memory")
        saved = await c.ask("remember: the store is read-only now", timeout=60)
        assert "Not saved" in saved and "memory store failed" in saved
        assert await c.ask("hello after the failure") == "echo: hello after the failure"


async def test_recall_that_never_answers_is_skipped(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    """No memory actor at all: the optional recall step times out and the turn goes on."""
    settings = settings_for(**model(fake, WM__PLANNER__RECALL_DEADLINE_SECS="1",
                                    WM__PLANNER__SWEEP_EVERY_SECS="0.2"))
    no_memory = tuple(a for a in ALL if a != "memory")
    async with actors(settings, *no_memory), chat(settings) as c:
        assert await c.ask("anyone home?") == "echo: anyone home?"
        assert await c.ask("and again") == "echo: and again"


async def test_model_500s_then_ok_is_answered_after_retry(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    # The SDK tries 3 times per attempt: two attempts of the actor fail, the third answers.
    fake.faults = ["500"] * 6
    settings = settings_for(**model(fake))
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("are you there?", timeout=60) == "echo: are you there?"
    assert fake.calls == 7 and not fake.faults


async def test_malformed_answers_are_retried(fake: FakeLLM, settings_for: SettingsFor) -> None:
    fake.faults = ["garbage"] * 2  # (a third failure in a minute would open the breaker)
    settings = settings_for(**model(fake))
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("say it properly", timeout=60) == "echo: say it properly"


async def test_model_down_one_message_per_turn_one_owner_alert_then_retry(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    fake.faults = ["500"] * 1000
    # (a short breaker cooldown: the provider is tried again soon after it recovers)
    settings = settings_for(**model(fake, WM__MODELS__RETRY_DEADLINE_SECS="2",
                                    WM__MODELS__BREAKER__COOLDOWN_SECS="1"))
    async with actors(settings, *ALL), chat(settings) as owner, chat(settings, "alice") as alice:
        first = await alice.ask("first question", timeout=60)
        second = await alice.ask("second question", timeout=60)
        for reply in (first, second):
            assert "couldn't reach any configured model" in reply
            assert "HTTP 500" in reply or "circuit open" in reply  # the breaker opened
        fake.faults = []
        await alice.ask("/retry")
        retried = await alice.next(("reply",), timeout=60)
        assert retried.text == "echo: second question"
        seen: list[str] = []
        while not any("answers again" in t for t in seen):
            seen.append((await owner.next(("notice",), timeout=30)).text)
    alerts = [t for t in seen if "model provider is failing" in t]
    assert len(alerts) == 1, seen  # one per outage, not one per failed turn
    assert fake.calls > 6  # each turn was retried before it failed


async def test_a_hung_model_ends_the_turn_and_the_session_goes_on(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    """No llm actor: nothing answers and nothing reports progress, so the deadline fires."""
    settings = settings_for(**model(fake, WM__PLANNER__MODEL_SILENCE_SECS="2",
                                    WM__PLANNER__SWEEP_EVERY_SECS="0.2"))
    async with actors(settings, *NO_LLM) as running, chat(settings) as c:
        failed = await c.ask("is anybody listening?", timeout=30)
        assert "could not finish this message" in failed and "/retry" in failed
        assert planner(running).health_info()["active_turns"] == 0
        await running.start("llm")
        await c.ask("/retry")
        assert (await c.next(("reply",), timeout=60)).text == "echo: is anybody listening?"


async def test_a_slow_model_that_reports_progress_is_not_cut_off(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**model(fake, WM__PLANNER__MODEL_SILENCE_SECS="2",
                                    WM__MODELS__PROGRESS_EVERY_SECS="0.5",
                                    WM__PLANNER__SWEEP_EVERY_SECS="0.2"))
    async with actors(settings, *ALL), chat(settings) as c:
        assert await c.ask("slow:5", timeout=60) == "slept 5"


async def test_reset_unsticks_a_session_and_status_shows_the_stuck_turn(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**model(fake, WM__PLANNER__MODEL_SILENCE_SECS="1",
                                    WM__PLANNER__SWEEP_EVERY_SECS="60"))
    async with actors(settings, *NO_LLM) as running, chat(settings) as c:
        await c.say("never answered")
        await c.say("queued behind it")
        await until(lambda: planner(running).health_info()["turns"][:1] != []
                    and planner(running).health_info()["turns"][0]["queued"] == 1)
        # past its (1 s) deadline, and the sweep a minute away: status shows it stuck
        await until(lambda: planner(running).health_info()["stuck_turns"] == 1)
        info = planner(running).health_info()
        assert info["turns"][0]["phase"] == "llm" and info["turns"][0]["stuck"]
        answer = await c.ask("/reset")
        assert "reset" in answer and "in progress" in answer
        await until(lambda: planner(running).health_info()["active_turns"] == 0)
        await running.start("llm")
        assert await c.ask("fresh start") == "echo: fresh start"


async def test_oversized_message_ends_its_turn_and_the_next_one_works(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    settings = settings_for(**model(fake))
    async with actors(settings, *ALL), chat(settings) as c:
        for i in range(2):  # history keeps them shortened: the chat does not grow past limits
            reply = await c.ask(f"big {i} " + "x" * 120_000, timeout=60)
            assert reply.startswith(f"echo: big {i}")
        huge = await c.ask("huge " + "y" * 600_000, timeout=60)
        assert "too large" in huge
        assert await c.ask("small again") == "echo: small again"


async def test_a_dead_letter_of_the_active_turn_ends_it(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    """The llm gave up on the turn's request (as the consumer does after its last attempt)."""
    settings = settings_for(**model(fake))
    async with actors(settings, *NO_LLM) as running, chat(settings) as c:
        input_id = await c.say("doomed")
        turn_id = f"terminal:{input_id}"
        await until(lambda: [t["phase"] for t in planner(running).health_info()["turns"]]
                    == ["llm"])
        req = LlmRequest(id=f"{turn_id}:llm:0", session="terminal:owner", turn_id=turn_id,
                         step=0, messages=[])
        letter = DeadLetter(id="dlq:test", actor="llm", reason="handler failed 5 times",
                            subject="x", stream="x", stream_seq=1, deliveries=6,
                            payload=encode(req).decode())
        await bus.publish(bus.subjects.dlq("llm"), letter)
        failed = await c.next(("reply",), timeout=30)
        assert "the llm actor gave up on it" in failed.text
        await running.start("llm")
        assert await c.ask("next one") == "echo: next one"


async def test_one_sessions_burst_does_not_hold_up_another(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    """Ordering, not wall time: the owner's message is answered before the burst is through."""
    settings = settings_for(**model(fake, WM__CHANNELS__USER_RATE_PER_MIN="0"))
    async with actors(settings, *ALL), chat(settings) as owner, chat(settings, "alice") as alice:
        burst = [await alice.say(f"burst {i}") for i in range(30)]
        await owner.say("owner here")
        first = await owner.next(("reply",), timeout=120)
        assert first.text == "echo: owner here"
        answered = [d for d in await drain(alice) if d.kind == "reply"]
        assert len(answered) < len(burst)  # the owner did not wait for the whole burst
        for _ in range(len(burst) - len(answered)):
            answered.append(await alice.next(("reply",), timeout=120))
    assert [d.text for d in answered] == [f"echo: burst {i}" for i in range(30)]


async def drain(c: Chat) -> list[Delivered]:
    """Everything delivered to this chat so far and not yet asked for."""
    out, c.backlog = c.backlog, []
    while not c.client.inbox.empty():
        out.append(c.client.inbox.get_nowait())
    return out


async def test_a_turn_the_planner_gave_up_on_is_answered_with_a_sentence(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus
) -> None:
    """The planner dead-lettered a turn itself (it failed on it every time): the sender hears."""
    settings = settings_for(**model(fake), WM__PLANNER__TOOLS_WAIT_SECS="0")  # no executor
    async with actors(settings, "planner", "channel"), chat(settings) as c:
        turn = TurnRequest(id="terminal:lost-turn", session="terminal:owner",
                           principal="terminal:owner", text="never accepted",
                           reply_to=Sink(channel="terminal", chat="owner"), is_owner=True)
        letter = DeadLetter(id="dlq:test-turn", actor="planner", reason="handler failed 5 times",
                            subject="x", stream="x", stream_seq=1, deliveries=6,
                            payload=encode(turn).decode())
        await bus.publish(bus.subjects.dlq("planner"), letter)
        said = await c.next(("reply",), timeout=30)
    assert said.ref == "terminal:lost-turn" and "could not take this message" in said.text


async def test_a_huge_message_waiting_in_the_queue_is_the_one_dropped(
    fake: FakeLLM, settings_for: SettingsFor
) -> None:
    """Sent all at once: the big ones queue behind each other; the huge waiting one is dropped
    with a sentence, not the turn in progress, and the rest are answered."""
    settings = settings_for(**model(fake))
    async with actors(settings, *ALL), chat(settings) as c:
        ids = [await c.say(f"big {i} " + "x" * 120_000) for i in range(2)]
        ids.append(await c.say("huge " + "y" * 600_000))
        ids.append(await c.say("small after them"))
        got = {}
        while len(got) < len(ids):
            d = await c.next(("reply",), timeout=120)
            got[d.ref.removeprefix("terminal:")] = d.text
    assert got[ids[0]].startswith("echo: big 0") and got[ids[1]].startswith("echo: big 1")
    assert "too large" in got[ids[2]] and got[ids[3]] == "echo: small after them"
