"""Least privilege on the bus: a real nats-server started with the config `up` generates.

Each actor connects as its own user. What it must not do is refused by the server (a
permissions violation, and nothing delivered or stored); what it must do works.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
import nats
import pytest
from nats.aio.client import Client

from actors import ACTORS
from actors.channel.actor import ADAPTERS
from bus import Bus, Subscription, ensure_consumer
from bus.history import read_stream
from bus.permissions import CHANNELS, CLI, GRANTS, SUPERVISOR, scope, scratch_prefix
from contracts import HoldRelease
from contracts.config import load_settings
from contracts.records import TaskHold
from state.holds import enable_task, put_task_status, release_tool, tool_status
from supervisor.process import natsauth
from supervisor.process.home import init_home
from supervisor.process.natsserver import EmbeddedNats
from supervisor.process.provision import actor_subscriptions, provision_all

TESTER = "tester"  # a test-only user that may do anything, to probe what others receive


@dataclass
class Secured:
    """A nats-server with the generated users, provisioned like `up` does."""

    url: str
    home: Path
    auth: natsauth.EmbeddedAuth
    durables: dict[str, list[Subscription]]
    tester_password: str

    async def bus(self, user: str) -> Bus:
        """A Bus connected as one of the generated users."""
        login, password = self.auth.login(user)
        return await Bus(self.url, name=f"test-{user}").connect(user=login, password=password)


@pytest.fixture(scope="module")
async def secured(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Secured]:
    home = tmp_path_factory.mktemp("secured") / "home"
    init_home(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WM__")}
    env["WM__CHANNELS__TELEGRAM__PAIRING"] = "true"  # so that durable is granted too
    settings = load_settings(home, env)
    durables = actor_subscriptions(settings)
    auth = natsauth.prepare(home, Bus("").subjects, durables)
    # The generated config plus one unrestricted test user.
    config = json.loads(auth.config.read_text())
    tester_password = "tester-password"
    config["authorization"]["users"].append({
        "user": TESTER, "password": bcrypt.hashpw(tester_password.encode(),
                                                  bcrypt.gensalt(4)).decode()})
    test_config = auth.config.with_name("test-server.json")
    test_config.write_text(json.dumps(config))
    server = EmbeddedNats(home / "data" / "jetstream", config=test_config)
    url = await server.start()
    sec = Secured(url, home, auth, durables, tester_password)
    admin = await sec.bus(SUPERVISOR)
    await provision_all(admin, durables)
    await admin.close()
    yield sec
    await server.stop()


class Violations:
    """Permission errors the server reports to one connection, awaitable."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.event = asyncio.Event()

    async def record(self, exc: Exception) -> None:
        self.seen.append(str(exc).lower())
        self.event.set()

    async def wait_for(self, subject: str, timeout: float = 10) -> str:
        async with asyncio.timeout(timeout):
            while True:
                for text in self.seen:
                    if "permissions violation" in text and subject.lower() in text:
                        return text
                self.event.clear()
                await self.event.wait()


async def raw_connect(sec: Secured, user: str) -> tuple[Client, Violations]:
    """A plain nats.py connection as `user`, with its violations collected."""
    violations = Violations()
    password = sec.tester_password if user == TESTER else sec.auth.passwords[user]
    nc = await nats.connect(sec.url, user=user, password=password, error_cb=violations.record,
                            inbox_prefix=f"_INBOX_{user}", allow_reconnect=False)
    return nc, violations


async def test_the_executor_cannot_subscribe_to_memory_subjects(secured: Secured) -> None:
    executor, violations = await raw_connect(secured, "executor")
    tester, _ = await raw_connect(secured, TESTER)
    try:
        denied = await executor.subscribe("wm.cmd.memory.>")  # no callback: messages queue up
        probed = asyncio.get_running_loop().create_future()

        async def on_probe(msg: Any) -> None:
            probed.set_result(msg.subject)

        await executor.subscribe("_INBOX_executor.probe", cb=on_probe)
        await executor.flush()
        text = await violations.wait_for('subscription to "wm.cmd.memory.>"')
        assert "permissions violation" in text
        # One publisher, one subscriber connection: had the first been delivered, it would
        # have been queued before the probe arrived.
        await tester.publish("wm.cmd.memory.save", b'{"type": "memory.save"}')
        await tester.publish("_INBOX_executor.probe", b"after")
        assert await asyncio.wait_for(probed, 10) == "_INBOX_executor.probe"
        assert denied.pending_msgs == 0
    finally:
        await executor.close()
        await tester.close()


