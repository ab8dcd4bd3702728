"""Varied memory-like sentences and their real embeddings (the offline MiniLM), cached as .npy.

Why real embeddings: an IVF index's approximate search is judged by how often it returns the
exact nearest neighbours, and that depends on how the vectors cluster. Random unit vectors do
not cluster at all (the worst case for IVF) and are not what users store; MiniLM vectors of
sentences about people, places, chores and work do. Embedding takes ~3 ms a sentence on one
core, so the vectors are computed once and kept under /tmp (WM_BENCH_CACHE to move them).

    python -m benchmarks._corpus N      (embeds N sentences into the cache, with progress)
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path
from typing import Any

VERSION = 1  # bump when the sentences change: the cache file name carries it
PEOPLE = ("Anna Ben Carla David Elena Farid Greta Hugo Ines Jonas Keiko Luis Maya Nils Olga "
          "Pedro Quentin Rosa Sami Tomas Uma Victor Wen Ximena Yusuf Zoe").split()
RELATIONS = ("sister brother mother father cousin colleague neighbour friend boss dentist "
             "landlord partner son daughter aunt uncle teacher accountant").split()
CITIES = ("Lisbon Porto Berlin Paris Oslo Tokyo Lima Cairo Rome Dublin Madrid Vienna Prague "
          "Warsaw Seoul Austin Denver Toronto Nairobi Sydney Boston Munich Milan Zurich").split()
JOBS = ("nurse engineer lawyer teacher chef pilot designer plumber architect baker "
        "journalist pharmacist electrician translator farmer researcher").split()
FOODS = ("sushi pasta ramen tacos oatmeal salad curry pizza dumplings falafel pho lasagna "
         "pancakes risotto paella burritos").split()
DEVICES = ("laptop phone router printer camera tablet smartwatch television NAS dishwasher "
           "thermostat e-reader").split()
ROOMS = "kitchen attic garage basement office hallway bedroom balcony cellar study".split()
TOPICS = ("budget hiring roadmap migration outage invoice contract marketing security audit "
          "onboarding pricing backups kubernetes database release taxes insurance mortgage "
          "vacation wedding renovation garden school").split()
SERVICES = ("api gateway billing search auth payments worker scheduler frontend ingest "
            "notifications reporting").split()
REASONS = ("a missing environment variable", "a full disk", "an expired certificate",
           "a timeout talking to the database", "a typo in the config", "an out of memory kill",
           "a failing health check", "a dependency conflict")
HOBBIES = ("climbing chess jazz gardening running pottery sailing photography knitting "
           "birdwatching cycling painting surfing baking").split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = ("January February March April May June July August September October November "
          "December").split()
VEHICLES = "car motorbike bicycle van scooter camper".split()
CHORES = ("water the plants", "take out the recycling", "renew the passport", "pay the rent",
          "call the insurance", "back up the photos", "change the smoke alarm battery",
          "book the dentist", "feed the cat", "defrost the freezer")

TEMPLATES = (
    "My {rel} {p} lives in {c} and works as a {job}.",
    "{p} prefers {f} for dinner and cannot stand {f2}.",
    "The {dev} in the {room} keeps disconnecting from the wifi since {m}.",
    "Meeting with {p} about the {t} on {d} at {h} o'clock in {c}.",
    "Remember to {chore} before {d} and tell {p} in {c}.",
    "{p}'s birthday is on {m} {n}; my {rel} says they love {hob}.",
    "The deploy of the {s} service failed on {d} because of {r}; {p} is on it.",
    "My {veh} needs a service at the garage near {c} in {m}, {p} can drive me.",
    "{p} recommended a book about {t} and {hob} written by a {job} from {c}.",
    "The doctor told {p} to eat less {f} and go {hob} twice a week.",
    "Flight from {c} to {c2} on {m} {n}, seat {n}{letter}, with {p}.",
    "Recipe from {p}: {f} with {f2}, ready in {n} minutes.",
    "The spare key for the {room} is with my {rel} {p} until {m} {n}.",
    "I pay the {t} bill every {d}; last time it was {n}0 euros.",
    "The {s} dashboard shows {r} on the {dev} since {d} {h}:00.",
    "We decided to postpone the {t} until {m} because {p} is in {c}.",
    "{p} the {job} fixed the {dev} in the {room} for {n}0 euros.",
    "I'm learning {hob} with my {rel} {p} on {d} evenings in {c}.",
)
QUERY_TEMPLATES = (
    "where does my {rel} live", "what does {p} do for work", "what food does {p} like",
    "when is {p}'s birthday", "why did the {s} deploy fail", "what is wrong with the {dev}",
    "when is the {t} meeting", "what do I have to do before {d}",
    "who has the key to the {room}", "when do I fly to {c2}", "how do I cook {f}",
    "what did the doctor say", "how much is the {t} bill", "what hobby am I learning",
    "is the {t} postponed", "which garage services my {veh}",
)


def _fill(rng: random.Random, template: str) -> str:
    return template.format(
        rel=rng.choice(RELATIONS), p=rng.choice(PEOPLE), c=rng.choice(CITIES),
        c2=rng.choice(CITIES), job=rng.choice(JOBS), f=rng.choice(FOODS), f2=rng.choice(FOODS),
        dev=rng.choice(DEVICES), room=rng.choice(ROOMS), m=rng.choice(MONTHS),
        t=rng.choice(TOPICS), d=rng.choice(DAYS), h=rng.randint(7, 19), chore=rng.choice(CHORES),
        n=rng.randint(1, 28), hob=rng.choice(HOBBIES), s=rng.choice(SERVICES),
        r=rng.choice(REASONS), veh=rng.choice(VEHICLES), letter=rng.choice("ABCDEF"))


def sentences(n: int, seed: int = 7) -> list[str]:
    """`n` memory-like sentences (deterministic for a seed)."""
    rng = random.Random(seed)
    return [_fill(rng, rng.choice(TEMPLATES)) for _ in range(n)]


def queries(n: int, seed: int = 11) -> list[str]:
    """`n` questions a user might ask about such memories."""
    rng = random.Random(seed)
    return [_fill(rng, rng.choice(QUERY_TEMPLATES)) for _ in range(n)]


def cache_dir() -> Path:
    path = Path(os.environ.get("WM_BENCH_CACHE", "/tmp/wintermute-bench"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def embedded(n: int, model: Any, progress: bool = False) -> Any:
    """MiniLM vectors of `sentences(n)` as an (n, dim) float32 array, from the cache when an
    earlier run made at least `n` of them (a larger cache serves its first `n` rows)."""
    import numpy as np

    cache = cache_dir()
    for f in sorted(cache.glob(f"minilm-v{VERSION}-*.npy"),
                    key=lambda p: int(p.stem.rsplit("-", 1)[1])):
        if int(f.stem.rsplit("-", 1)[1]) >= n:
            return np.load(f, mmap_mode="r")[:n]
    texts = sentences(n)
    out = np.empty((n, model.dim), dtype=np.float32)
    t0 = time.perf_counter()
    for start in range(0, n, 256):
        out[start : start + 256] = model.embed(texts[start : start + 256])
        if progress and start % 5120 == 0:
            print(f"embedded {start:,}/{n:,} in {time.perf_counter() - t0:.0f} s", flush=True)
    tmp = cache / f"minilm-v{VERSION}-{n}.tmp.npy"
    np.save(tmp, out)
    tmp.rename(cache / f"minilm-v{VERSION}-{n}.npy")
    return out


if __name__ == "__main__":
    from actors.memory.embedding import LocalMiniLM

    vectors = embedded(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000, LocalMiniLM(), True)
    print(f"{len(vectors):,} vectors in {cache_dir()}")
