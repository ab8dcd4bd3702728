"""Memory search latency at 1k, 10k and 100k memories: the real store (LanceDB, its indexes,
hybrid full text + vectors fused by rank) with the real offline embedding model for queries.

Stored rows get random unit vectors (embedding 100k texts would take minutes and the cost of a
search does not depend on the vector values); each query is embedded by the model, inside the
timed search, as a recall does. Rows are spread over 50 users' scopes; queries read the
owner's scopes (2 % of the rows), so the scope prefilter is exercised. Figures, not assertions.

    python -m benchmarks.memory_search [SIZES...]     (default: 1000 10000 100000)
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actors.memory.embedding import LocalMiniLM
from actors.memory.store import MemoryStore
from contracts.memory import MemoryRecord

QUERIES = 60
WORDS = ("car boat house garden dentist meeting invoice server deploy backup password train "
         "flight hotel birthday dinner recipe coffee guitar book doctor school office report "
         "budget kubernetes python database laptop phone wifi printer camera bicycle").split()
PLACES = "Lisbon Porto Berlin Paris Oslo Tokyo Lima Cairo Rome Dublin".split()
OWNER = ["global", "user:owner", "session:telegram:111"]


def _text(rng: random.Random, i: int) -> str:
    a, b = rng.sample(WORDS, 2)
    return f"note {i}: the {a} and the {b} are in {rng.choice(PLACES)} since {1990 + i % 35}"


def _unit(rng: random.Random, dim: int) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(size: int, model: LocalMiniLM, root: Path) -> dict[str, Any]:
    """Search latencies (ms) at `size` memories: queries with keyword hits, and misses (no
    word of the query is stored: the full-text leg must not scan)."""
    rng = random.Random(size)
    store = MemoryStore(root / f"m{size}", model)
    store.save("my car is a red Volvo", scope="user:owner", id="car")  # claims the vectors
    records = [MemoryRecord(id=f"r{i}", content=_text(rng, i), created=float(i),
                            scope="user:owner" if i % 50 == 0 else f"user:telegram:{i % 50}")
               for i in range(size - 1)]
    t0 = time.perf_counter()
    store.add_many(records, [_unit(rng, model.dim) for _ in records], batch=5000)
    loaded = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.optimize()  # what the actor does every 50 writes: index everything
    indexed = time.perf_counter() - t0
    queries = [f"where is my {rng.choice(WORDS)} in {rng.choice(PLACES)}" for _ in range(QUERIES)]
    store.search(queries[0], 5, OWNER)  # warm caches and the model
    hits, misses = [], []
    cpu0 = time.process_time()  # every thread's CPU (LanceDB's and onnxruntime's too)
    for q in queries:
        t0 = time.perf_counter()
        store.search(q, 5, OWNER)
        hits.append((time.perf_counter() - t0) * 1000)
    for i in range(QUERIES // 2):
        t0 = time.perf_counter()
        store.search(f"zzqx{i} qqzz{i}", 5, OWNER)  # no word matches: the old full scan
        misses.append((time.perf_counter() - t0) * 1000)
    cpu_ms = (time.process_time() - cpu0) * 1000 / (len(hits) + len(misses))
    car = store.search("automobile", 1, OWNER)
    return {"size": size, "p50_ms": round(_pct(hits, 0.5), 2), "p95_ms": round(_pct(hits, 0.95), 2),
            "miss_p50_ms": round(_pct(misses, 0.5), 2), "miss_p95_ms": round(_pct(misses, 0.95), 2),
            "cpu_ms": round(cpu_ms, 2),
            "load_s": round(loaded, 1), "index_s": round(indexed, 1),
            "semantic_ok": bool(car and car[0].id == "car"), "machine_load": os.getloadavg()[0]}


def figures(sizes: list[int] | None = None) -> list[dict[str, Any]]:
    """One dict per size (default 1k, 10k, 100k memories); goal: p50 <= 10 ms at 100k."""
    model = LocalMiniLM()
    model.embed(["warm up"])
    with tempfile.TemporaryDirectory() as tmp:
        return [run(size, model, Path(tmp)) for size in sizes or [1_000, 10_000, 100_000]]


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 10_000, 100_000]
    model = LocalMiniLM()
    t0 = time.perf_counter()
    one = model.embed(["warm up"])
    print(f"embedding model {model.name}: loaded in {time.perf_counter() - t0:.2f} s, "
          f"{len(one[0])} dimensions")
    t0 = time.perf_counter()
    for _ in range(20):
        model.embed(["what colour is my car?"])
    print(f"embedding one query: {(time.perf_counter() - t0) / 20 * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            f = run(size, model, Path(tmp))
            print(f"memory search, {size:>7,} memories: p50 {f['p50_ms']:5.1f} ms, "
                  f"p95 {f['p95_ms']:5.1f} ms; miss p50 {f['miss_p50_ms']:5.1f} ms; "
                  f"CPU {f['cpu_ms']:5.1f} ms a search "
                  f"(goal p50 <= 10 ms at 100k; load {f['load_s']} s, index {f['index_s']} s; "
                  f"'automobile' finds the Volvo: {'yes' if f['semantic_ok'] else 'NO'}; "
                  f"machine load {f['machine_load']:.1f})", flush=True)


if __name__ == "__main__":
    main()