async def test_the_executor_cannot_read_memory_commands_through_jetstream(
    secured: Secured,
) -> None:
    executor, violations = await raw_connect(secured, "executor")
    js = executor.jetstream(timeout=1)
    try:
        # Neither a consumer of its own on memory subjects, nor the memory actor's durable.
        attempt = asyncio.create_task(js.add_consumer(
            "WM_CMD", durable_name="snoop", name="snoop", filter_subject="wm.cmd.memory.>"))
        await violations.wait_for('"$js.api.consumer.create.wm_cmd.snoop.wm.cmd.memory.>"')
        with pytest.raises(TimeoutError):
            await attempt
        pull = await js.pull_subscribe_bind(durable="memory", stream="WM_CMD")
        attempt = asyncio.create_task(pull.fetch(1, timeout=1))
        await violations.wait_for('"$js.api.consumer.msg.next.wm_cmd.memory"')
        with pytest.raises(TimeoutError):
            await attempt
        # Nor other users' replies.
        for inbox in ("_INBOX_memory.>", "_INBOX.>"):
            await executor.subscribe(inbox)
            await violations.wait_for(f'subscription to "{inbox}"')
    finally:
        await executor.close()


async def test_the_channel_cannot_publish_executor_commands(secured: Secured) -> None:
    channel = await secured.bus("channel")
    admin = await secured.bus(SUPERVISOR)
    try:
        with pytest.raises(TimeoutError):  # refused: no JetStream acknowledgement comes
            await channel.js.publish("wm.cmd.executor.run", b'{"type": "tool.request"}',
                                     timeout=1)
        assert any('"wm.cmd.executor.run"' in d for d in channel.denied)
        # What the channel may publish is stored; had the refused message got through, it
        # would have been stored before this one.
        await channel.js.publish("wm.cmd.planner.reset", b'{"type": "session.reset"}', timeout=5)
        info = await admin.js.stream_info("WM_CMD", subjects_filter="wm.cmd.>")
        assert "wm.cmd.planner.reset" in (info.state.subjects or {})
        assert "wm.cmd.executor.run" not in (info.state.subjects or {})
    finally:
        await channel.close()
        await admin.close()


async def test_kv_writes_are_limited_to_an_actors_own_keys(secured: Secured) -> None:
    channel = await secured.bus("channel")
    try:
        await channel.kv_put(channel.subjects.kv_state, "telegram.offset.1", b"5")
        kv = await channel.kv(channel.subjects.kv_state)
        with pytest.raises(TimeoutError):  # the tools offered to the model are the executor's
            await asyncio.wait_for(kv.put("tools", b"[]"), 3)
        assert any('"$kv.wm_state.tools"' in d.lower() for d in channel.denied)
        assert await channel.kv_get(channel.subjects.kv_state, "telegram.offset.1") == b"5"
    finally:
        await channel.close()


async def test_the_channel_asks_the_supervisor_to_release_and_cannot_touch_holds(
    secured: Secured,
) -> None:
    channel = await secured.bus("channel")
    admin = await secured.bus(SUPERVISOR)
    try:
        release = HoldRelease(id="r1", name="flaky", principal="telegram:1", is_owner=True)
        await channel.publish(channel.subjects.cmd("supervisor", "release"), release)
        info = await admin.js.stream_info("WM_CMD", subjects_filter="wm.cmd.>")
        assert "wm.cmd.supervisor.release" in (info.state.subjects or {})
        with pytest.raises(TimeoutError):  # quarantine is the supervisor's: not even a look
            await asyncio.wait_for(
                channel.kv_put(channel.subjects.kv_tools, "flaky", b'{"status": "active"}'), 5)
        assert any("kv_wm_tools" in d.lower() for d in channel.denied)
        state = await channel.kv(channel.subjects.kv_state)
        with pytest.raises(TimeoutError):  # and so are Flatline's outcome windows
            await asyncio.wait_for(state.put("flatline.tool.flaky", b""), 3)
    finally:
        await channel.close()
        await admin.close()


async def test_every_actor_can_verify_bind_pull_and_report_health(secured: Secured) -> None:
    for name in ACTORS:
        bus = await secured.bus(name)
        try:
            subs = secured.durables[name]
            streams, buckets = scope(bus.subjects, name, subs)
            await bus.provision(streams, buckets)  # looks only: everything exists
            for sub in subs:
                await ensure_consumer(bus, sub)
                pull = await bus.js.pull_subscribe_bind(durable=sub.durable, stream=sub.stream)
                try:
                    for msg in await pull.fetch(1, timeout=0.1):
                        await msg.nak()
                except TimeoutError:
                    pass
                await pull.unsubscribe()
            await bus.kv_put(bus.subjects.kv_health, name, b"{}")
            await bus.nc.flush()
            assert not bus.denied, f"{name}: {list(bus.denied)}"
        finally:
            await bus.close()


