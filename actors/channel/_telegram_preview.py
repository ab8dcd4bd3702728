"""The live preview: one Telegram message per turn, edited as the model writes the answer.

The first LlmPreview of a turn sends a message, later ones edit it (never faster than the
interval allows, never with unchanged text), and the final reply edits it into its first part.
Per turn a record in `wm_done` (`tgpreview.<hash of turn id>`) holds the message id and
whether the reply has taken over ("final"); previews after that are ignored. All of this runs
under the adapter's per-chat lock, so a preview and the reply of a chat never interleave.

A preview is cosmetic: it is never retried. A 429 pauses previews in that chat for the
`retry_after` Telegram asks; other failures skip that one preview.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from actors.channel._telegram_format import TEXT_LIMIT, split_html
from actors.channel._telegram_send import Part, retry_secs, with_retries
from actors.channel.adapter import NO_REPLY, is_no_reply
from contracts import LlmPreview, short_hash
from contracts.records import TelegramPreview

if TYPE_CHECKING:
    from actors.channel.telegram import TelegramAdapter

log = logging.getLogger(__name__)

WRITING = " …"  # shown after the text while the answer is still being written
#: Previews written closer together than this fraction of the interval (by their own
#: timestamps) are dropped; the llm already spaces them by the interval.
GAP = 0.8
#: A preview older than this is dropped (a backlog after the channel was down).
STALE_SECS = 60.0


def preview_html(text: str) -> str:
    """The preview as Telegram HTML: the first message's worth of the text, marked unfinished."""
    chunks = split_html(text, TEXT_LIMIT - len(WRITING))
    return chunks[0][0] + WRITING if chunks else ""


class Previews:
    """Preview messages of one bot: what each turn shows and when it last changed."""

    def __init__(self, adapter: TelegramAdapter) -> None:
        self.a = adapter
        self.gap = GAP * float(adapter.tg.preview_interval_secs)
        self.shown: dict[str, tuple[float, str]] = {}  # turn -> (preview ts, html) last shown
        self.paused: dict[int, float] = {}  # chat -> monotonic time a 429 lets us edit again

    # -- the per-turn record -------------------------------------------------------------

    def _key(self, turn_id: str) -> str:
        return f"tgpreview.{short_hash(turn_id, 32)}"

    async def _get(self, turn_id: str) -> TelegramPreview | None:
        record: TelegramPreview | None = await self.a.bus.kv_get_as(
            self.a.subjects.kv_done, self._key(turn_id), TelegramPreview)
        return record

    async def _put(self, turn_id: str, message_id: int, final: bool) -> None:
        await self.a.bus.kv_put(self.a.subjects.kv_done, self._key(turn_id),
                                TelegramPreview(m=message_id, final=final))

    # -- previews ------------------------------------------------------------------------

    async def send_or_edit(self, msg: LlmPreview, chat: int, thread: int | None) -> None:
        """Send or edit the turn's preview message (call with the chat's lock held)."""
        from telegram import LinkPreviewOptions
        from telegram.error import BadRequest, RetryAfter, TelegramError

        text = msg.text.strip()
        if NO_REPLY.startswith(text) or is_no_reply(text):
            return  # an answer that is going to be [NO_REPLY] is never shown
        now = time.monotonic()
        if self.paused.get(chat, 0.0) > now or time.time() - msg.ts > STALE_SECS:
            return
        record = await self._get(msg.turn_id)
        if record is not None and (record.final or not record.m):
            return  # the reply took over, or a crash mid-send left the message unknown
        html = preview_html(text)
        last = self.shown.get(msg.turn_id)
        if last is not None and (last[1] == html or msg.ts - last[0] < self.gap):
            return
        no_link = LinkPreviewOptions(is_disabled=True)
        try:
            if record is None:
                await self._put(msg.turn_id, 0, False)  # "sending": a crash now shows no preview
                try:
                    sent = await self.a.bot.send_message(
                        chat, html, parse_mode="HTML", message_thread_id=thread,
                        link_preview_options=no_link)
                except (RetryAfter, BadRequest):
                    await self.a.bus.kv_delete(self.a.subjects.kv_done, self._key(msg.turn_id))
                    raise  # nothing was sent: a later preview may try again
                await self._put(msg.turn_id, int(sent.message_id), False)
            else:
                await self.a.bot.edit_message_text(
                    html, chat_id=chat, message_id=record.m, parse_mode="HTML",
                    link_preview_options=no_link)
        except RetryAfter as exc:
            self.paused[chat] = now + retry_secs(exc)
            log.info("telegram preview paused for %.0fs in chat %s (rate limit)",
                     retry_secs(exc), chat)
            return
        except TelegramError as exc:  # "not modified", a bad cut, the network: skip this one
            log.debug("telegram preview skipped: %s", self.a.scrub(str(exc)))
            return
        self.shown[msg.turn_id] = (msg.ts, html)

    # -- the final reply -----------------------------------------------------------------

    async def finish(self, turn_id: str) -> int:
        """The reply is here: no more previews for this turn; returns its preview message id."""
        record = await self._get(turn_id)
        message_id = record.m if record else 0
        if record is None or not record.final:
            await self._put(turn_id, message_id, True)
        self.shown.pop(turn_id, None)
        return message_id

    async def edit_final(self, chat: int, message_id: int, part: Part) -> bool:
        """Turn the preview into the reply's first part; False when it cannot be edited."""
        from telegram import LinkPreviewOptions
        from telegram.error import BadRequest

        no_link = LinkPreviewOptions(is_disabled=True)

        async def edit(text: str, mode: str | None) -> None:
            await with_retries(lambda: self.a.bot.edit_message_text(
                text, chat_id=chat, message_id=message_id, parse_mode=mode,
                link_preview_options=no_link), "editMessageText")

        try:
            try:
                await edit(part.html, "HTML")
            except BadRequest as exc:
                if "parse entities" not in str(exc).lower():
                    raise
                log.warning("telegram refused the HTML (%s); editing in plain text", exc)
                await edit(part.plain, None)
        except BadRequest as exc:
            if "not modified" in str(exc).lower():
                return True  # edited before a crash: the message already shows this part
            log.warning("could not edit the preview into the reply (%s); sending it anew", exc)
            return False
        return True

    async def remove(self, chat: int, message_id: int) -> None:
        """Take the preview away (the answer was [NO_REPLY], or it starts with a file)."""
        from telegram.error import TelegramError

        try:
            await with_retries(lambda: self.a.bot.delete_message(chat, message_id),
                               "deleteMessage")
        except TelegramError as exc:  # already gone, or too old to delete: leave it
            log.info("could not delete preview message %s: %s", message_id, exc)
