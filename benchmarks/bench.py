"""`just bench`: every figure of issue #14 in one run, each next to its goal and the machine's
load average, written to JSON as well. Figures, never assertions.

Each group of figures is a function in a benchmarks module returning a list of figure dicts
(`benchmarks.hot.figure`: figure, value, goal, met, load, and any detail). A group whose
module or function is missing, or that fails, prints "not measured" with the reason instead
of a number: nothing is made up.

    python -m benchmarks.bench [--json PATH] [--only hot,startup,...]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

#: (group, module, function, what it covers): the figures of issue #14's table.
GROUPS: tuple[tuple[str, str, str, str], ...] = (
    ("hot", "benchmarks.hot", "figures",
     "turn overhead, llm actor, 200 ms ratio, 1,000 sessions, turns/s at 1/2/4 llm replicas"),
    ("llm-call", "benchmarks.llm_call", "figures",
     "CPU per model call in the llm's request path, SDK create vs prebuilt JSON"),
    ("startup", "benchmarks._rows", "startup",
     "`up` -> all actors healthy (fresh, then existing home), import time per actor, idle memory"),
    ("recall", "benchmarks._rows", "recall",
     "memory recall at 1k/10k/100k, and 100k all the owner's with recall@5"),
    ("sandbox", "benchmarks._rows", "sandbox", "`execute_command true` in bubblewrap vs direct"),
)

#: Figures of the table that no group measures yet, with the reason.
UNMEASURED = (
    ("start-up under an artificial CPU load", "comes up and answers",
     "not a figure: tests/e2e/test_busy_machine.py starts `up` beside two busy loops pinned "
     "to the cores and asserts a turn is answered with no restart (it runs in CI)"),
)


def _not_measured(group: str, what: str, why: str) -> dict[str, Any]:
    return {"figure": f"{group}: {what}", "value": None, "goal": "", "met": None,
            "load": round(os.getloadavg()[0], 2), "not_measured": why}


async def run_group(group: str, module: str, function: str, what: str) -> list[dict[str, Any]]:
    """One group's figures, or one 'not measured' row saying why there are none."""
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        return [_not_measured(group, what, f"no {module} module here ({exc})")]
    fn = getattr(mod, function, None)
    if fn is None:
        return [_not_measured(group, what, f"{module} has no {function}() yet; "
                              f"`python -m {module}` prints its own figures")]
    try:
        # a blocking group runs in a thread: it may start event loops of its own
        out = await fn() if inspect.iscoroutinefunction(fn) else await asyncio.to_thread(fn)
    except Exception as exc:  # noqa: BLE001 - one group failing must not lose the others
        traceback.print_exc()
        return [_not_measured(group, what, f"{module}.{function}() failed: {exc!r}")]
    figs = out if isinstance(out, list) else [out]
    return [{"group": group, **f} for f in figs]


def _show(f: dict[str, Any]) -> str:
    mark = {True: "met", False: "NOT met", None: ""}[f.get("met")]
    value = f.get("not_measured") or f.get("value")
    extra = {k: v for k, v in f.items() if k not in (
        "figure", "value", "goal", "met", "load", "group", "not_measured", "profile_top")}
    tail = f"  {extra}" if extra else ""
    line = (f"{f['figure'][:72]:72} {value!s:>22}  goal {f.get('goal') or '-':>10}  "
            f"{mark:7} load {f.get('load')}{tail}")
    for proc, top in (f.get("profile_top") or {}).items():  # where the CPU went
        rows = top if isinstance(top, list) else [top]
        line += f"\n    profile {proc}: " + "; ".join(rows)
    return line


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default="bench.json", help="where to write the figures")
    parser.add_argument("--only", default="", help="comma-separated groups: "
                        + ", ".join(g[0] for g in GROUPS))
    args = parser.parse_args(argv)
    only = {g for g in args.only.split(",") if g}
    t0 = time.perf_counter()
    figures: list[dict[str, Any]] = []
    for group, module, function, what in GROUPS:
        if only and group not in only:
            continue
        print(f"== {group}: {what}", flush=True)
        for f in await run_group(group, module, function, what):
            figures.append(f)
            print(_show(f), flush=True)
    if not only:
        for name, goal, why in UNMEASURED:
            f = {"figure": name, "value": None, "goal": goal, "met": None,
                 "load": round(os.getloadavg()[0], 2), "not_measured": why}
            figures.append(f)
            print(_show(f))
    took = time.perf_counter() - t0
    report = {"took_secs": round(took, 1), "cpus": os.cpu_count(), "python": sys.version.split()[0],
              "machine": platform.machine(), "loadavg_end": os.getloadavg(), "figures": figures}
    await asyncio.to_thread(Path(args.json).write_text, json.dumps(report, indent=2, default=str))
    print(f"{len(figures)} figures in {took:.0f} s; written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
