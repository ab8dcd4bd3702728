"""Least privilege on the bus: a real nats-server started with the config `up` generates.

Each actor connects as its own user. What it must not do is refused by the server (a
permissions violation, and nothing delivered or stored); what it must do works.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js.errors import BadRequestError, NotFoundError

from actors import ACTORS
from actors.channel.actor import ADAPTERS
from bus import Bus, Subscription, ensure_consumer
from bus.accounts import API_PREFIX, JS_ACCOUNT, account_of
from bus.history import read_stream
from bus.permissions import (
    CHANNELS,
    CLI,
    GRANTS,
    OPERATOR,
    SUPERVISOR,
    scope,
    scratch_prefix,
)
from contracts import HoldRelease
from contracts.config import load_settings
from contracts.records import TaskHold
from state.holds import enable_task, put_task_status, release_tool, tool_status
from supervisor.process import natsauth
from supervisor.process.home import init_home
from supervisor.process.natsserver import EmbeddedNats
from supervisor.process.provision import actor_subscriptions, provision_all

TESTER = "tester"  # a test-only user that may do anything, to probe what others receive


def prober_in(account: str) -> str:
    """A test-only user inside one actor's account, to see what lands there."""
    return f"{TESTER}-{account}"


@dataclass
class Secured:
    """A nats-server with the generated users, provisioned like `up` does."""

    url: str
    home: Path
    auth: natsauth.EmbeddedAuth
    durables: dict[str, list[Subscription]]
    tester_seeds: dict[str, Path]  # TESTER and prober_in(account) -> seed file

    async def bus(self, user: str) -> Bus:
        """A Bus connected as one of the generated users."""
        return await Bus(self.url, name=f"test-{user}").connect(timeout=10, **self.auth.login(user))


@pytest.fixture(scope="module")
async def secured(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Secured]:
    home = tmp_path_factory.mktemp("secured") / "home"
    init_home(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WM__")}
    env["WM__CHANNELS__TELEGRAM__PAIRING"] = "true"  # so that durable is granted too
    settings = load_settings(home, env)
    durables = actor_subscriptions(settings)
    auth = natsauth.prepare(home, Bus("").subjects, durables)
    # The generated config plus unrestricted test users: one in each account.
    config = json.loads(auth.config.read_text())
    seeds: dict[str, Path] = {}
    for account, spec in config["accounts"].items():
        name = TESTER if account == JS_ACCOUNT else prober_in(account)
        seeds[name] = home / f"{name}.nk"
        seed = natsauth.new_seed()
        seeds[name].write_text(seed)
        spec["users"].append({"nkey": natsauth.public_key(seed)})
    test_config = auth.config.with_name("test-server.json")
    test_config.write_text(json.dumps(config))
    server = EmbeddedNats(home / "data" / "jetstream", config=test_config)
    url = await server.start()
    sec = Secured(url, home, auth, durables, seeds)
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
    seed = sec.tester_seeds.get(user) or sec.auth.seeds[user]
    nc = await nats.connect(sec.url, nkeys_seed=str(seed), error_cb=violations.record,
                            inbox_prefix=f"_INBOX_{user.split('-')[0]}", allow_reconnect=False)
    return nc, violations


async def test_the_executor_cannot_subscribe_to_memory_subjects(secured: Secured) -> None:
    executor, violations = await raw_connect(secured, "executor")
    tester, _ = await raw_connect(secured, prober_in(account_of("executor")))
    try:
        denied = await executor.subscribe("wm.cmd.memory.>")  # no callback: messages queue up
        probed = asyncio.get_running_loop().create_future()

        async def on_probe(msg: Any) -> None:
            probed.set_result(msg.subject)

        await executor.subscribe("_INBOX_executor.probe", cb=on_probe)
        await executor.flush()
        text = await violations.wait_for('subscription to "wm.cmd.memory.>"')
        assert "permissions violation" in text
        # One publisher in the executor's own account, one subscriber connection: had the
        # first been delivered, it would have been queued before the probe arrived.
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
    scratch = await Bus(secured.url, scratch_prefix("wm")).connect(
        timeout=10, **secured.auth.login(CLI))
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
    for path in (folder, natsauth.keys_dir(secured.home)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "server.json").stat().st_mode) == 0o600
    seeds = {u: p.read_text() for u, p in secured.auth.seeds.items()}
    assert set(seeds) == set(GRANTS)
    for path in secured.auth.seeds.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = (folder / "server.json").read_text()
    assert all(s.strip() not in config for s in seeds.values())  # public keys only
    assert "password" not in config
    again = natsauth.prepare(secured.home, Bus("").subjects, secured.durables)
    assert {u: p.read_text() for u, p in again.seeds.items()} == seeds
    assert natsauth.connect_kwargs(secured.home, CLI) == secured.auth.login(CLI)


def test_one_grant_per_actor_and_the_channels_are_the_adapters() -> None:
    assert set(GRANTS) == {*ACTORS, SUPERVISOR, CLI, OPERATOR}
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
    assert {s for s, _ in published} == {"WM_IN", "WM_OUT", "WM_CMD", "WM_EVT", "WM_DLQ",
                                         "WM_AUDIT"}


