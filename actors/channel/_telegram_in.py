"""Inbound from Telegram: one update becomes bus messages, and nothing else leaves it.

Everything an update causes is a publish with an id derived from the update (`tg:<bot>:<n>`),
so handling the same update twice (after a crash, before its offset was confirmed) publishes
nothing new. Answers to the user (refusals, command output, the credential advice) are Notices
on the outbound stream, sent once like every other outbound message.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

import msgspec

from actors.channel._telegram_media import download_media
from actors.channel.commands import CommandContext, handle_command
from bus import PayloadTooLarge, decode_record
from contracts import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalResolved,
    Notice,
    Sink,
    TurnRequest,
    taint,
)
from contracts.records import PairingRequest
from kit.redact import credential_guard

if TYPE_CHECKING:
    from actors.channel.telegram import TelegramAdapter

log = logging.getLogger(__name__)

REFUSAL = (
    "Sorry, this is a private assistant and you are not on its list of allowed users. "
    "Messages from you are not read."
)
PAIRING_ASKED = (
    "This is a private assistant. I have asked its owner whether you may talk to me; "
    "you will get a message here when they decide."
)
UNSUPPORTED = (
    "I can read text, voice messages, audio, photos, videos and documents; that kind of "
    "message is not supported."
)
GROUPS = ("group", "supergroup")
#: Characters of one message kept as a turn: the turn, its history and its model request each
#: travel as one bus message, limited to 1 MiB.
MAX_TEXT = 100_000
TRUNCATED = (
    "Your message was very long ({chars} characters); I kept only the first {kept} and cut "
    "the rest. Send longer texts as a file."
)
TOO_LARGE = "That message is too large for me to store, so I skipped it. Try sending it as a file."


class Inbound:
    """Turns Telegram updates into turns, commands, notices and approval decisions."""

    def __init__(self, adapter: TelegramAdapter) -> None:
        self.a = adapter
        self.cfg = adapter.tg

    # -- helpers -----------------------------------------------------------------------------

    def is_owner(self, user_id: int) -> bool:
        return f"telegram:{user_id}" in self.a.config.owner.principals

    async def is_allowed(self, user_id: int) -> bool:
        if user_id in self.cfg.allowed_users or self.is_owner(user_id):
            return True
        return await self.a.state_get(f"paired.{user_id}") is not None

    async def notify(self, msg_id: str, sink: Sink, text: str) -> None:
        """Answer in a chat through the outbound stream (so it is sent exactly once)."""
        notice = Notice(id=msg_id, sink=sink, text=text, source="telegram")
        await self.a.bus.send(notice)

    # -- updates -----------------------------------------------------------------------------

    async def handle(self, update: Any) -> None:
        """Handle one update; raises on failures that a retry may fix."""
        base = self.a.update_ref(update.update_id)
        if update.callback_query is not None:
            await self._callback(base, update.callback_query)
            return
        msg = update.message
        if msg is None or msg.from_user is None or msg.from_user.is_bot:
            return  # edits, channel posts, other bots: not conversations with a person
        if msg.chat.type not in ("private", *GROUPS):
            return
        user = msg.from_user
        group = msg.chat.type in GROUPS
        thread = str(msg.message_thread_id) if group and msg.is_topic_message else ""
        sink = Sink(channel="telegram", chat=str(msg.chat.id), thread=thread)
        if not await self.is_allowed(user.id):
            if not group:  # in a group, strangers are simply not listened to
                await self._stranger(base, user, sink)
            return
        text = msg.text or msg.caption or ""
        if group:
            addressed, text = self._addressed(msg, text)
            if not addressed:
                return
        principal = f"telegram:{user.id}"
        if group:
            session = f"telegram:group:{msg.chat.id}" + (f":{thread}" if thread else "")
        else:
            session = principal
        guard = credential_guard(text)
        if guard.action == "block":
            await self.notify(f"{base}:guard", sink, guard.text)
            return
        text = guard.text
        ctx = CommandContext(principal, self.is_owner(user.id), session, base, reply_to=sink)
        answer = await handle_command(self.a.actor, ctx, text)
        if answer is not None:
            await self.notify(f"{base}:command", sink, answer)
            return
        limited = self.a.actor.rate.check(principal, ctx.is_owner)
        if limited is not None:
            if limited:
                await self.notify(f"{base}:slow-down", sink, limited)
            return
        attachments = await download_media(self.a, update.update_id, msg)
        if not text.strip() and not attachments:
            if not group:
                await self.notify(f"{base}:unsupported", sink, UNSUPPORTED)
            return
        if len(text) > MAX_TEXT:  # it could never be stored whole (1 MiB per message)
            await self.notify(f"{base}:truncated", sink, TRUNCATED.format(
                chars=len(text), kept=MAX_TEXT))
            text = text[:MAX_TEXT] + f"\n[... cut here: the message had {len(text)} characters]"
        turn = TurnRequest(
            id=base, session=session, principal=principal, text=text, reply_to=sink,
            is_owner=ctx.is_owner, attachments=attachments,
            principal_kind="owner" if ctx.is_owner else (
                "third_party" if user.id in self.cfg.allowed_users else "paired"),
            preview_interval=self.cfg.preview_interval_secs if self.cfg.preview else 0.0,
            taint=taint.CLEAN if ctx.is_owner else taint.RAW,
        )
        try:
            await self.a.bus.send(turn)
        except PayloadTooLarge:  # still too large (attachments): refuse it, move on
            await self.notify(f"{base}:too-large", sink, TOO_LARGE)
            return
        self.a.typing.start(base, sink)

    def _addressed(self, msg: Any, text: str) -> tuple[bool, str]:
        """Whether a group message is for us (mention, reply to us, command), minus the mention."""
        me = self.a.me
        handle = f"@{me.username}".lower()
        first = text.split(maxsplit=1)[0] if text.strip() else ""
        if first.startswith("/") and "@" in first and not first.lower().endswith(handle):
            return False, text  # a command for another bot
        entities = msg.parse_entities() if msg.text else msg.parse_caption_entities()
        mentioned = any(
            (ent.type == "mention" and value.lower() == handle)
            or (ent.type == "text_mention" and ent.user is not None and ent.user.id == me.id)
            for ent, value in entities.items()
        )
        replied = (
            msg.reply_to_message is not None and msg.reply_to_message.from_user is not None
            and msg.reply_to_message.from_user.id == me.id
        )
        command = first.startswith("/")
        cleaned = re.sub(re.escape(handle) + r"\b", "", text, flags=re.I) if mentioned else text
        cleaned = re.sub(r"[ \t]{2,}", " ", cleaned).strip()
        ok = self.cfg.group_mode == "all" or mentioned or replied or command
        return ok, cleaned

    async def _stranger(self, base: str, user: Any, sink: Sink) -> None:
        """An unknown user: at most one short answer; with pairing on, ask the owner once."""
        await self.a.actor.audit_decision(
            "sender.denied", "refused",
            "A Telegram user who is not in channels.telegram.allowed_users wrote to the bot"
            + (" (the owner is asked to pair them once)." if self.cfg.pairing else "."),
            about=base, principal=f"telegram:{user.id}", refs={"chat": sink.chat})
        if self.cfg.pairing:
            key = f"pairing.{user.id}"
            if await self.a.state_get(key) is not None:
                return
            who = user.full_name + (f" (@{user.username})" if user.username else "")
            request = ApprovalRequest(
                id=f"{base}:pair", session=f"telegram:pair:{user.id}",
                summary=f"Let Telegram user {who}, id {user.id}, talk to the agent?",
                reason="they wrote to the bot and are not in channels.telegram.allowed_users",
            )
            await self.a.bus.send(request)
            await self.notify(f"{base}:pairing", sink, PAIRING_ASKED)
            await self.a.state_put(key, msgspec.json.encode(PairingRequest(chat=sink.chat)))
            return
        key = f"refused.{user.id}"
        if await self.a.state_get(key) is not None:
            return
        await self.notify(f"{base}:refusal", sink, REFUSAL)
        await self.a.state_put(key, b"1")
        log.info("refused telegram user %s (not in allowed_users)", user.id)

    async def _callback(self, base: str, query: Any) -> None:
        """An inline button: approve/deny, honoured only from the owner."""
        from telegram.error import TelegramError

        bot = self.a.bot
        verb, _, approval_id = (query.data or "").partition(":")
        if verb not in ("a", "d") or not approval_id:
            await self._answer(query, "This button is no longer valid.")
            return
        if not self.is_owner(query.from_user.id):
            log.warning("approval button pressed by non-owner %s", query.from_user.id)
            await self._answer(query, "Only the owner can answer approvals.", alert=True)
            return
        approved = verb == "a"
        where = query.message
        reply_to = None
        if where is not None:  # an unknown, used or expired id is explained where it was clicked
            topic = getattr(where, "message_thread_id", None)
            reply_to = Sink(channel="telegram", chat=str(where.chat.id),
                            thread=str(topic) if topic else "")
        decision = ApprovalDecision(
            id=f"{base}:decision", approval_id=approval_id, approved=approved,
            principal=f"telegram:{query.from_user.id}", is_owner=True, reply_to=reply_to,
        )
        await self.a.bus.send(decision)
        word = "Approved" if approved else "Denied"
        await self._answer(query, f"{word}.")
        message = query.message
        if message is not None and getattr(message, "text", None):
            from actors.channel._telegram_format import escape

            try:  # replace the buttons with the answer
                await bot.edit_message_text(
                    f"{escape(message.text)}\n\nYour answer: <b>{word}</b>.", chat_id=message.chat.id,
                    message_id=message.message_id, parse_mode="HTML",
                )
            except TelegramError as exc:
                log.info("could not update the approval message: %s", exc)

    async def _answer(self, query: Any, text: str, alert: bool = False) -> None:
        from telegram.error import TelegramError

        try:
            await self.a.bot.answer_callback_query(query.id, text=text, show_alert=alert)
        except TelegramError as exc:  # too old or already answered: nothing to do
            log.info("answerCallbackQuery failed: %s", exc)

    async def on_resolved(self, msg: ApprovalResolved) -> None:
        """The owner answered a pairing request."""
        if not msg.session.startswith("telegram:pair:"):
            return
        user_id = msg.session.rsplit(":", 1)[1]
        asked = decode_record(await self.a.state_get(f"pairing.{user_id}"), PairingRequest)
        chat = (asked.chat if asked is not None else "") or user_id
        sink = Sink(channel="telegram", chat=str(chat))
        if msg.status == "approved":
            await self.a.state_put(f"paired.{user_id}", b"1")
            text = "The owner let you in: you can talk to me now."
        elif msg.status == "denied":
            text = "The owner did not approve your request."
        else:  # expired unanswered: let them ask again later
            await self.a.state_delete(f"pairing.{user_id}")
            text = "The owner did not answer in time; write again later to ask once more."
        await self.notify(f"{msg.id}:notice", sink, text)
