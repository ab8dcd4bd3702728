"""Tests for the LanceDB-backed memory store (real LanceDB in a temp directory), full text
only here; hybrid search with the real embedding model is in test_memory_hybrid.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from actors.memory.store import MemoryStore

HERE = ("session:", "session:s1")  # memories saved without a scope live in their session


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "mem")


def test_save_then_search_finds_it(store: MemoryStore) -> None:
    mid = store.save(
        "The user's favourite colour is teal", kind="fact", tags=["prefs"], session="s1"
    )
    store.save("To deploy, run `just deploy` and watch grafana", kind="procedure")
    hits = store.search("favourite colour", scopes=HERE)
    assert hits and hits[0].id == mid
    assert hits[0].kind == "fact"
    assert hits[0].content == "The user's favourite colour is teal"
    assert hits[0].score > 0
    proc = store.search("how do I deploy", scopes=HERE)
    assert proc[0].kind == "procedure"


def test_search_uses_native_fts(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    store.save("She keeps three cats and a parrot", id="pets")
    with caplog.at_level("WARNING", logger="actors.memory.store"):
        hits = store.search("cat", scopes=HERE)  # only the stemming FTS index matches "cat" to "cats"
        odd = store.search('what\'s "up"? (test) OR AND *', scopes=HERE)
    assert [h.id for h in hits] == ["pets"]
    assert odd == []
    assert not caplog.records  # FTS path did not fail over to the keyword fallback


def test_save_generates_id_and_rejects_empty(store: MemoryStore) -> None:
    a = store.save("first")
    b = store.save("second")
    assert a and b and a != b
    with pytest.raises(ValueError):
        store.save("   ")
    with pytest.raises(ValueError):
        store.save("x", kind="bogus")


def test_save_is_idempotent_by_id(store: MemoryStore) -> None:
    assert store.save("remember the milk", id="m-1") == "m-1"
    assert store.save("remember the milk", id="m-1") == "m-1"
    assert store.count() == 1
    assert len(store.search("milk", scopes=HERE)) == 1


def test_reopen_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "mem"
    first = MemoryStore(path)
    first.save("The wifi password is hunter2", kind="note", id="wifi")
    del first
    again = MemoryStore(path)
    also = MemoryStore(path)  # provisioning twice is harmless
    assert again.count() == 1 == also.count()
    hits = again.search("wifi password", scopes=HERE)
    assert [h.id for h in hits] == ["wifi"]
    assert hits[0].kind == "note"


def test_counts(store: MemoryStore) -> None:
    assert store.count() == 0
    assert store.counts_by_kind() == {}
    store.save("a fact", kind="fact")
    store.save("another fact", kind="fact")
    store.save("a skill", kind="skill")
    store.save("an episode", kind="episode")
    assert store.count() == 4
    assert store.counts_by_kind() == {"fact": 2, "skill": 1, "episode": 1}


def test_forget_hides_from_search(store: MemoryStore) -> None:
    store.save("The dentist appointment is on Tuesday", id="dentist")
    store.save("Dentist phone number is 555-0100", id="phone")
    assert store.forget("dentist") is True
    assert store.forget("dentist") is False
    assert store.forget("missing") is False
    assert [h.id for h in store.search("dentist appointment", scopes=HERE)] == ["phone"]
    assert store.count() == 1
    # redelivery of the original save must not resurrect it
    store.save("The dentist appointment is on Tuesday", id="dentist")
    assert store.count() == 1


@pytest.mark.parametrize(
    "query",
    [
        'what\'s "up"? (test) OR AND *',
        '"unbalanced',
        "id = 'x'; DROP TABLE memories; --",
        "+-&&||!(){}[]^~*?:\\/",
        "émoji 🚀 naïve",
        "the",
        "",
        "   ",
    ],
)
def test_odd_queries_do_not_raise(store: MemoryStore, query: str) -> None:
    store.save("what is up with the test suite", id="t")
    hits = store.search(query, scopes=HERE)
    assert isinstance(hits, list)


def test_odd_ids_are_quoted(store: MemoryStore) -> None:
    store.save("quoted id memory", id='it\'s "odd"')
    assert store.save("quoted id memory", id='it\'s "odd"') == 'it\'s "odd"'
    assert store.count() == 1
    assert store.forget('it\'s "odd"') is True


def test_ranking_puts_more_relevant_first(store: MemoryStore) -> None:
    store.save("Python is a programming language", id="generic")
    store.save("Python asyncio event loop tips: never block the event loop", id="asyncio")
    store.save("Gardening notes: water the tomatoes daily", id="garden")
    hits = store.search("python asyncio event loop", scopes=HERE)
    assert hits[0].id == "asyncio"
    assert "garden" not in [h.id for h in hits]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_search_after_optimize_and_many_saves(store: MemoryStore) -> None:
    for i in range(60):  # crosses OPTIMIZE_EVERY, so some rows are indexed and some are not
        store.save(f"filler memory number {i} about nothing", id=f"f{i}")
    store.save("The launch code is zebra-42", id="launch")
    store.optimize()
    store.save("A fresh memory about quokkas", id="quokka")
    assert store.search("launch code", scopes=HERE)[0].id == "launch"
    assert store.search("quokkas", scopes=HERE)[0].id == "quokka"
    assert store.count() == 62


def test_timing_report(store: MemoryStore, capsys: pytest.CaptureFixture[str]) -> None:
    n = 40
    t0 = time.perf_counter()
    for i in range(n):
        store.save(f"timing memory {i} mentions topic{i % 7}", id=f"t{i}")
    t1 = time.perf_counter()
    for i in range(n):
        assert store.search(f"topic{i % 7}", scopes=HERE)
    t2 = time.perf_counter()
    with capsys.disabled():
        print(
            f"\n[memory store] save {1000 * (t1 - t0) / n:.1f} ms/call, "
            f"search {1000 * (t2 - t1) / n:.1f} ms/call over {n} rows"
        )
