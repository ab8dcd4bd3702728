"""The Slack adapter: slack-bolt and slack_sdk for real against a local Slack (Web API + Socket
Mode), with real actors on the real nats-server and the scripted model server."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from actors.channel._slack_format import split, to_mrkdwn
from actors.llm.providers import reset_clients
from bus import Bus
from contracts import Notice, Reply, Sink, short_hash
from contracts.config import Settings
from tests.actors.harness import ALL, Running, actors
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.slack_server import APP_TOKEN, BOT_TOKEN, TEAM, FakeSlack

SettingsFor = Callable[..., Settings]
ALICE, OWNER, MALLORY = "U0ALICE", "U0OWNER", "U0MALLORY"
GENERAL, RANDOM = "C0GENERAL", "C0RANDOM"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    server = FakeSlack()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def model(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLLM]:
    for var in ("OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    server = FakeLLM()
    monkeypatch.setenv("OPENAI_BASE_URL", await server.start("openai"))
    reset_clients()
    yield server
    await server.stop()


@pytest.fixture
def settings(settings_for: SettingsFor, slack: FakeSlack, model: FakeLLM,
             monkeypatch: pytest.MonkeyPatch) -> Callable[..., Settings]:
    monkeypatch.setenv("WINTERMUTE_SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("WINTERMUTE_SLACK_APP_TOKEN", APP_TOKEN)

    def build(**extra: str) -> Settings:
        env = {
            "WM__MODELS__DEFAULT": "openai/test-model",
            "WM__CHANNELS__SLACK__API_BASE_URL": slack.api_url,
            "WM__CHANNELS__SLACK__ALLOWED_USERS": json.dumps([ALICE]),
            "WM__CHANNELS__SLACK__ALLOWED_CHANNELS": json.dumps([GENERAL]),
            "WM__CHANNELS__SLACK__PING_INTERVAL_SECS": "1",
            "WM__OWNER__PRINCIPALS": json.dumps([f"slack:{TEAM}:{OWNER}"]),
            "WM__OWNER__SINK": f"slack:{OWNER}",
        }
        env.update(extra)
        return settings_for(**env)

    return build


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["text"] for m in messages]


async def turns_in(bus: Bus) -> list[dict[str, Any]]:
    """Every payload stored in WM_IN (what reached the planner)."""
    info = await bus.js.stream_info(bus.subjects.stream_in)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        with contextlib.suppress(Exception):
            out.append(json.loads((await bus.js.get_msg(bus.subjects.stream_in, seq)).data))
    return out


async def kill_channel(running: Running) -> None:
    """kill -9 of the channel actor: no graceful stop, its Slack socket and NATS link just die."""
    proc = running.procs["channel"][0]
    for task in proc.actor._background:
        task.cancel()
    adapter = proc.actor.adapters.get("slack")
    if adapter is not None and adapter.handler is not None:
        client = adapter.handler.client
        client.closed = True
        for fut in (client.message_processor, client.message_receiver, client.current_session_monitor):
            if fut is not None:
                fut.cancel()
        if client.current_session is not None:  # the kernel closes a dead process's socket
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.current_session.close(), 10)
    await running.crash("channel")
    for consumer in proc.consumers:  # the dead process's fetch loops end with it
        consumer._stopping.set()


async def test_dm_from_allowed_user_is_answered_and_strangers_get_one_refusal(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings], bus: Bus
) -> None:
    async with actors(settings(), *ALL):
        await slack.wait_connected()
        env = await slack.push("events_api", slack.dm(ALICE, "hello there"))
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "echo: hello there"])
        assert env.acked.is_set()
        strangers = [await slack.push("events_api", slack.dm(MALLORY, text))
                     for text in ("let me in", "please, it is about my secret plan")]
        await slack.push("events_api", slack.dm(ALICE, "and again"))
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "echo: and again"])
        await slack.wait_posted(lambda ms: [m for m in ms if "allowed_users" in m["text"]])
        for env in strangers:
            await asyncio.wait_for(env.acked.wait(), 30)
    refusals = [m for m in slack.posted("D0MALLORY")]
    assert len(refusals) == 1 and "U0MALLORY" in refusals[0]["text"]
    assert "secret plan" not in json.dumps(model.requests) and "let me" not in json.dumps(model.requests)
    principals = {t.get("principal") for t in await turns_in(bus)}
    assert principals == {f"slack:{TEAM}:{ALICE}"}
    assert [m["text"] for m in slack.posted("D0ALICE")] == ["echo: hello there", "echo: and again"]


async def test_channel_mentions_are_answered_in_their_thread(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings], bus: Bus
) -> None:
    async with actors(settings(), *ALL):
        await slack.wait_connected()
        first = slack.mention(ALICE, GENERAL, "the build is red")
        await slack.push("events_api", first)
        await slack.wait_posted(lambda ms: [m for m in ms if "the build is red" in m["text"]])
        thread = first["event"]["ts"]
        await slack.push("events_api", slack.mention(ALICE, GENERAL, "why?", thread_ts=thread))
        await slack.wait_posted(lambda ms: [m for m in ms if "why?" in m["text"]])
        # a plain channel message without a mention is not for the agent
        await slack.push("events_api", slack.event({"type": "message", "channel_type": "channel",
                         "user": ALICE, "channel": GENERAL, "ts": "1.2", "text": "chatter"}))
        for text in ("hi from random", "hi again from random"):
            await slack.push("events_api", slack.mention(ALICE, RANDOM, text))
        await slack.wait_posted(lambda ms: [m for m in ms if "allowed_channels" in m["text"]])
        await slack.push("events_api", slack.mention(ALICE, GENERAL, "last one"))
        await slack.wait_posted(lambda ms: [m for m in ms if "last one" in m["text"]])
    general = slack.posted(GENERAL)
    assert [m["thread_ts"] for m in general[:2]] == [thread, thread]
    assert general[0]["text"] == f"echo: [{ALICE}] the build is red"
    # the follow-up in the thread is the same session: the model saw the first message
    why = next(r for r in model.requests if "why?" in json.dumps(r))
    assert "the build is red" in json.dumps(why["messages"])
    assert not any("chatter" in json.dumps(r) for r in model.requests)
    random = slack.posted(RANDOM)
    assert len(random) == 1 and random[0]["thread_ts"]
    assert not any("random" in json.dumps(r) for r in model.requests)
    sessions = {t["session"] for t in await turns_in(bus)}
    assert f"slack:{TEAM}:{GENERAL}:{thread}" in sessions and len(sessions) == 2


async def test_long_reply_is_split_in_order_and_a_429_is_waited_out(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings]
) -> None:
    words = " ".join(f"word{i} <&>" for i in range(500))  # ~11k chars once escaped
    async with actors(settings(WM__CHANNELS__SLACK__MAX_MESSAGE_CHARS="4000"), *ALL):
        await slack.wait_connected()
        slack.fail("chat.postMessage", status=429, retry_after=2, times=1)
        await slack.push("events_api", slack.dm(ALICE, words))
        posted = await slack.wait_posted(lambda ms: [m for m in ms if "word499" in m["text"]])
    chunks = [m["text"] for m in posted]
    assert len(chunks) == 3 and all(len(c) <= 4000 for c in chunks)
    expected = ("echo: " + words).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert " ".join(chunks).split() == expected.split()
    tries = slack.calls_of("chat.postMessage")
    assert tries[0].status == 429 and len(tries) == 4  # one refused, three chunks, none twice
    assert tries[1].at - tries[0].at >= 1.9  # Retry-After: 2 was honoured


async def test_approval_buttons_round_trip_and_non_owner_clicks_are_refused(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings]
) -> None:
    # direct mode: risky commands need the owner's approval (nothing is sandboxed)
    s = settings(WM__CHANNELS__SLACK__ALLOWED_USERS=json.dumps([ALICE, OWNER]),
                 WM__EXECUTOR__MODE="direct")
    target = s.home / "workspace" / "doomed"
    target.mkdir()
    async with actors(s, *ALL):
        await slack.wait_connected()
        await slack.push("events_api", slack.dm(OWNER, "run: rm -rf doomed && echo removed-it"))
        posted = await slack.wait_posted(lambda ms: [m for m in ms if m.get("blocks")])
        prompt = next(m for m in posted if m.get("blocks"))
        assert "rm -rf doomed" in prompt["text"] and target.exists()
        owner_dm = "D0OWNER"
        shared = slack.click(OWNER, prompt, GENERAL, "wm_approve")  # the button, shared elsewhere
        await slack.push("interactive", slack.click(ALICE, prompt, owner_dm, "wm_approve"))
        await slack.wait_posted(lambda ms: [m for m in ms if "was ignored" in m["text"]])
        assert target.exists()
        assert slack.calls_of("chat.postEphemeral")[0].args["user"] == ALICE
        click = await slack.push("interactive", slack.click(OWNER, prompt, owner_dm, "wm_approve"))
        await slack.wait_posted(lambda ms: [m for m in ms if "removed-it" in m["text"]])
        await asyncio.wait_for(click.acked.wait(), 30)
        await slack.wait_call("chat.update")
        updated = next(m for m in slack.posted(owner_dm) if m["ts"] == prompt["ts"])
        # a used button, clicked where it was shared: the answer comes back there
        await slack.push("interactive", shared)
        await slack.wait_posted(lambda ms: [m for m in slack.posted(GENERAL)
                                            if "already used" in m["text"]])
    assert not target.exists()
    assert not [b for b in updated["blocks"] if b["type"] == "actions"]
    assert "approved" in json.dumps(updated["blocks"])


async def test_credential_guard_and_slash_commands(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings], bus: Bus
) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4" * 10
    async with actors(settings(), *ALL):
        await slack.wait_connected()
        await slack.push("events_api", slack.dm(ALICE, key))
        await slack.wait_posted(lambda ms: [m for m in ms if ".env" in m["text"]])
        await slack.push("events_api", slack.dm(ALICE, f"please use the key {key} for deploys"))
        await slack.wait_posted(lambda ms: [m for m in ms if "REDACTED" in m["text"]])
        slash = await slack.push("slash_commands", slack.slash(ALICE, "D0ALICE", "help"))
        await asyncio.wait_for(slash.acked.wait(), 30)
        stranger = await slack.push("slash_commands", slack.slash(MALLORY, "D0MALLORY", "status"))
        await asyncio.wait_for(stranger.acked.wait(), 30)
    assert key not in json.dumps(model.requests) and key not in json.dumps(await turns_in(bus))
    assert key not in json.dumps(slack.posted())
    assert "/reset" in (slash.ack_payload or {}).get("text", "")
    assert "allowed_users" in (stranger.ack_payload or {}).get("text", "")


async def test_slack_retries_and_duplicate_events_cause_no_duplicate_work(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings], bus: Bus
) -> None:
    quiet = Reply(id="r-quiet", session="s", turn_id="t", text="[NO_REPLY] not for me",
                  sink=Sink(channel="slack", chat="D0ALICE"))
    async with actors(settings(), *ALL):
        await slack.wait_connected()
        await bus.publish(bus.subjects.outbound("slack", "D0ALICE"), quiet)
        dm = slack.dm(ALICE, "only once please")
        env = await slack.push("events_api", dm)
        await asyncio.wait_for(env.acked.wait(), 30)
        await slack.redeliver(env)  # Slack thought the ack was lost
        again = dict(dm, event_id="Ev-retry")  # the same message as a new event
        await slack.push("events_api", again)
        await slack.push("events_api", slack.dm(ALICE, "marker"))
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "echo: marker"])
        sent = f"sent.{short_hash(quiet.id, 32)}"  # the suppressed reply was handled, silently
        async with asyncio.timeout(30):
            while await bus.kv_get(bus.subjects.kv_done, sent) is None:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    assert "NO_REPLY" not in json.dumps(slack.posted())
    assert texts(slack.posted()).count("echo: only once please") == 1
    assert sum("only once please" in json.dumps(r["messages"][-1]) for r in model.requests) == 1


async def test_channel_killed_between_receive_and_send_replies_exactly_once(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings], bus: Bus
) -> None:
    s = settings()
    async with actors(s, *ALL) as running:
        await slack.wait_connected()
        # killed before Slack's envelope was acknowledged: Slack redelivers it
        env = await slack.push("events_api", slack.dm(ALICE, "slow:2 first"))
        await kill_channel(running)
        await running.start("channel")
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "slept 2"])
        # killed after the turn was stored, while the model is still thinking
        stored = await bus.js.pull_subscribe(f"{bus.subjects.p}.in.slack.>",
                                             stream=bus.subjects.stream_in)
        await slack.push("events_api", slack.dm(ALICE, "slow:3 second"))
        async with asyncio.timeout(60):
            while not any(b"second" in m.data for m in await stored.fetch(1, timeout=60)):
                pass
        await kill_channel(running)
        await running.start("channel")
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "slept 3"])
        await slack.push("events_api", slack.dm(ALICE, "marker"))
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "echo: marker"])
    posted = texts(slack.posted())
    assert posted.count("slept 2") == 1 and posted.count("slept 3") == 1
    assert env.acked.is_set()


async def test_crash_in_the_middle_of_a_long_reply_resumes_without_repeating_chunks(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings]
) -> None:
    words = " ".join(f"w{i:04d}" for i in range(1500))  # 9k chars: 5 chunks of <= 2000
    async with actors(settings(WM__CHANNELS__SLACK__MAX_MESSAGE_CHARS="2000"), *ALL) as running:
        await slack.wait_connected()
        slack.hang("chat.postMessage", record=True, after=2)  # Slack stores chunk 3, never answers
        await slack.push("events_api", slack.dm(ALICE, words))
        async with asyncio.timeout(60), slack._posted:
            await slack._posted.wait_for(lambda: slack.hung == 1)
        await kill_channel(running)
        await running.start("channel")
        await slack.wait_posted(lambda ms: [m for m in ms if "w1499" in m["text"]])
    chunks = texts(slack.posted())
    assert chunks == split(to_mrkdwn("echo: " + words), 2000) and len(chunks) == 5
    assert slack.calls_of("conversations.history")  # the unsure chunk was looked up, not resent


async def test_dropped_and_stalled_sockets_are_noticed_and_recovered(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings]
) -> None:
    async with actors(settings(), *ALL):
        await slack.wait_connected()
        await slack.drop()
        await slack.wait_connected(count=2)
        await slack.push("events_api", slack.dm(ALICE, "after the drop"))
        await slack.wait_posted(lambda ms: [m for m in ms if "after the drop" in m["text"]])
        slack.stall()  # the link stays open but goes silent; pings are not answered
        stalled = await slack.push("events_api", slack.dm(ALICE, "during the stall"))
        await slack.wait_connected(count=3)
        await slack.wait_posted(lambda ms: [m for m in ms if "during the stall" in m["text"]])
    assert stalled.retry_attempt == 1 and stalled.acked.is_set()


async def slack_adapter(running: Running) -> Any:
    """The running channel actor's Slack adapter, once its on_start has created it."""
    actor = running.procs["channel"][0].actor
    async with asyncio.timeout(30):
        while "slack" not in getattr(actor, "adapters", {}):  # noqa: ASYNC110 - set in on_start
            await asyncio.sleep(0.05)
    return actor.adapters["slack"]


