"""A local Slack: the Web API methods Wintermute uses and the Socket Mode WebSocket, on one port.

It speaks the real wire protocol, so slack_sdk / slack-bolt talk to it unchanged
(`AsyncWebClient(base_url=fake.api_url)`):

- Web API: `POST|GET /api/<method>` with a bearer token; JSON or form bodies; answers
  `{"ok": true, ...}` or `{"ok": false, "error": ...}`. Implemented: auth.test,
  apps.connections.open (returns a ws:// URL to this server), chat.postMessage, chat.update,
  chat.postEphemeral, conversations.history, conversations.replies, conversations.open.
- Socket Mode: `GET /link` upgrades to a WebSocket, sends `hello`, then envelopes
  (`events_api`, `interactive`, `slash_commands`) that the client must ack with
  `{"envelope_id": ...}`; unacked envelopes are redelivered on the next connection with
  `retry_attempt` + 1 and `retry_reason` "timeout".
- Scripting: `fail(method, status=429, retry_after=1)` and `hang(method)` for the next calls,
  `drop()` closes every socket, `stall()` makes open sockets go silent (no pongs, no
  envelopes), `refuse_sockets` makes apps.connections.open fail. Every call is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

TEAM = "T0TEAM"
BOT_USER = "U0BOT"
BOT_ID = "B0BOT"
APP_ID = "A0APP"
BOT_TOKEN = "xoxb-test-0000-bot-token"
APP_TOKEN = "xapp-1-test-0000-app-token"


@dataclass
class Call:
    """One Web API call as the server saw it."""

    method: str
    args: dict[str, Any]
    status: int = 200
    error: str = ""
    at: float = field(default_factory=time.monotonic)


@dataclass
class Script:
    """A scripted answer for the next call(s) of one method."""

    status: int = 200
    error: str = ""
    retry_after: int = 0
    hang: bool = False
    record: bool = True  # hang after storing the message (the client never hears back)
    passthrough: bool = False  # answer normally (lets a script target a later call)


@dataclass
class Envelope:
    envelope_id: str
    type: str
    payload: dict[str, Any]
    retry_attempt: int = 0
    acked: asyncio.Event = field(default_factory=asyncio.Event)
    ack_payload: dict[str, Any] | None = None


@dataclass
class Socket:
    ws: web.WebSocketResponse
    stalled: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class FakeSlack:
    """The fake server; `start()` then use `api_url` as the SDK's base_url."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[str, list[dict[str, Any]]] = {}  # channel -> messages
        self.envelopes: dict[str, Envelope] = {}
        self.sockets: list[Socket] = []
        self.connections = 0
        self.refuse_sockets = False
        self.hung = 0  # calls left hanging
        self._last_ts = 0.0
        self._scripts: dict[str, list[Script]] = {}
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._connected = asyncio.Condition()
        self._posted = asyncio.Condition()
        self.url = ""

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self, port: int = 0) -> str:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link", self._socket)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)  # hung calls end at stop()
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    async def stop(self) -> None:
        for sock in list(self.sockets):
            with contextlib.suppress(Exception):
                await sock.ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- scripting ----------------------------------------------------------------------------

    def fail(self, method: str, status: int = 429, error: str = "ratelimited",
             retry_after: int = 1, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with an error (429 carries Retry-After)."""
        self._scripts.setdefault(method, []).extend(
            Script(status=status, error=error, retry_after=retry_after) for _ in range(times)
        )

    def hang(self, method: str, record: bool = True, after: int = 0) -> None:
        """The call of `method` after the next `after` ones never answers; with `record` its
        message is stored first (Slack has it, the client never hears so)."""
        scripts = [Script(passthrough=True) for _ in range(after)]
        self._scripts.setdefault(method, []).extend([*scripts, Script(hang=True, record=record)])

    async def drop(self) -> None:
        """Close every open socket, as Slack does on a network blip."""
        for sock in list(self.sockets):
            await sock.ws.close()

    def stall(self) -> None:
        """Open sockets go silent: no pongs, no envelopes, acks ignored (a half-dead link)."""
        for sock in self.sockets:
            sock.stalled = True

    # --- Web API ------------------------------------------------------------------------------

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            raw = await request.text()
            if request.content_type == "application/json":
                args.update(json.loads(raw or "{}"))
            else:
                args.update(dict(parse_qsl(raw)))
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        expected = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != expected:
            self.calls.append(Call(method, args, 200, "invalid_auth"))
            return web.json_response({"ok": False, "error": "invalid_auth"})
        script = self._scripts.get(method, []).pop(0) if self._scripts.get(method) else None
        if script and script.passthrough:
            script = None
        if script and script.hang:
            self.calls.append(Call(method, args, 0, "hang"))
            if script.record and method == "chat.postMessage":
                await self._store(args)
            async with self._posted:
                self.hung += 1
                self._posted.notify_all()
            await asyncio.Event().wait()  # never answers; the client times out or dies
        if script:
            self.calls.append(Call(method, args, script.status, script.error))
            headers = {"Retry-After": str(script.retry_after)} if script.status == 429 else {}
            return web.json_response({"ok": False, "error": script.error}, status=script.status,
                                     headers=headers)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            self.calls.append(Call(method, args, 200, "unknown_method"))
            return web.json_response({"ok": False, "error": "unknown_method"})
        body = await handler(args)
        self.calls.append(Call(method, args, 200, "" if body.get("ok") else body.get("error", "")))
        async with self._posted:
            self._posted.notify_all()
        return web.json_response(body)

    async def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://fake.slack.test/", "team": "Fake", "user": "wintermute",
                "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}

    async def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.refuse_sockets:
            return {"ok": False, "error": "internal_error"}
        ws = self.url.replace("http://", "ws://")
        return {"ok": True, "url": f"{ws}/link?ticket={next(self._ids)}&app_id={APP_ID}"}

    def _channel(self, channel: str) -> str:
        return f"D{channel[1:]}" if channel.startswith("U") else channel  # a DM by user id

    def _now_ts(self) -> str:
        """A message ts: the current time, unique and increasing, as Slack issues them."""
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    async def _store(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(str(args["channel"]))
        ts = self._now_ts()
        meta = args.get("metadata")
        msg = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "ts": ts,
               "text": args.get("text", ""), "blocks": args.get("blocks"),
               "thread_ts": args.get("thread_ts"),
               "metadata": json.loads(meta) if isinstance(meta, str) else meta}
        async with self._posted:
            self.messages.setdefault(channel, []).append(msg)
            self._posted.notify_all()
        return msg

    async def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("text") and not args.get("blocks"):
            return {"ok": False, "error": "no_text"}
        if len(str(args.get("text", ""))) > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        if str(args["channel"]).startswith("CNOTIN"):
            return {"ok": False, "error": "not_in_channel"}
        msg = await self._store(args)
        return {"ok": True, "channel": self._channel(str(args["channel"])), "ts": msg["ts"],
                "message": {k: v for k, v in msg.items() if v is not None}}

    async def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        for msg in self.messages.get(str(args["channel"]), []):
            if msg["ts"] == args.get("ts"):
                msg["text"] = args.get("text", msg["text"])
                blocks = args.get("blocks")
                msg["blocks"] = json.loads(blocks) if isinstance(blocks, str) else blocks
                return {"ok": True, "channel": args["channel"], "ts": msg["ts"]}
        return {"ok": False, "error": "message_not_found"}

    async def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "message_ts": self._now_ts()}

    async def _m_conversations_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "channel": {"id": self._channel(str(args["users"]).split(",")[0])}}

    def _listing(self, args: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        oldest = float(args.get("oldest") or 0)
        with_meta = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
        out = []
        for m in messages:
            if float(m["ts"]) < oldest:
                continue
            item = {k: v for k, v in m.items() if v is not None}
            if not with_meta:
                item.pop("metadata", None)
            out.append(item)
        return {"ok": True, "messages": out, "has_more": False}

    async def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        msgs = [m for m in self.messages.get(str(args["channel"]), []) if not m["thread_ts"]]
        return self._listing(args, list(reversed(msgs)))

    async def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        msgs = [m for m in self.messages.get(str(args["channel"]), [])
                if m["thread_ts"] == args.get("ts") or m["ts"] == args.get("ts")]
        return self._listing(args, msgs)

    # --- what tests look at -------------------------------------------------------------------

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Messages the bot posted, in order (all channels, or one)."""
        if channel is not None:
            return list(self.messages.get(self._channel(channel), []))
        return [m for msgs in self.messages.values() for m in msgs]

    async def wait_posted(self, predicate: Any, timeout: float = 60) -> list[dict[str, Any]]:
        """Wait until `predicate(all posted messages)` is truthy; return the messages."""
        async with asyncio.timeout(timeout), self._posted:
            await self._posted.wait_for(lambda: bool(predicate(self.posted())))
        return self.posted()

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_call(self, method: str, timeout: float = 60) -> Call:
        """Wait until `method` was answered successfully at least once; return the first."""
        async with asyncio.timeout(timeout), self._posted:
            await self._posted.wait_for(lambda: any(not c.error for c in self.calls_of(method)))
        return next(c for c in self.calls_of(method) if not c.error)

    # --- Socket Mode --------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        sock = Socket(ws)
        self.sockets.append(sock)
        self.connections += 1
        await ws.send_json({"type": "hello", "num_connections": len(self.sockets),
                            "debug_info": {"host": "fake", "approximate_connection_time": 3600},
                            "connection_info": {"app_id": APP_ID}})
        for env in self.envelopes.values():  # redeliver what was never acknowledged
            if not env.acked.is_set():
                env.retry_attempt += 1
                await self._send(sock, env, retry_reason="timeout")
        async with self._connected:
            self._connected.notify_all()
        try:
            async for msg in ws:
                if sock.stalled:
                    continue
                if msg.type == WSMsgType.PING:
                    await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    env = self.envelopes.get(data.get("envelope_id", ""))
                    if env is not None:
                        env.ack_payload = data.get("payload")
                        env.acked.set()
        finally:
            sock.closed.set()
            self.sockets.remove(sock)
        return ws

    async def _send(self, sock: Socket, env: Envelope, retry_reason: str = "") -> None:
        body = {"envelope_id": env.envelope_id, "type": env.type, "payload": env.payload,
                "accepts_response_payload": env.type == "slash_commands",
                "retry_attempt": env.retry_attempt, "retry_reason": retry_reason}
        with contextlib.suppress(Exception):
            await sock.ws.send_json(body)

    async def wait_connected(self, count: int = 1, timeout: float = 60) -> None:
        """Wait until `count` sockets were opened in total and one is open and healthy."""
        async with asyncio.timeout(timeout), self._connected:
            await self._connected.wait_for(
                lambda: self.connections >= count and any(not s.stalled for s in self.sockets)
            )

    async def push(self, type_: str, payload: dict[str, Any], envelope_id: str = "") -> Envelope:
        """Deliver an envelope on the live socket (or on the next one, if none is open)."""
        env = Envelope(envelope_id or f"env-{next(self._ids)}", type_, payload)
        self.envelopes[env.envelope_id] = env
        live = [s for s in self.sockets if not s.stalled and not s.ws.closed]
        if live:
            await self._send(live[-1], env)
        return env

    async def redeliver(self, env: Envelope) -> None:
        """Send an envelope again as Slack does when it thinks the ack was lost."""
        env.retry_attempt += 1
        live = [s for s in self.sockets if not s.stalled and not s.ws.closed]
        if live:
            await self._send(live[-1], env, retry_reason="timeout")

    # --- payload builders ---------------------------------------------------------------------

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An Events API callback wrapping `event`."""
        return {"token": "legacy", "team_id": TEAM, "api_app_id": APP_ID, "event": event,
                "type": "event_callback", "event_id": f"Ev{next(self._ids):08d}",
                "event_time": int(time.time()),
                "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}]}

    def dm(self, user: str, text: str, channel: str = "", **extra: Any) -> dict[str, Any]:
        ts = self._now_ts()
        return self.event({"type": "message", "channel_type": "im", "user": user, "text": text,
                           "channel": channel or f"D{user[1:]}", "ts": ts, "team": TEAM,
                           "event_ts": ts, **extra})

    def mention(self, user: str, channel: str, text: str, thread_ts: str = "") -> dict[str, Any]:
        ts = self._now_ts()
        event = {"type": "app_mention", "user": user, "channel": channel, "ts": ts,
                 "text": f"<@{BOT_USER}> {text}", "team": TEAM, "event_ts": ts}
        if thread_ts:
            event["thread_ts"] = thread_ts
        return self.event(event)

    def click(self, user: str, message: dict[str, Any], channel: str, action_id: str) -> dict[str, Any]:
        """A block_actions payload: `user` pressed the button `action_id` on `message`."""
        button = next(e for b in message["blocks"] if b["type"] == "actions"
                      for e in b["elements"] if e["action_id"] == action_id)
        return {"type": "block_actions", "user": {"id": user, "team_id": TEAM},
                "team": {"id": TEAM}, "api_app_id": APP_ID, "trigger_id": f"tr{next(self._ids)}",
                "channel": {"id": channel}, "container": {"type": "message",
                "message_ts": message["ts"], "channel_id": channel},
                "message": message, "response_url": f"{self.url}/respond",
                "actions": [{"type": "button", "action_id": action_id,
                             "block_id": "approval", "value": button["value"],
                             "action_ts": f"{time.time():.6f}"}]}

    def slash(self, user: str, channel: str, text: str, command: str = "/wintermute") -> dict[str, Any]:
        return {"token": "legacy", "team_id": TEAM, "channel_id": channel, "user_id": user,
                "command": command, "text": text, "api_app_id": APP_ID,
                "trigger_id": f"tr{next(self._ids)}", "response_url": f"{self.url}/respond"}
