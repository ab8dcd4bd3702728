"""The Telegram adapter: long polling (or a webhook) in, HTML messages out, each sent once.

Inbound, the adapter runs its own getUpdates loop with python-telegram-bot's `Bot` (not
Application/Updater, which confirm offsets on their own): each update is turned into bus
messages with ids derived from its update_id, and only after JetStream stored them is the next
offset saved in KV and passed to Telegram, which confirms the update. A kill at any moment
re-reads at most the unconfirmed updates, and their re-publishes are dropped as duplicates.
Every successful poll marks the `telegram-poll` loop alive, so a stalled poller shows up in
health and the supervisor restarts the actor.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from actors.channel._telegram_in import Inbound
from actors.channel._telegram_preview import Previews
from actors.channel._telegram_send import (
    approval_parts,
    deliver,
    notice_parts,
    reply_parts,
    retry_secs,
)
from actors.channel._telegram_typing import Typing
from actors.channel.adapter import Adapter
from bus import BusError, PublishError, Reject, Retry, decode_record
from contracts import (
    ApprovalPrompt,
    DeadLetter,
    LlmPreview,
    Notice,
    Reply,
    short_hash,
)
from kit.outbound import SecretScanner
from kit.redact import HomeRedactor, redact_patterns
from kit.secrets import load_dotenv

log = logging.getLogger(__name__)

POLL_LOOP = "telegram-poll"
WEBHOOK_LOOP = "telegram-webhook"
ALLOWED_UPDATES = ["message", "callback_query"]
POISON_ATTEMPTS = 3


class TelegramAdapter(Adapter):
    channel = "telegram"

    @classmethod
    def token(cls, config: Any, home: Any) -> str:
        """The bot token from the environment or WINTERMUTE_HOME/.env ("" when unset)."""
        name = config.channels.telegram.bot_token_env
        value = os.environ.get(name, "").strip()
        if not value and home is not None:
            value = load_dotenv(Path(home) / ".env").get(name, "").strip()
        return value

    @classmethod
    def enabled(cls, config: Any, home: Any) -> bool:
        return bool(cls.token(config, home))

    def __init__(self, actor: Any) -> None:
        super().__init__(actor)
        self.tg = self.config.channels.telegram
        self.workspace = Path(actor.home) / "workspace"
        # The outbound gate checks files named in replies for secret values (.env, NATS).
        self.scanner = SecretScanner(HomeRedactor(Path(actor.home), os.environ))
        self._token = self.token(self.config, actor.home)
        self.bot: Any = None
        self.me: Any = None
        self.ready = asyncio.Event()
        self.typing = Typing(self)
        self.inbound = Inbound(self)
        self.previews = Previews(self)
        self.period = float(self.tg.poll_timeout_secs) + 5.0
        self._locks: dict[int, asyncio.Lock] = {}
        self.webhook: Any = None
        self.state = "connecting"
        self.last_poll = 0.0

    # -- small helpers -------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Facts for the channel's health record."""
        return {"mode": self.tg.mode, "state": self.state, "last_poll": round(self.last_poll, 1),
                "bot": f"@{self.me.username}" if self.me else ""}

    def update_ref(self, update_id: int) -> str:
        """The deterministic id of everything an update causes."""
        return f"tg:{self.me.id}:{update_id}"

    def webhook_secret(self) -> str:
        """The secret Telegram sends with each webhook call, derived from the token."""
        return hashlib.sha256(f"wintermute-webhook:{self._token}".encode()).hexdigest()

    def scrub(self, text: str) -> str:
        """Keep the bot token out of logs (it is part of every Bot API URL)."""
        return text.replace(self._token, "<token>") if self._token else text

    async def state_get(self, key: str) -> bytes | None:
        value: bytes | None = await self.bus.kv_get(self.subjects.kv_state, f"telegram.{key}")
        return value

    async def state_put(self, key: str, value: bytes) -> None:
        await self.bus.kv_put(self.subjects.kv_state, f"telegram.{key}", value)

    async def state_delete(self, key: str) -> None:
        await self.bus.kv_delete(self.subjects.kv_state, f"telegram.{key}")

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        from telegram import Bot
        from telegram.request import HTTPXRequest

        os.environ.setdefault("PTB_TIMEDELTA", "1")  # durations as timedelta, no warnings
        for noisy in ("httpx", "httpcore"):  # they log every URL, and the URL holds the token
            logging.getLogger(noisy).setLevel(logging.WARNING)
        self.bot = Bot(
            self._token, base_url=self.tg.api_base_url, base_file_url=self.tg.api_file_url,
            request=HTTPXRequest(connection_pool_size=8, connect_timeout=10, read_timeout=30,
                                 write_timeout=30, media_write_timeout=120),
            get_updates_request=HTTPXRequest(connection_pool_size=2, connect_timeout=10,
                                             read_timeout=10),
        )
        owners = [p for p in self.config.owner.principals if p.startswith("telegram:")]
        if not self.tg.allowed_users and not owners and not self.tg.pairing:
            log.warning("Telegram is on but nobody may use it: add user ids to "
                        "channels.telegram.allowed_users or telegram:<id> to owner.principals")
        self.actor.alive(POLL_LOOP if self.tg.mode == "polling" else WEBHOOK_LOOP,
                         every=self.period if self.tg.mode == "polling" else 60.0)
        self.actor.spawn(self._run(), "telegram")
        # Pairing answers arrive through the channel actor's `channel-telegram-pairing`
        # durable (declared in its subscriptions, so the supervisor can provision it).

    async def stop(self) -> None:
        self.typing.stop_all()
        if self.webhook is not None:
            await self.webhook.stop()  # the webhook stays set: Telegram keeps updates for us
        if self.bot is not None:
            try:
                await self.bot.shutdown()
            except Exception as exc:  # noqa: BLE001 - closing anyway
                log.debug("bot shutdown: %s", exc)

    async def _run(self) -> None:
        if await self._connect():
            if self.tg.mode == "webhook":
                from actors.channel._telegram_webhook import serve_webhook

                await serve_webhook(self)
            else:
                await self._poll()
        await asyncio.Event().wait()  # disabled: stay quiet, the rest of the channel runs on

    async def _connect(self) -> bool:
        """getMe until it works; False when Telegram rejects the token."""
        from telegram.error import InvalidToken, TelegramError

        delay = 1.0
        while True:
            try:
                await self.bot.initialize()
                self.me = self.bot.bot
                break
            except InvalidToken:
                await self.disable(
                    f"Telegram rejected the bot token in {self.tg.bot_token_env}, so the Telegram "
                    "channel is off. Put the token from @BotFather in WINTERMUTE_HOME/.env and "
                    "restart Wintermute."
                )
                return False
            except TelegramError as exc:
                log.warning("cannot reach Telegram at %s (%s); retrying in %.0fs",
                            self.tg.api_base_url, self.scrub(str(exc)), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
        log.info("telegram bot @%s (%s) connected, %s mode", self.me.username, self.me.id,
                 self.tg.mode)
        self.state = "connected"
        self.ready.set()
        return True

    async def disable(self, why: str) -> None:
        """Turn Telegram off for this process, say why, and take its loop out of health."""
        log.error(why)
        self.state = f"off: {why}"
        for loop in (POLL_LOOP, WEBHOOK_LOOP):
            self.actor._loops.pop(loop, None)  # a loop we stopped on purpose is not hung
            self.actor._periods.pop(loop, None)
        from contracts import Sink

        sink = Sink.parse(self.config.owner.sink)
        if sink.channel != "telegram":
            day = time.strftime("%Y%m%d")
            notice = Notice(id=f"telegram:disabled:{day}", sink=sink, text=why, source="telegram")
            try:
                await self.bus.send(notice)
            except PublishError as exc:
                log.warning("could not tell the owner: %s", exc)

    # -- polling -------------------------------------------------------------------------

    async def _poll(self) -> None:
        from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

        offset = await self._load_offset()
        try:
            await self.bot.delete_webhook()  # polling and a webhook exclude each other
        except TelegramError as exc:
            log.warning("deleteWebhook failed: %s", self.scrub(str(exc)))
        failures = 0
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=offset, timeout=self.tg.poll_timeout_secs,
                    allowed_updates=ALLOWED_UPDATES,
                )
            except RetryAfter as exc:
                await asyncio.sleep(retry_secs(exc))
                continue
            except InvalidToken:
                await self.disable(f"Telegram stopped accepting the bot token in "
                                    f"{self.tg.bot_token_env}; the Telegram channel is off.")
                return
            except TelegramError as exc:
                failures += 1
                hint = (" (another process polls this bot, or a webhook is set)"
                        if isinstance(exc, Conflict) else "")
                log.warning("getUpdates failed%s: %s", hint, self.scrub(str(exc)))
                await asyncio.sleep(min(0.5 * 2**failures, 30.0))
                continue
            failures = 0
            self.last_poll = time.time()
            self.actor.alive(POLL_LOOP, every=self.period)
            for update in updates:
                await self.ingest(update, forever=True)
                await self._save_offset(update.update_id + 1)
                offset = update.update_id + 1
                self.actor.alive(POLL_LOOP, every=self.period)

    def _offset_key(self) -> str:
        return f"offset.{self.me.id}"

    async def _load_offset(self) -> int | None:
        # A JSON number; anything else is logged and polling starts from Telegram's backlog.
        offset: int | None = decode_record(await self.state_get(self._offset_key()), int,
                                           "telegram offset")
        return offset

    async def _save_offset(self, offset: int) -> None:
        delay = 0.5
        while True:
            try:
                await self.state_put(self._offset_key(), str(offset).encode())
                return
            except Exception as exc:  # noqa: BLE001 - NATS away: keep trying, lose nothing
                log.warning("could not save the telegram offset (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def ingest(self, update: Any, forever: bool) -> None:
        """Store one update's messages; bus failures retry (forever when polling)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.inbound.handle(update)
                return
            except (PublishError, BusError, ConnectionError, TimeoutError) as exc:
                if not forever:
                    raise
                log.warning("update %s not stored yet (%s); retrying", update.update_id, exc)
                await asyncio.sleep(min(0.5 * attempt, 5.0))
            except Exception as exc:  # noqa: BLE001 - a poison update must not block the rest
                if attempt < POISON_ATTEMPTS:
                    log.warning("update %s failed (%r); retrying", update.update_id, exc)
                    await asyncio.sleep(0.5 * attempt)
                    continue
                log.exception("update %s failed %s times; dead-lettering it", update.update_id,
                              attempt)
                await self._dead_letter(update, exc, attempt)
                return

    async def _dead_letter(self, update: Any, exc: BaseException, attempts: int) -> None:
        payload = redact_patterns(json.dumps(update.to_dict(), default=str))[0][:65536]
        letter = DeadLetter(
            id=f"dlq:{self.update_ref(update.update_id)}", actor="channel",
            reason=f"the Telegram update could not be handled: {self.scrub(repr(exc))}",
            subject="telegram.update", stream="", stream_seq=0, deliveries=attempts,
            payload=payload,
        )
        await self.bus.send(letter)

    # -- outbound ------------------------------------------------------------------------

    async def send(self, msg: Reply | ApprovalPrompt | Notice) -> None:
        from telegram.error import BadRequest, Forbidden, InvalidToken

        try:
            await asyncio.wait_for(self.ready.wait(), 60)
        except TimeoutError:
            raise Retry("Telegram is not connected yet", delay=30) from None
        try:
            chat = int(msg.sink.chat)
        except ValueError:
            raise Reject(f"'{msg.sink}' is not a Telegram chat: the chat must be a numeric id "
                         "(e.g. owner.sink = 'telegram:123456789')") from None
        thread = int(msg.sink.thread) if msg.sink.thread.isdigit() else None
        match msg:
            case Reply():
                self.typing.stop(msg.turn_id)
                parts = reply_parts(msg.text, self.workspace, self.scanner)
            case ApprovalPrompt():
                parts = approval_parts(msg)
            case Notice():
                parts = notice_parts(msg)
        done = self.subjects.kv_done
        lock = self._locks.setdefault(chat, asyncio.Lock())
        async with lock:  # one message at a time per chat keeps the parts in order
            shown = 0  # the turn's preview message, which becomes the first part
            if isinstance(msg, Reply) and self.tg.preview:
                shown = await self.previews.finish(msg.turn_id)
            for i, part in enumerate(parts):
                key = f"tgsent.{short_hash(msg.id, 32)}.{i}"
                if await self.bus.kv_get(done, key) is not None:
                    continue  # sent before a crash
                try:
                    if i == 0 and shown and part.path is None and \
                            await self.previews.edit_final(chat, shown, part):
                        await self.bus.kv_put(done, key, str(shown).encode())
                        continue
                    if i == 0 and shown:  # the reply starts with a file: the preview goes
                        await self.previews.remove(chat, shown)
                    message_id = await deliver(self.bot, chat, thread, part)
                except (BadRequest, Forbidden, InvalidToken) as exc:
                    raise Reject(
                        f"Telegram refused message {msg.id} for chat {chat}: {exc}. Check the "
                        "chat id, and that the user has started the bot (or it is in the group)."
                    ) from exc
                await self.bus.kv_put(done, key, str(message_id).encode())

    async def suppressed(self, msg: Reply) -> None:
        self.typing.stop(msg.turn_id)
        if not self.tg.preview or not msg.sink.chat.lstrip("-").isdigit():
            return
        chat = int(msg.sink.chat)
        async with self._locks.setdefault(chat, asyncio.Lock()):
            shown = await self.previews.finish(msg.turn_id)
            if shown:
                await self.previews.remove(chat, shown)

    async def preview(self, msg: LlmPreview) -> None:
        if not self.tg.preview or not self.ready.is_set() or \
                not msg.sink.chat.lstrip("-").isdigit():
            return
        chat = int(msg.sink.chat)
        thread = int(msg.sink.thread) if msg.sink.thread.isdigit() else None
        async with self._locks.setdefault(chat, asyncio.Lock()):
            await self.previews.send_or_edit(msg, chat, thread)