# -- replies are not actions -----------------------------------------------------------------

VICTIM = "VICTIM"  # a stream no actor may touch; the attacks below try to delete it
#: Reply subjects that, answered in the JetStream account, would delete it: the API's own
#: name and the name an actor's account imports the API under.
ATTACK_REPLIES = (f"$JS.API.STREAM.DELETE.{VICTIM}", f"{API_PREFIX}.STREAM.DELETE.{VICTIM}")


def concrete(pattern: str) -> str:
    """One subject a permission pattern allows (`*` and `>` filled in)."""
    return ".".join({"*": "x", ">": "attack.x"}.get(tok, tok) for tok in pattern.split("."))


def answered(subject: str) -> bool:
    """Whether the server answers a request on `subject`: an ack of no message is ignored, and
    nothing serves direct gets (our buckets do not allow them; KV reads use STREAM.MSG.GET)."""
    return not subject.startswith("$JS.ACK.") and ".DIRECT.GET." not in subject


async def ensure_victim(sec: Secured) -> None:
    """The stream the attacks try to delete."""
    tester, _ = await raw_connect(sec, TESTER)
    try:
        with contextlib.suppress(BadRequestError):
            await tester.jetstream().add_stream(name=VICTIM, subjects=["victim.>"])
    finally:
        await tester.close()


async def victim_exists(sec: Secured) -> bool:
    tester, _ = await raw_connect(sec, TESTER)
    try:
        await tester.jetstream().stream_info(VICTIM)
        return True
    except NotFoundError:
        return False
    finally:
        await tester.close()


async def test_in_one_shared_account_a_reply_subject_is_an_action(
    tmp_path: Path, secured: Secured,
) -> None:
    """The attack, reproduced: with every user in the JetStream account (how the permission
    table was first rendered), the planner's pull request deletes a stream through its reply."""
    config = json.loads(secured.auth.config.read_text())
    flat = [u for spec in config["accounts"].values() for u in spec["users"]]
    for user in flat:  # the table's permissions, un-mapped: the planner pulls from $JS.API
        user["permissions"]["publish"]["allow"] = [
            p.replace(API_PREFIX, "$JS.API") for p in user["permissions"]["publish"]["allow"]]
    seed = natsauth.new_seed()
    flat.append({"nkey": natsauth.public_key(seed)})
    (tmp_path / "flat.json").write_text(json.dumps({"authorization": {"users": flat}}))
    (tmp_path / "tester.nk").write_text(seed)
    server = EmbeddedNats(tmp_path / "js", config=tmp_path / "flat.json")
    url = await server.start()
    admin = await Bus(url).connect(seed=str(tmp_path / "tester.nk"))
    planner = await nats.connect(url, nkeys_seed=str(secured.auth.seeds["planner"]),
                                 inbox_prefix="_INBOX_planner", allow_reconnect=False)
    try:
        await provision_all(admin, {"planner": secured.durables["planner"]})
        await admin.js.add_stream(name=VICTIM, subjects=["victim.>"])
        sub = secured.durables["planner"][0]
        await planner.publish(f"$JS.API.CONSUMER.MSG.NEXT.{sub.stream}.{sub.durable}",
                              b'{"batch": 1, "no_wait": true}', reply=ATTACK_REPLIES[0])
        async with asyncio.timeout(15):
            while True:
                try:
                    await admin.js.stream_info(VICTIM)
                except NotFoundError:
                    break  # deleted by the server's own answer to the planner
                await asyncio.sleep(0.05)
    finally:
        await planner.close()
        await admin.close()
        await server.stop()


@pytest.mark.parametrize("actor", [*ACTORS, OPERATOR])
async def test_no_reply_of_an_actor_becomes_an_action(secured: Secured, actor: str) -> None:
    """Every request an actor may make, with a JetStream API call as its reply subject, is
    answered inside the actor's own account, where it deletes nothing."""
    await ensure_victim(secured)
    prober, _ = await raw_connect(secured, prober_in(account_of(actor)))
    conn, violations = await raw_connect(secured, actor)
    landed: asyncio.Queue[str] = asyncio.Queue()

    async def on_landed(msg: Any) -> None:
        await landed.put(msg.subject)  # a pulled message keeps its own subject

    try:
        for reply in ATTACK_REPLIES:
            await prober.subscribe(reply, cb=on_landed)
        await prober.flush()
        allowed = json.loads(secured.auth.config.read_text())["accounts"][account_of(actor)][
            "users"][0]["permissions"]["publish"]["allow"]
        requests = [concrete(p) for p in allowed]
        expected = 0
        for subject in requests:
            body = (b'{"batch": 1, "no_wait": true}' if ".MSG.NEXT." in subject
                    else b"" if ".DIRECT.GET." in subject else b"{}")
            for reply in ATTACK_REPLIES:
                await conn.publish(subject, body, reply=reply)
                expected += answered(subject)
        expected += await ack_with_attack_reply(secured, conn, actor)
        await conn.flush()
        got = 0
        try:
            async with asyncio.timeout(30):  # every answer arrived in the actor's account...
                for _ in range(expected):
                    await landed.get()
                    got += 1
        except TimeoutError:
            raise AssertionError(f"{got} of {expected} answers arrived") from None
        assert await victim_exists(secured)  # ...and none reached the JetStream API
        assert not [v for v in violations.seen if "permissions violation" in v], violations.seen
    finally:
        await conn.close()
        await prober.close()


