"""Webhook mode: Telegram POSTs each update; we answer 200 only once it is stored.

A non-2xx answer makes Telegram deliver the update again later, so the same rule as polling
holds: an update is confirmed only after its message is in JetStream. The listener speaks
plain HTTP; put it behind your HTTPS reverse proxy (Telegram only calls https:// URLs).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from actors.channel.telegram import TelegramAdapter

log = logging.getLogger(__name__)

MAX_BODY = 1 << 20


class WebhookServer:
    """An aiohttp listener on `path` that hands each update's JSON to `ingest`."""

    def __init__(self, url: str, host: str, port: int, secret: str,
                 ingest: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self.path = urlparse(url).path or "/"
        self.host, self.port, self.secret = host, port, secret
        self.ingest = ingest
        self._runner: Any = None

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        log.info("telegram webhook listening on %s:%s%s", self.host, self.port, self.path)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
        if not hmac.compare_digest(given, self.secret):
            return web.Response(status=403, text="wrong secret token")
        try:
            data = json.loads(await request.read())
            if not isinstance(data, dict) or "update_id" not in data:
                raise ValueError("not an update")
        except ValueError:
            return web.Response(status=400, text="not a Telegram update")
        try:
            await self.ingest(data)
        except Exception as exc:  # noqa: BLE001 - Telegram will deliver it again
            log.warning("webhook update %s not stored (%s); Telegram will retry",
                        data.get("update_id"), type(exc).__name__)
            return web.Response(status=503, text="not stored yet; retry")
        return web.Response(status=200)


async def serve_webhook(adapter: TelegramAdapter) -> None:
    """Listen for Telegram's POSTs, keep the webhook set, and report liveness."""
    from telegram import Update
    from telegram.error import TelegramError

    from actors.channel._telegram_send import with_retries
    from actors.channel.telegram import ALLOWED_UPDATES, WEBHOOK_LOOP

    tg, bot = adapter.tg, adapter.bot
    if not tg.webhook_url:
        await adapter.disable("channels.telegram.mode is 'webhook' but webhook_url is empty; "
                              "set the public HTTPS URL Telegram should call, or use polling.")
        return
    secret = adapter.webhook_secret()

    async def ingest(data: dict[str, Any]) -> None:
        try:
            update = Update.de_json(data, bot)
        except Exception:  # noqa: BLE001 - unreadable: a retry would fail the same way
            log.exception("dropping webhook update %s: python-telegram-bot cannot read it",
                          data.get("update_id"))
            return
        await adapter.ingest(update, forever=False)

    adapter.webhook = WebhookServer(tg.webhook_url, tg.webhook_listen, tg.webhook_port, secret,
                                    ingest)
    await adapter.webhook.start()
    while True:  # Telegram may drop a webhook (or someone resets it): keep it ours
        try:
            info = await bot.get_webhook_info()
            if info.url != tg.webhook_url:
                await with_retries(lambda: bot.set_webhook(
                    tg.webhook_url, allowed_updates=ALLOWED_UPDATES, secret_token=secret),
                    "setWebhook")
            elif info.last_error_message:
                log.warning("Telegram reports webhook errors: %s", info.last_error_message)
            adapter.actor.alive(WEBHOOK_LOOP, every=60.0)
        except TelegramError as exc:
            log.warning("getWebhookInfo failed: %s", adapter.scrub(str(exc)))
        await asyncio.sleep(30.0)
