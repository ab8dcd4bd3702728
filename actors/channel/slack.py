"""The Slack adapter (slack-bolt): Socket Mode by default, the HTTP Events API as an option.

Why bolt with `process_before_response=True`: bolt then runs our listener to completion
before it acknowledges the Socket Mode envelope (or answers the HTTP request), so a Slack
message is confirmed only after its turn is stored in JetStream. A listener that fails makes
bolt answer 500, which sends no ack, and Slack delivers the envelope again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from typing import TYPE_CHECKING, Any

from actors.channel import _slack_format as fmt
from actors.channel._slack_inbound import NOT_OWNER, Inbound
from actors.channel._slack_send import Poster
from actors.channel.adapter import Adapter
from bus import Reject
from contracts import ApprovalPrompt, Notice, Reply, Sink
from kit.secrets import load_dotenv

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)

LOOP = "slack"
AUTH_ERRORS = {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive",
               "not_allowed_token_type", "no_permission"}


def _secret(name: str, home: Any) -> str:
    """A token from the environment, else from WINTERMUTE_HOME/.env."""
    return os.environ.get(name) or load_dotenv(home / ".env").get(name, "")


class SlackAdapter(Adapter):
    channel = "slack"

    @classmethod
    def enabled(cls, config: Any, home: Any) -> bool:
        return bool(_secret(config.channels.slack.bot_token_env, home))

    def __init__(self, actor: Any) -> None:
        super().__init__(actor)
        self.cfg = self.config.channels.slack
        self.error = ""
        self.bot_user = ""
        self.team = ""
        self.connected = False  # as of the last liveness check
        self.handler: Any = None
        self._runner: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.ready = asyncio.Event()  # connected (socket) or serving (http)
        self.http_url = ""

    # --- start / stop -------------------------------------------------------------------------

    async def start(self) -> None:
        from slack_bolt.async_app import AsyncApp
        from slack_sdk.web.async_client import AsyncWebClient

        home = self.actor.home
        bot = _secret(self.cfg.bot_token_env, home)
        app_token = _secret(self.cfg.app_token_env, home)
        secret = _secret(self.cfg.signing_secret_env, home)
        if self.cfg.mode == "socket" and not app_token:
            self._disable(f"Socket Mode needs an app-level token: set {self.cfg.app_token_env} "
                          "(xapp-...) in .env, or use channels.slack.mode = 'http'.")
            return
        if self.cfg.mode == "http" and not secret:
            self._disable(f"HTTP mode needs the app's signing secret: set "
                          f"{self.cfg.signing_secret_env} in .env.")
            return
        # Retries are ours (see _slack_send): the SDK's own retry could post a message twice.
        self.client = AsyncWebClient(token=bot, base_url=self.cfg.api_base_url, timeout=30,
                                     retry_handlers=[])
        if not await self._check_token():
            return
        self.poster = Poster(self.client, self.bus, self.subjects.kv_done)
        self.inbound = Inbound(self)
        self.app = AsyncApp(client=self.client, process_before_response=True,
                            signing_secret=secret or "unused-in-socket-mode",
                            request_verification_enabled=self.cfg.mode == "http",
                            logger=logging.getLogger("slack_bolt"))
        self._listen(self.app)
        every = max(1.0, self.cfg.ping_interval_secs)
        self.actor.alive(LOOP, every=every)  # registered now, so a connect that never
        if self.cfg.mode == "socket":        # succeeds shows up as a stale loop
            self.actor.spawn(self._socket_loop(app_token, every), LOOP)
        else:
            self.actor.spawn(self._http_loop(every), LOOP)

    def _disable(self, reason: str) -> None:
        self.error = f"The Slack channel is off: {reason}"
        log.error("%s", self.error)

    async def _check_token(self) -> bool:
        """auth.test once: learn the bot's user id, and turn a bad token into a sentence."""
        from slack_sdk.errors import SlackApiError

        try:
            who = await self.client.auth_test()
        except SlackApiError as exc:
            code = str(exc.response.get("error", ""))
            if code in AUTH_ERRORS:
                self._disable(f"Slack rejected the bot token ({code}); check "
                              f"{self.cfg.bot_token_env} in .env.")
                return False
            log.warning("Slack auth.test failed (%s); will keep trying", code)
            return True
        except Exception as exc:  # noqa: BLE001 - Slack unreachable now: the loops retry
            log.warning("Slack auth.test failed (%s); will keep trying", exc)
            return True
        self.bot_user = str(who.get("user_id", ""))
        self.team = str(who.get("team_id", ""))
        log.info("slack: signed in to team %s as bot user %s (%s mode)", self.team,
                 self.bot_user, self.cfg.mode)
        return True

    async def stop(self) -> None:
        if self.handler is not None:
            with contextlib.suppress(Exception):
                await self.handler.close_async()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
        client = getattr(self, "client", None)
        session = getattr(client, "session", None)
        if session is not None:
            with contextlib.suppress(Exception):
                await session.close()

    # --- liveness -----------------------------------------------------------------------------

    async def _socket_loop(self, app_token: str, every: float) -> None:
        """Connect, then report liveness while the socket answers pings.

        slack_sdk reconnects by itself when pongs stop for 4 ping intervals; if that does not
        help, this loop stops reporting and the supervisor restarts the channel actor."""
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        self.handler = AsyncSocketModeHandler(self.app, app_token, web_client=self.client,
                                              ping_interval=self.cfg.ping_interval_secs)
        await self.handler.connect_async()
        self.ready.set()
        while True:
            self.connected = await self.handler.client.is_connected()
            if self.connected:
                self.actor.alive(LOOP, every=every)
            await asyncio.sleep(every)

    async def _http_loop(self, every: float) -> None:
        """Serve the Events API endpoint; liveness is a request to our own /healthz."""
        import aiohttp
        from aiohttp import web
        from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request

        async def events(request: web.Request) -> web.Response:
            return await to_aiohttp_response(await self.app.async_dispatch(
                await to_bolt_request(request)))

        async def healthz(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        web_app = web.Application()
        web_app.router.add_post(self.cfg.http_path, events)
        web_app.router.add_get("/healthz", healthz)
        self._runner = web.AppRunner(web_app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.cfg.http_host, self.cfg.http_port)
        try:
            await site.start()
        except OSError as exc:
            raise RuntimeError(
                f"The Slack events endpoint cannot listen on {self.cfg.http_host}:"
                f"{self.cfg.http_port} ({exc.strerror}); change channels.slack.http_port."
            ) from exc
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.http_url = f"http://127.0.0.1:{port}"
        log.info("slack events endpoint on %s:%s%s", self.cfg.http_host, port, self.cfg.http_path)
        self.ready.set()
        timeout = aiohttp.ClientTimeout(total=every)
        async with aiohttp.ClientSession(timeout=timeout) as probe:
            while True:
                self.connected = False
                with contextlib.suppress(Exception):
                    async with probe.get(f"{self.http_url}/healthz") as resp:
                        self.connected = resp.status == 200
                if self.connected:
                    self.actor.alive(LOOP, every=every)
                await asyncio.sleep(every)

    # --- listeners ----------------------------------------------------------------------------

    def _listen(self, app: AsyncApp) -> None:
        inbound = self.inbound

        def bot_user(context: Any) -> str:
            return str(context.get("bot_user_id") or self.bot_user)

        @app.event("message")
        async def message(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
            await inbound.on_message(body, event, bot_user(context))

        @app.event("app_mention")
        async def mention(body: dict[str, Any], event: dict[str, Any], context: Any) -> None:
            await inbound.on_mention(body, event, bot_user(context))

        @app.action(re.compile(r"^wm_(approve|deny)$"))
        async def approval(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
            owner = await inbound.on_approval_click(body, action)
            await ack()
            # cosmetic follow-up off the ack path, so a slow Slack cannot delay the ack
            task = asyncio.create_task(self._after_click(body, action, owner))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        @app.command(re.compile(r".*"))
        async def command(ack: Any, body: dict[str, Any]) -> None:
            answer = await inbound.on_slash(body)
            if answer:
                await ack(text=answer)
            else:
                await ack()

        # Anything else Slack sends is acknowledged and dropped, so it is never redelivered.
        @app.event(re.compile(r".*"))
        async def other_event() -> None:
            return None

        @app.action(re.compile(r".*"))
        async def other_action(ack: Any) -> None:
            await ack()

    async def _after_click(self, body: dict[str, Any], action: dict[str, Any], owner: bool) -> None:
        """Show the click on the prompt (owner) or tell the clicker no (others); best effort."""
        channel = (body.get("channel") or {}).get("id", "")
        user = body["user"]["id"]
        try:
            if owner:
                message = body.get("message") or {}
                blocks = fmt.answered_blocks(message.get("blocks") or [], user,
                                             action["action_id"] == "wm_approve")
                await self.client.chat_update(channel=channel, ts=str(message.get("ts", "")),
                                              blocks=blocks, text=message.get("text", "Approval"))
            else:
                await self.client.chat_postEphemeral(channel=channel, user=user, text=NOT_OWNER)
        except Exception as exc:  # noqa: BLE001 - cosmetic; the decision is already on the bus
            log.warning("could not update the approval prompt: %s", exc)

    # --- outbound -----------------------------------------------------------------------------

    async def send(self, msg: Reply | ApprovalPrompt | Notice) -> None:
        if self.error:
            raise Reject(self.error)
        sink = msg.sink
        parts: list[dict[str, Any]]
        match msg:
            case ApprovalPrompt():
                blocks = fmt.approval_blocks(msg.approval_id, msg.summary, msg.expires_at)
                text = f"Approval needed ({msg.approval_id}): {msg.summary}"[:2000]
                parts = [{"text": fmt.escape(text), "blocks": blocks}]
            case Reply() | Notice():
                chunks = fmt.split(fmt.to_mrkdwn(msg.text), self.cfg.max_message_chars)
                parts = [{"text": c, "unfurl_links": False} for c in chunks]
        await self.poster.post(msg.id, sink.chat, sink.thread, parts)

    async def direct(self, sink: Sink, text: str) -> None:
        await self.client.chat_postMessage(channel=sink.chat, thread_ts=sink.thread or None,
                                           text=fmt.escape(text), unfurl_links=False)

    async def suppressed(self, msg: Reply) -> None:
        log.info("reply %s suppressed ([NO_REPLY])", msg.id)

    def info(self) -> dict[str, Any]:
        """Facts for the channel's health record."""
        if self.error:
            return {"error": self.error}
        return {"mode": self.cfg.mode, "team": self.team, "bot_user": self.bot_user,
                "connected": self.connected}