async def ack_with_attack_reply(sec: Secured, conn: Client, actor: str) -> int:
    """Pull one message from each of the actor's durables and ack it with an attack reply."""
    tester, _ = await raw_connect(sec, TESTER)
    sent = 0
    try:
        js = conn.jetstream(prefix=API_PREFIX)
        for sub in sec.durables.get(actor, []):
            stored = (await tester.jetstream().stream_info(sub.stream)).config.subjects or []
            # The narrower of the filter and the stream's subjects is in both.
            subject = max([sub.filters[0], *stored[:1]], key=lambda p: len(p.split(".")))
            await tester.jetstream().publish(concrete(subject), b"{}")
            pull = await js.pull_subscribe_bind(durable=sub.durable, stream=sub.stream)
            (msg,) = await pull.fetch(1, timeout=10)
            for reply in ATTACK_REPLIES:
                await conn.publish(msg.reply, b"+ACK", reply=reply)
                sent += 1
            await pull.unsubscribe()
    finally:
        await tester.close()
    return sent


async def test_an_unknown_key_is_refused_and_the_error_says_so(
    secured: Secured, tmp_path: Path,
) -> None:
    stranger = tmp_path / "stranger.nk"
    stranger.write_text(natsauth.new_seed())
    with pytest.raises(ConnectionError, match="authorization violation"):
        await Bus(secured.url).connect(timeout=60, seed=str(stranger))


async def test_the_operator_reads_everything_and_changes_nothing(secured: Secured) -> None:
    """What `nats sub`, `nats stream ls/get`, `nats consumer ls/info` and `nats kv ls/get` do."""
    admin, operator = await secured.bus(SUPERVISOR), await secured.bus(OPERATOR)
    try:
        seen: asyncio.Queue[str] = asyncio.Queue()

        async def on_msg(msg: Any) -> None:
            await seen.put(msg.subject)

        await operator.nc.subscribe("wm.>", cb=on_msg)
        await operator.nc.flush()
        await admin.kv_put(admin.subjects.kv_state, "supervisor", b"{}")
        ack = await admin.js.publish("wm.in.terminal.operator-test", b'{"type": "x"}')
        assert await asyncio.wait_for(seen.get(), 10) == "wm.in.terminal.operator-test"
        names = await operator.js.streams_info()
        assert {"WM_IN", "KV_wm_state"} <= {s.config.name for s in names}
        assert "planner-in" in {c.name for c in await operator.js.consumers_info("WM_IN")}
        await operator.js.consumer_info("WM_IN", "planner-in")
        assert (await operator.js.get_msg("WM_IN", ack.seq)).data == b'{"type": "x"}'
        assert "supervisor" in await operator.kv_keys(operator.subjects.kv_state)
        assert await operator.kv_get(operator.subjects.kv_state, "supervisor") == b"{}"
        await operator.nc.flush()
        assert not operator.denied, list(operator.denied)
        js = operator.nc.jetstream(prefix=API_PREFIX, timeout=1)
        with pytest.raises(TimeoutError):  # refused: nothing answers
            await js.publish("wm.cmd.executor.run", b"{}", timeout=1)
        with pytest.raises(TimeoutError):
            await js.delete_stream("WM_IN")
        with pytest.raises(TimeoutError):
            await js.add_consumer("WM_IN", durable_name="peek", deliver_subject="x")
        await admin.js.stream_info("WM_IN")
    finally:
        await admin.close()
        await operator.close()


async def test_the_llms_answer_to_dreaming_reaches_the_memory_actor(secured: Secured) -> None:
    """Dreaming's model answers arrive on memory's own durable across the accounts (a core
    subscription in memory's account would not see what the llm publishes into JetStream's)."""
    from contracts import LlmResponse

    llm, memory = await secured.bus("llm"), await secured.bus("memory")
    try:
        await llm.send(LlmResponse(id="dream-probe:response", session="memory-dreaming",
                                   turn_id="dream-probe", step=0, request_id="dream-probe"))
        pull = await memory.js.pull_subscribe_bind(durable="memory-dreaming", stream="WM_EVT")
        got = await pull.fetch(1, timeout=10)
        assert got[0].subject == "wm.evt.llm.response.memory-dreaming"
        await got[0].ack()
        await pull.unsubscribe()
        await memory.nc.flush()
        assert not memory.denied and not llm.denied
    finally:
        await llm.close()
        await memory.close()
