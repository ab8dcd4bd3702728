"""`[actors.<name>] replicas`: which actors may scale, and replica 0 keeping the others up."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from actors.replicas import REPLICA_VAR, Replicas
from contracts.config import ConfigError, load_settings
from tests.actors.test_faults import until


def test_replicas_are_configured_per_actor(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[actors.llm]\nreplicas = 4\n")
    assert load_settings(tmp_path, {}).config.actors["llm"].replicas == 4
    env = {"WM__ACTORS__LLM__REPLICAS": "2"}
    assert load_settings(tmp_path, env).config.actors["llm"].replicas == 2


@pytest.mark.parametrize(("env", "says"), [
    ({"WM__ACTORS__PLANNER__REPLICAS": "2"}, "applies a session's events in order"),
    ({"WM__ACTORS__LMM__REPLICAS": "2"}, "unknown actor in 'actors.lmm'"),
    ({"WM__ACTORS__LLM__REPLICAS": "0"}, "'actors.llm.replicas': 0; use 1 to 32"),
])
def test_replicas_where_they_would_break_order_are_refused_with_the_reason(
        tmp_path: Path, env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match="config.toml") as err:
        load_settings(tmp_path, env)
    assert says in str(err.value)


async def test_replica_zero_keeps_the_others_running_and_stops_them() -> None:
    reps = Replicas("llm", 3)
    # A stand-in process that reports its replica number and waits to be stopped.
    reps.command = [sys.executable, "-c",
                    f"import os, time; print(os.environ['{REPLICA_VAR}'], flush=True); "
                    "time.sleep(120)"]
    task = asyncio.create_task(reps.run())
    try:
        await until(lambda: len(reps.pids()) == 2)
        assert sorted(reps.pids()) == ["1", "2"]
        first = reps.pids()["1"]
        os.kill(first, signal.SIGKILL)  # a replica dies: it is started again
        await until(lambda: reps.pids().get("1") not in (None, first))
        assert reps.restarts == 1
        procs = list(reps.procs.values())
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert all(p.returncode is not None for p in procs)  # stopped with replica 0
