"""The figures of the start-up, recall and sandbox benchmarks as rows of `just bench`'s table.

Those modules are also run on their own (`python -m benchmarks.startup` …) and return their
own shapes; these functions turn them into `benchmarks.hot.figure` rows, each next to its goal
from issue #14. They are blocking (each starts its own event loop where it needs one), so
bench.py runs them in a thread.
"""

from __future__ import annotations

from typing import Any

from benchmarks.hot import figure

RECALL_AT_5 = 0.95  # share of the exact five nearest an approximate vector leg must return


def startup() -> list[dict[str, Any]]:
    from benchmarks import startup as s

    out = s.figures()
    goals = out["goals"]
    rows = []
    for run in out["up"]:
        actors: dict[str, dict[str, float]] = run["actors"]
        slowest = max(actors, key=lambda name: actors[name]["health_s"], default="")
        rows.append(figure(f"`up` -> all actors healthy, {run['home']} home (s)",
                           run["all_healthy_s"], f"<= {goals['all_healthy_s']}",
                           run["all_healthy_s"] <= goals["all_healthy_s"],
                           runtime_json_s=run["runtime_s"], last=slowest))
    last = out["up"][-1]
    idle = last["idle"]
    rows.append(figure("idle memory of all processes, RSS / PSS (MB)",
                       f"{last['idle_rss_mb']} / {last['idle_pss_mb']}",
                       f"<= {goals['idle_rss_mb']} RSS", last["idle_rss_mb"] <= goals["idle_rss_mb"],
                       rss_mb={k: v["rss_mb"] for k, v in sorted(
                           idle.items(), key=lambda kv: -kv[1]["rss_mb"])},
                       floor_per_process=last["floor"]))
    imports = out["imports"]
    worst = max(imports.items(), key=lambda kv: kv[1]["import_s"])
    rows.append(figure("import of an actor's code before it connects, slowest (s)",
                       worst[1]["import_s"], f"<= {goals['import_s']}",
                       worst[1]["import_s"] <= goals["import_s"], actor=worst[0],
                       import_s={k: v["import_s"] for k, v in imports.items()}))
    return rows


def recall() -> list[dict[str, Any]]:
    from benchmarks import memory_search as m

    rows = []
    for r in m.figures():
        size = r["size"]
        goal_met = r["p50_ms"] <= 10 and r["miss_p50_ms"] <= 10 if size >= 100_000 else None
        rows.append(figure(f"memory recall, {size:,} memories: p50 hit / miss (ms)",
                           f"{r['p50_ms']} / {r['miss_p50_ms']}",
                           "<= 10" if size >= 100_000 else "-", goal_met,
                           p95_ms=r["p95_ms"], miss_p95_ms=r["miss_p95_ms"],
                           semantic_ok=r["semantic_ok"]))
    # the owner's scopes hold every memory (real sentences: the first run embeds them, ~10 min)
    for r in m.all_owner([100_000]):
        rows.append(figure(f"memory recall, {r['size']:,} memories all the owner's: p50 (ms)",
                           r["p50_ms"], "<= 10", r["p50_ms"] <= 10, p95_ms=r["p95_ms"],
                           cpu_ms=r["cpu_ms"], approximate=r["approximate"]))
        rows.append(figure(f"memory recall, {r['size']:,} all the owner's: vector recall@5",
                           r["recall_at_5"], f">= {RECALL_AT_5}",
                           r["recall_at_5"] >= RECALL_AT_5))
    return rows


def sandbox() -> list[dict[str, Any]]:
    from benchmarks import sandbox_overhead as sb

    try:
        out = sb.figures()
    finally:
        sb._leave_cpuacct()
    if "skipped" in out:
        return [figure("`execute_command true` in bubblewrap over direct (ms)", None, "<= 8",
                       None, not_measured=out["skipped"])]
    rows = []
    for label in ("bwrap_network_none", "bwrap_network_proxy"):
        f = out[label]
        rows.append(figure(f"`execute_command true`, {label} over direct: wall / CPU (ms)",
                           f"{f['over_direct_ms']} / {f['cpu_over_direct_ms']}", "<= 8",
                           f["over_direct_ms"] <= 8, p50_ms=f["p50_ms"],
                           direct_p50_ms=out["direct"]["p50_ms"]))
    return rows
