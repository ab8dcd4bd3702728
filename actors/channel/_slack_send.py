"""Posting to Slack exactly once per chunk: KV markers, retries with backoff, 429 Retry-After.

Slack has no idempotency key, so each chunk carries its id in message metadata. A chunk is
marked "sending" in `wm_done` before the call and "done" after; when a redelivery finds a
chunk still "sending" (the process died, or the call timed out after Slack may have stored
it), the conversation is searched for that id before anything is posted again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from bus import Reject
from contracts import short_hash

log = logging.getLogger(__name__)

EVENT_TYPE = "wintermute_message"
ATTEMPTS = 6
MAX_RETRY_AFTER = 120.0
TRANSIENT = {"internal_error", "fatal_error", "service_unavailable", "request_timeout",
             "ratelimited", "team_added_to_org"}
ADVICE = {
    "not_in_channel": "invite the app to that channel (/invite @Wintermute)",
    "channel_not_found": "check the channel id of the sink (owner.sink, a task's sink)",
    "is_archived": "the channel is archived; pick another sink",
    "invalid_auth": "check the bot token (WINTERMUTE_SLACK_BOT_TOKEN)",
    "token_revoked": "reinstall the app and put the new bot token in .env",
    "account_inactive": "reinstall the app and put the new bot token in .env",
    "not_authed": "set WINTERMUTE_SLACK_BOT_TOKEN in WINTERMUTE_HOME/.env",
    "missing_scope": "add the missing scope from the README's app manifest and reinstall",
}


class Unsent(Exception):
    """Slack did not take a chunk after several attempts; the message is retried later."""


def _error(exc: Exception) -> tuple[int, str, float]:
    """(HTTP status, Slack error code, Retry-After seconds) of a Web API failure."""
    resp = getattr(exc, "response", None)
    if resp is None:
        return 0, "", 0.0
    status = int(getattr(resp, "status_code", 0) or 0)
    code = str(resp.get("error", "")) if hasattr(resp, "get") else ""
    headers = getattr(resp, "headers", {}) or {}
    raw = headers.get("Retry-After") or headers.get("retry-after") or 0
    try:
        retry_after = float(raw)
    except (TypeError, ValueError):
        retry_after = 1.0
    return status, code, retry_after


class Poster:
    """Sends one outbound message as ordered chunks, each at most once."""

    def __init__(self, client: Any, bus: Any, bucket: str, base_delay: float = 0.5) -> None:
        self.client = client
        self.bus = bus
        self.bucket = bucket
        self.base_delay = base_delay

    async def post(self, msg_id: str, chat: str, thread: str, parts: list[dict[str, Any]]) -> None:
        """Post `parts` (chat.postMessage arguments) in order; resume after a crash."""
        for i, part in enumerate(parts):
            key = f"slack.{short_hash(msg_id, 32)}.{i}"
            chunk_id = f"{msg_id}#{i}"
            state = (await self.bus.kv_get(self.bucket, key) or b"").decode()
            if state == "done":
                continue
            if state.startswith("sending:"):
                try:
                    since = float(state.split(":", 1)[1])
                except ValueError:  # a mangled marker: look back over the whole history
                    since = 60.0
                if await self._already_posted(chat, thread, chunk_id, since):
                    log.info("chunk %s was posted before a crash; not posting again", chunk_id)
                    await self.bus.kv_put(self.bucket, key, b"done")
                    continue
            await self.bus.kv_put(self.bucket, key, f"sending:{time.time():.3f}".encode())
            await self._post_chunk(chat, thread, chunk_id, part)
            await self.bus.kv_put(self.bucket, key, b"done")

    async def _post_chunk(self, chat: str, thread: str, chunk_id: str, part: dict[str, Any]) -> None:
        from slack_sdk.errors import SlackApiError

        args = dict(part, channel=chat,
                    metadata={"event_type": EVENT_TYPE, "event_payload": {"wm_id": chunk_id}})
        if thread:
            args["thread_ts"] = thread
        started = time.time()
        unsure = False  # a previous attempt may have reached Slack
        for attempt in range(ATTEMPTS):
            if unsure and await self._already_posted(chat, thread, chunk_id, started):
                return
            delay = self.base_delay * 2**attempt
            try:
                await self.client.chat_postMessage(**args)
                return
            except asyncio.CancelledError:
                raise
            except SlackApiError as exc:
                status, code, retry_after = _error(exc)
                if status == 429 or code == "ratelimited":
                    delay = min(max(retry_after, 1.0), MAX_RETRY_AFTER)
                    log.warning("Slack rate limit on chat.postMessage; waiting %.0fs", delay)
                    unsure = False
                elif status >= 500 or code in TRANSIENT:
                    unsure = True
                    log.warning("Slack error %s %s; retrying in %.1fs", status, code, delay)
                else:
                    hint = ADVICE.get(code, "see https://api.slack.com/methods/chat.postMessage")
                    raise Reject(f"Slack refused a message to {chat}: {code}; {hint}.") from exc
            except Exception as exc:  # noqa: BLE001 - timeouts, resets: Slack may have it
                unsure = True
                log.warning("posting to Slack failed (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
        raise Unsent(f"Slack did not accept a message to {chat} after {ATTEMPTS} attempts")

    async def _already_posted(self, chat: str, thread: str, chunk_id: str, since: float) -> bool:
        """Whether a message carrying `chunk_id` is already in the conversation."""
        from slack_sdk.errors import SlackApiError

        try:
            channel = chat
            if chat[:1] in ("U", "W"):  # a DM addressed by user id: find the DM channel
                opened = await self.client.conversations_open(users=chat)
                channel = opened["channel"]["id"]
            params = {"channel": channel, "oldest": f"{since - 60:.6f}",
                      "include_all_metadata": True, "limit": 200}
            if thread:
                resp = await self.client.conversations_replies(ts=thread, **params)
            else:
                resp = await self.client.conversations_history(**params)
        except asyncio.CancelledError:
            raise
        except SlackApiError as exc:
            status, code, _ = _error(exc)
            if status == 429 or status >= 500 or code in TRANSIENT:
                raise Unsent(f"cannot check Slack history for {chunk_id} yet ({code})") from exc
            log.warning("cannot read Slack history (%s); %s may be posted twice", code, chunk_id)
            return False
        for m in resp.get("messages", []):
            meta = m.get("metadata") or {}
            if meta.get("event_type") == EVENT_TYPE and (meta.get("event_payload") or {}).get(
                "wm_id"
            ) == chunk_id:
                return True
        return False