def signed(secret: str, body: str, retry: int = 0) -> dict[str, str]:
    """Headers Slack sends with an Events API request (v0 signature)."""
    ts = str(int(time.time()))
    mac = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={mac}",
               "Content-Type": "application/json"}
    if retry:
        headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
    return headers


async def test_http_events_mode_verifies_signatures_and_ignores_retries(
    slack: FakeSlack, model: FakeLLM, settings: Callable[..., Settings], bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import aiohttp

    secret = "signing-secret-for-tests"
    monkeypatch.setenv("WINTERMUTE_SLACK_SIGNING_SECRET", secret)
    monkeypatch.delenv("WINTERMUTE_SLACK_APP_TOKEN")
    s = settings(WM__CHANNELS__SLACK__MODE="http", WM__CHANNELS__SLACK__HTTP_PORT="0")
    async with actors(s, *ALL) as running, aiohttp.ClientSession() as http:
        adapter = await slack_adapter(running)
        await asyncio.wait_for(adapter.ready.wait(), 30)
        url = adapter.http_url + "/slack/events"
        challenge = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"})
        async with http.post(url, data=challenge, headers=signed(secret, challenge)) as resp:
            assert resp.status == 200 and "c-123" in await resp.text()
        body = json.dumps(slack.dm(ALICE, "over http"))
        async with http.post(url, data=body, headers=signed("wrong-secret", body)) as resp:
            assert resp.status == 401
        async with http.post(url, data=body, headers=signed(secret, body)) as resp:
            assert resp.status == 200
        async with http.post(url, data=body, headers=signed(secret, body, retry=1)) as resp:
            assert resp.status == 200
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "echo: over http"])
        marker = json.dumps(slack.dm(ALICE, "marker"))
        async with http.post(url, data=marker, headers=signed(secret, marker)) as resp:
            assert resp.status == 200
        await slack.wait_posted(lambda ms: [m for m in ms if m["text"] == "echo: marker"])
    assert texts(slack.posted()).count("echo: over http") == 1
    assert len([t for t in await turns_in(bus) if t.get("text") == "over http"]) == 1
    assert slack.connections == 0  # no socket in HTTP mode


