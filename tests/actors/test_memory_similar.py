"""Learned facts without a key conflict by meaning (actors/memory/_similar.py): the measured
MiniLM pairs behind `[memory] conflict_similarity`, and the strategy applied through the real
memory actor (real LanceDB, the real offline embedding model, the real nats-server)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from actors.memory.embedding import LocalMiniLM
from bus import Bus
from contracts.config import MemoryConfig, Settings
from tests.actors.harness import actors
from tests.actors.test_memory_facts import _all, _changes, _has, _propose, _status
from tests.actors.test_memory_learning import _admin, until

SettingsFor = Callable[..., Settings]

#: (a, b, cosine measured with all-MiniLM-L6-v2 int8) that must conflict ...
CONFLICT = [
    ("my car is red", "my car is blue", 0.735),
    ("The owner lives in Lisbon", "The owner lives in Porto", 0.791),
    ("My favourite colour is green", "My favourite colour is blue", 0.855),
    ("Has two children", "Has three children", 0.811),
]
#: ... and that must not (about other things).
APART = [
    ("my car is red", "I like red wine", 0.387),
    ("The owner's car is red", "The owner likes red wine", 0.591),
    ("Drinks green tea", "Was born in Porto", 0.012),
    ("Lives in Lisbon", "Likes the sea", 0.166),
]


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLM:
    return LocalMiniLM()


def test_the_default_threshold_separates_the_measured_pairs(minilm: LocalMiniLM) -> None:
    cfg = MemoryConfig()
    for a, b, measured in CONFLICT + APART:
        va, vb = np.asarray(minilm.embed([a, b]))
        cosine = float(va @ vb)
        assert cosine == pytest.approx(measured, abs=0.02), (a, b)
        if (a, b, measured) in CONFLICT:
            assert cfg.conflict_similarity <= cosine < cfg.merge_similarity, (a, b, cosine)
        else:
            assert cosine < cfg.conflict_similarity, (a, b, cosine)


def test_conflict_similarity_must_stay_below_merge_similarity() -> None:
    with pytest.raises(ValueError, match="below merge_similarity"):
        MemoryConfig(conflict_similarity=0.95)


async def test_a_keyless_fact_supersedes_the_one_it_contradicts_and_undo_restores_it(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for(WM__MEMORY__CONFLICT="overwrite_latest")
    red, blue, wine = "my car is red", "my car is blue", "I like red wine"
    async with actors(settings, "memory"):
        await _propose(bus, 1, {"content": red, "confidence": 0.9},
                       {"content": wine, "confidence": 0.9})
        await until(lambda: _has(settings, wine, "active"), 30)
        await _propose(bus, 2, {"content": blue, "confidence": 0.9})
        await until(lambda: _has(settings, red, "archived"), 30)
        await _propose(bus, 3, {"content": "My car is blue!", "confidence": 0.9})  # a duplicate
        await until(lambda: _has(settings, "My car is blue!", "active"), 30)
        versions = await _all(settings)
        await _admin(settings, "undo")  # the duplicate's batch
        undone = await _admin(settings, "undo")  # the contradiction's
        restored = _status(await _all(settings))
        changes = await _changes(bus)

    assert (versions[blue].status, versions[blue].version, versions[blue].replaces) == (
        "active", 2, versions[red].id)
    assert versions[wine].status == "active"  # about wine, not the car: no conflict
    # the same words again are a duplicate, not a conflict: kept beside it for dreaming
    assert versions["My car is blue!"].replaces == "" and versions[blue].status == "active"
    assert ("superseded", red) in changes
    assert "Undid" in undone[0].text
    assert restored[red] == "active" and restored[blue] == "revoked"


async def test_ask_puts_a_keyless_contradiction_to_the_owner(
    settings_for: SettingsFor, bus: Bus,
) -> None:
    settings = settings_for()  # memory.conflict = "ask"
    async with actors(settings, "memory"):
        await _propose(bus, 1, {"content": "The owner lives in Lisbon", "confidence": 0.9})
        await until(lambda: _has(settings, "The owner lives in Lisbon", "active"), 30)
        await _propose(bus, 2, {"content": "The owner lives in Porto", "confidence": 0.9})
        await until(lambda: _has(settings, "The owner lives in Porto", "proposed"), 30)
        waiting = (await _all(settings))["The owner lives in Porto"]
        await _admin(settings, "promote", target=waiting.id)
        after = _status(await _all(settings))

    assert waiting.replaces and waiting.version == 2
    assert after == {"The owner lives in Lisbon": "archived",
                     "The owner lives in Porto": "active"}
