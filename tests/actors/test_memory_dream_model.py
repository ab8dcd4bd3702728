"""Dreaming with the model (actors/memory/_dream_model.py): the real memory and llm actors on
the real nats-server, the scripted model behind the real OpenAI SDK. A set of duplicates is
reworded into one fact; an answer that is not one sentence, or a spent day budget, falls back
to the merge that keeps the most confident fact; undo reverts the whole night."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from actors.memory._dream_model import enabled, one_sentence
from bus import Bus
from contracts.config import Config, Settings
from tests.actors.harness import actors
from tests.actors.test_memory_facts import _all, _changes, _propose, _status
from tests.actors.test_memory_learning import _admin, _stored, until
from tests.fakes.llm_servers import FakeLLM

SettingsFor = Callable[..., Settings]
LISBON = ("Lives in Lisbon", "lives in lisbon")
TEA = ("Drinks green tea garbage-dream", "drinks green tea garbage-dream!")


async def _learn_duplicates(settings: Settings, bus: Bus) -> None:
    await _propose(bus, 1, {"content": LISBON[0], "confidence": 0.9},
                   {"content": TEA[0], "confidence": 0.9})
    await _propose(bus, 2, {"content": LISBON[1], "confidence": 0.95},
                   {"content": TEA[1], "confidence": 0.95})

    async def learned() -> bool:
        return len(await _all(settings)) == 4

    await until(learned, 30)


async def test_the_model_rewords_a_set_and_a_bad_answer_falls_back(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model")
    async with actors(settings, "memory", "llm"):
        await _learn_duplicates(settings, bus)
        dreamt = await _admin(settings, "dream")
        after = await _all(settings)
        undone = await _admin(settings, "undo")
        restored = _status(await _all(settings))
        changes = await _changes(bus)
        requests = [c for c in await _stored(bus, bus.subjects.stream_cmd)
                    if c["type"] == "llm.request"]

    new = after["Reworded: lives in lisbon."]
    kept = after[LISBON[1]]  # the more confident one, which the new fact versions
    assert (new.status, new.version, new.replaces, new.confidence) == (
        "active", 2, kept.id, 0.95)
    assert after[LISBON[0]].status == after[LISBON[1]].status == "archived"
    # two sentences are not a fact: that set merged as without a model, nothing lost
    assert (after[TEA[0]].status, after[TEA[1]].status) == ("archived", "active")
    assert "merged 3" in dreamt[0].text and "reworded 1 of 2" in dreamt[0].text
    assert {(r["purpose"], r["role"], r["session"]) for r in requests} == {
        ("dreaming", "memory", "memory-dreaming")}
    assert ("learned", "Reworded: lives in lisbon.") in changes
    assert undone[0].text.startswith("Undid cli:memory:")
    assert restored == {LISBON[0]: "active", LISBON[1]: "active", TEA[0]: "active",
                        TEA[1]: "active", "Reworded: lives in lisbon.": "revoked"}


async def test_a_spent_day_budget_stops_the_model_and_the_merge_goes_on(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    from state import budget

    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__BUDGET__MAX_TOKENS_PER_DAY="100")
    await budget.add(bus, budget.day_key(), 150)
    async with actors(settings, "memory", "llm"):
        await _learn_duplicates(settings, bus)
        dreamt = await _admin(settings, "dream")
        after = _status(await _all(settings))

    assert not fake.requests  # the hard stop: no model call was made
    assert after == {LISBON[0]: "archived", LISBON[1]: "active", TEA[0]: "archived",
                     TEA[1]: "active"}
    assert "reworded 0 of 1" in dreamt[0].text and "budget" in dreamt[0].text


def _config(data: dict[str, Any]) -> Config:
    return msgspec.convert(data, Config)


def test_a_model_is_asked_only_when_one_is_configured_and_only_one_sentence_is_kept() -> None:
    none, key = {}, {"OPENAI_API_KEY": "sk-test"}
    assert not enabled(Config(), none)
    assert enabled(Config(), key)  # the llm actor would pick a model from the key
    assert enabled(_config({"models": {"default": "ollama/qwen3:8b"}}), none)
    assert enabled(_config({"models": {"roles": {"memory": "ollama/qwen3:8b"}}}), none)
    assert not enabled(_config({"memory": {"dream_with_model": False}}), key)
    assert one_sentence(' "The owner lives in Lisbon." ') == "The owner lives in Lisbon."
    for bad in ("", "Lives in Lisbon. Works in Porto.", "line one\nline two", "x" * 201,
                '[{"content": "Lives in Lisbon"}]', "Lives in Lisbon; works in Porto"):
        assert one_sentence(bad) is None, bad
