"""The Helm chart's NATS accounts (charts/wintermute/files/nats-auth.conf, rendered by
supervisor/process/natschart.py) on a real nats-server: it starts, the supervisor provisions,
an actor logs in with its password and works through its own account's imports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bus import Bus
from bus.accounts import api_prefix
from bus.permissions import users
from contracts.config import load_settings
from supervisor.process.natschart import password_variable, render
from supervisor.process.natsserver import EmbeddedNats
from supervisor.process.provision import actor_subscriptions, provision_all


@pytest.fixture
async def chart_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[str]:
    for user in users():  # the chart's Secret, as the NATS pod's environment
        monkeypatch.setenv(password_variable(user), f"pw-{user}-0123456789")
    conf = tmp_path / "nats.conf"
    conf.write_text(render())
    server = EmbeddedNats(tmp_path / "js", config=conf)
    yield await server.start()
    await server.stop()


async def test_the_charts_accounts_run_on_a_real_server(chart_server: str) -> None:
    admin = await Bus(chart_server).connect(user="supervisor", password="pw-supervisor-0123456789")
    planner = await Bus(chart_server).connect(
        user="planner", password="pw-planner-0123456789", api_prefix=api_prefix("planner"))
    try:
        durables = actor_subscriptions(load_settings(Path("/nonexistent-home"), {}))
        await provision_all(admin, durables)
        await planner.js.stream_info("WM_IN")
        await planner.kv_put(planner.subjects.kv_health, "planner", b"{}")
        assert await admin.kv_get(admin.subjects.kv_health, "planner") == b"{}"
        await planner.nc.flush()
        assert not planner.denied, list(planner.denied)
    finally:
        await planner.close()
        await admin.close()