async def test_the_cli_user_does_what_the_commands_need(secured: Secured) -> None:
    cli = await secured.bus(CLI)
    try:
        seen: asyncio.Queue[str] = asyncio.Queue()

        async def on_msg(msg: Any) -> None:
            await seen.put(msg.subject)

        await cli.nc.subscribe("wm.>", cb=on_msg)  # tap
        for spec in cli.subjects.streams():  # status
            await cli.js.stream_info(spec.name)
        await cli.kv_keys(cli.subjects.kv_tools)
        await cli.kv_get(cli.subjects.kv_state, "supervisor")
        await cli.js.publish("wm.cmd.channel.terminal", b'{"type": "terminal.input"}', timeout=5)
        assert await asyncio.wait_for(seen.get(), 10) == "wm.cmd.channel.terminal"
        assert [s async for s in read_stream(cli, "WM_CMD")]  # replay reads history
        await cli.nc.flush()
        assert not cli.denied, list(cli.denied)
    finally:
        await cli.close()


async def test_the_cli_user_lifts_flatline_holds(secured: Secured) -> None:
    admin, cli = await secured.bus(SUPERVISOR), await secured.bus(CLI)
    try:
        await admin.kv_put(admin.subjects.kv_tools, "flaky", json.dumps(
            {"status": "quarantined", "reason": "it kept failing"}).encode())
        await put_task_status(admin, "brief", TaskHold(task="brief", status="disabled"))
        assert "Released the tool flaky" in await release_tool(cli, "flaky", "the owner")
        assert "enabled again" in await enable_task(cli, "brief", "the owner")
        assert (held := await tool_status(admin, "flaky")) is not None and held.status == "active"
        await cli.nc.flush()
        assert not cli.denied, list(cli.denied)
    finally:
        await admin.close()
        await cli.close()


async def test_the_cli_user_owns_the_replay_scratch_prefix(secured: Secured) -> None:
    """What `replay --rerun` does: provision, run a planner on, and delete `wm_replay`."""
    login = dict(zip(("user", "password"), secured.auth.login(CLI), strict=True))
    scratch = await Bus(secured.url, scratch_prefix("wm")).connect(**login)
    try:
        await scratch.provision()
        sub = Subscription(scratch.subjects.stream_in, "planner-in", ("wm_replay.in.>",))
        await ensure_consumer(scratch, sub)
        await scratch.js.publish("wm_replay.in.terminal.owner", b"{}", timeout=5)
        pull = await scratch.js.pull_subscribe_bind(durable="planner-in",
                                                    stream=scratch.subjects.stream_in)
        (msg,) = await pull.fetch(1, timeout=5)
        await msg.ack()
        await scratch.kv_put(scratch.subjects.kv_health, "planner", b"{}")
        for spec in scratch.subjects.streams():
            await scratch.js.delete_stream(spec.name)
        for bucket in scratch.subjects.buckets():
            await scratch.js.delete_key_value(bucket.name)
        await scratch.nc.flush()
        assert not scratch.denied, list(scratch.denied)
    finally:
        await scratch.close()


async def test_a_connection_without_a_user_is_refused(secured: Secured) -> None:
    with pytest.raises(Exception, match="(?i)authorization"):
        await nats.connect(secured.url, allow_reconnect=False, max_reconnect_attempts=0)


def test_credentials_are_private_and_kept(secured: Secured) -> None:
    folder = natsauth.nats_dir(secured.home)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("users.json", "server.json"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    config = (folder / "server.json").read_text()
    assert all(p not in config for p in secured.auth.passwords.values())  # hashes only
    again = natsauth.prepare(secured.home, Bus("").subjects, secured.durables)
    assert again.passwords == secured.auth.passwords
    assert natsauth.login(secured.home, CLI) == (CLI, secured.auth.passwords[CLI])


def test_one_grant_per_actor_and_the_channels_are_the_adapters() -> None:
    assert set(GRANTS) == {*ACTORS, SUPERVISOR, CLI}
    assert set(CHANNELS) == set(ADAPTERS)


async def test_every_role_may_publish_what_the_route_table_says_it_produces(
    secured: Secured,
) -> None:
    """The grants come from contracts/routes.py: each producer's subjects are accepted."""
    from contracts.routes import publishes

    admin = await secured.bus(SUPERVISOR)
    published: list[tuple[str, str]] = []
    try:
        for role in (*ACTORS, CLI):
            bus = await secured.bus(role)
            try:
                for pattern in publishes(role):
                    subject = "wm." + pattern.replace("*", "probe").replace(">", "probe")
                    ack = await bus.js.publish(subject, b"{}", timeout=5)
                    published.append((ack.stream, subject))
                await bus.nc.flush()
                assert not bus.denied, f"{role}: {list(bus.denied)}"
            finally:
                await bus.close()
    finally:
        for stream, subject in published:  # leave the streams as the other tests expect them
            await admin.js.purge_stream(stream, subject=subject)
        await admin.close()
    assert {s for s, _ in published} == {"WM_IN", "WM_OUT", "WM_CMD", "WM_EVT", "WM_DLQ"}
