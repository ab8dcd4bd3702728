"""Posting to Slack once per chunk: the real slack_sdk client against the local Slack, markers
in the real `wm_done` bucket."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.channel._slack_send import Poster
from bus import Bus, Reject
from tests.fakes.slack_server import BOT_TOKEN, FakeSlack


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    server = FakeSlack()
    await server.start()
    yield server
    await server.stop()


def poster(slack: FakeSlack, bus: Bus) -> Poster:
    from slack_sdk.web.async_client import AsyncWebClient

    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url, retry_handlers=[])
    return Poster(client, bus, bus.subjects.kv_done, base_delay=0.05)


async def test_server_errors_are_retried_and_each_chunk_is_posted_once(
    slack: FakeSlack, bus: Bus
) -> None:
    slack.fail("chat.postMessage", status=500, error="internal_error", times=2)
    post = poster(slack, bus)
    parts = [{"text": "one"}, {"text": "two"}]
    await post.post("reply-1", "D0ALICE", "", parts)
    await post.post("reply-1", "D0ALICE", "", parts)  # a redelivered message: nothing new
    assert [m["text"] for m in slack.posted()] == ["one", "two"]
    assert [c.status for c in slack.calls_of("chat.postMessage")] == [500, 500, 200, 200]
    # after an unsure failure the conversation was checked before posting again
    assert slack.calls_of("conversations.history")


async def test_a_dm_by_user_id_is_checked_through_its_dm_channel(slack: FakeSlack, bus: Bus) -> None:
    slack.hang("chat.postMessage", record=True)
    post = poster(slack, bus)
    post.client.timeout = 1  # the hung call times out; Slack did store the message
    await post.post("notice-1", "U0OWNER", "", [{"text": "approve?"}])
    assert [m["text"] for m in slack.posted("U0OWNER")] == ["approve?"]
    assert slack.calls_of("conversations.open")


async def test_a_permanent_refusal_is_a_sentence_with_advice(slack: FakeSlack, bus: Bus) -> None:
    with pytest.raises(Reject) as err:
        await poster(slack, bus).post("reply-2", "CNOTIN1", "", [{"text": "hi"}])
    assert "not_in_channel" in str(err.value) and "/invite" in str(err.value)


async def test_a_mangled_send_marker_is_checked_not_a_crash(slack: FakeSlack, bus: Bus) -> None:
    from contracts import short_hash

    key = f"slack.{short_hash('reply-3', 32)}.0"
    await bus.kv_put(bus.subjects.kv_done, key, b"sending:not-a-time")
    await poster(slack, bus).post("reply-3", "D0ALICE", "", [{"text": "three"}])
    assert [m["text"] for m in slack.posted()] == ["three"]
    assert slack.calls_of("conversations.history")  # looked whether it was posted first
    assert await bus.kv_get(bus.subjects.kv_done, key) == b"done"