@pytest.mark.parametrize("broken", ["bad-token", "no-app-token"])
async def test_a_misconfigured_slack_says_what_to_fix_and_the_rest_keeps_working(
    slack: FakeSlack, settings: Callable[..., Settings], bus: Bus,
    monkeypatch: pytest.MonkeyPatch, broken: str,
) -> None:
    if broken == "bad-token":
        monkeypatch.setenv("WINTERMUTE_SLACK_BOT_TOKEN", "xoxb-revoked-0000")
    else:
        monkeypatch.delenv("WINTERMUTE_SLACK_APP_TOKEN")
    dlq = await bus.js.pull_subscribe(f"{bus.subjects.p}.dlq.>", stream=bus.subjects.stream_dlq)
    async with actors(settings(), "channel") as running:
        adapter = await slack_adapter(running)
        notice = Notice(id="n-1", sink=Sink(channel="slack", chat="D0ALICE"), text="hello")
        await bus.publish(bus.subjects.outbound("slack", "D0ALICE"), notice)
        letter = json.loads((await dlq.fetch(1, timeout=30))[0].data)
    expected = "rejected the bot token" if broken == "bad-token" else "app-level token"
    assert expected in adapter.error and expected in letter["reason"]
    assert "The Slack channel is off" in letter["reason"]
    assert slack.posted() == [] and slack.connections == 0
