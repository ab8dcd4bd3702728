"""A local server speaking the Telegram Bot API, for python-telegram-bot to talk to in tests.

It keeps a queue of updates with real getUpdates semantics (updates below the offset are
confirmed and dropped; long polling waits up to `timeout`), accepts sends and validates their
HTML like Telegram does (allowed tags, balanced, entities, 4096 characters after parsing),
serves files at the file URL, and records every call. Edits and deletions change the stored
message like Telegram (an edit to the same content is refused as "not modified"). Tests script it: inject updates, answer
the next calls with 429 or 5xx, stall a method until released.

Run it alone:  python -m tests.fakes.telegram_server --port 8081
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = "123456789:TEST-token-for-the-fake-telegram-server"
BOT_ID = 123456789
BOT_USERNAME = "wm_test_bot"
ALLOWED_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
                "tg-spoiler", "span", "blockquote", "tg-emoji"}
_TAG = re.compile(r"<(/?)([a-zA-Z-]+)((?:\s[^<>]*)?)>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d+|#x[0-9a-fA-F]+);")


def check_html(text: str) -> str:
    """Telegram's HTML rules; returns the error description, or "" when the text is fine."""
    stack: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            m = _TAG.match(text, i)
            if not m or m.group(2).lower() not in ALLOWED_TAGS:
                return f"Bad Request: can't parse entities: Unsupported start tag at byte offset {i}"
            name = m.group(2).lower()
            if m.group(1):
                if not stack or stack.pop() != name:
                    return f"Bad Request: can't parse entities: Unmatched end tag {name!r}"
            else:
                stack.append(name)
            i = m.end()
        elif c == "&":
            if not _ENTITY.match(text, i):
                return f"Bad Request: can't parse entities: Unsupported entity at offset {i}"
            i += 1
        else:
            i += 1
    if stack:
        return f"Bad Request: can't parse entities: Can't find end tag corresponding to {stack[-1]}"
    return ""


def shown(text: str, parse_mode: str | None) -> str:
    """What the user would see."""
    if (parse_mode or "").upper() == "HTML":
        return html.unescape(_TAG.sub("", text))
    return text


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Call:
    """One request the server answered (or refused)."""

    method: str
    params: dict[str, Any]
    ts: float
    status: int = 200
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Failure:
    status: int
    retry_after: int | None = None
    description: str = ""


class FakeTelegram:
    """The Bot API for one bot, with a scriptable update queue and a record of every call."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.next_update_id = 1000
        self.confirmed = 0  # highest update_id confirmed through an offset
        self.next_message_id = 1
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, content)
        self.failures: dict[str, list[Failure]] = {}
        self.stalled: dict[str, tuple[asyncio.Event, int]] = {}
        self.held = 0  # calls being held by a stall right now
        self.webhook: dict[str, Any] = {}
        self.sent: list[dict[str, Any]] = []  # messages as delivered to chats (edits applied)
        self.deleted: list[dict[str, Any]] = []  # messages deleted with deleteMessage
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, port: int = 0) -> str:
        app = web.Application(client_max_size=60 << 20)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        real = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{real}"
        return self.url

    async def stop(self) -> None:
        for ev, _ in self.stalled.values():
            ev.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base_url(self) -> str:
        return f"{self.url}/bot"

    @property
    def api_file_url(self) -> str:
        return f"{self.url}/file/bot"

    # -- scripting ---------------------------------------------------------------------------

    def inject(self, update: dict[str, Any]) -> int:
        """Queue an update (an update_id is assigned); returns its id."""
        update = dict(update)
        update["update_id"] = self.next_update_id
        self.next_update_id += 1
        self.updates.append(update)
        asyncio.get_running_loop().create_task(self._notify())
        return int(update["update_id"])

    def fail_next(self, method: str, times: int = 1, status: int = 429,
                  retry_after: int | None = None, description: str = "") -> None:
        """Answer the next `times` calls of `method` with an error."""
        self.failures.setdefault(method, []).extend(
            Failure(status, retry_after, description) for _ in range(times)
        )

    def stall(self, method: str, after: int = 0) -> None:
        """Hold calls of `method` (unanswered) once `after` of them succeeded, until `release`."""
        self.stalled.setdefault(method, (asyncio.Event(), after))

    def release(self, method: str) -> None:
        entry = self.stalled.pop(method, None)
        if entry is not None:
            entry[0].set()

    def add_file(self, file_path: str, content: bytes) -> str:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = (file_path, content)
        return file_id

    def of(self, method: str, ok_only: bool = True) -> list[Call]:
        return [c for c in self.calls if c.method == method and (c.status == 200 or not ok_only)]

    def messages_to(self, chat_id: int | str) -> list[dict[str, Any]]:
        return [m for m in self.sent if str(m["chat"]["id"]) == str(chat_id)]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Wait until predicate() is truthy (checked after every call); return its value."""
        async with asyncio.timeout(timeout):
            async with self._changed:
                while True:
                    value = predicate()
                    if value:
                        return value
                    await self._changed.wait()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- update builders -------------------------------------------------------------------

    @staticmethod
    def user(user_id: int, name: str = "") -> dict[str, Any]:
        name = name or f"user{user_id}"
        return {"id": user_id, "is_bot": False, "first_name": name.title(), "username": name}

    def message(self, user_id: int, text: str = "", chat_id: int | None = None,
                chat_type: str = "private", **extra: Any) -> dict[str, Any]:
        chat_id = user_id if chat_id is None else chat_id
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = f"User{user_id}"
        else:
            chat["title"] = f"Group {chat_id}"
        msg: dict[str, Any] = {
            "message_id": self.next_message_id, "date": int(time.time()), "chat": chat,
            "from": self.user(user_id),
        }
        self.next_message_id += 1
        if text:
            msg["text"] = text
            if text.startswith("/"):
                word = text.split()[0]
                msg["entities"] = [{"type": "bot_command", "offset": 0, "length": len(word)}]
            mention = f"@{BOT_USERNAME}"
            if mention in text:
                msg.setdefault("entities", []).append(
                    {"type": "mention", "offset": utf16_len(text[: text.index(mention)]),
                     "length": len(mention)}
                )
        msg.update(extra)
        return {"message": msg}

    def callback(self, user_id: int, data: str, message: dict[str, Any]) -> dict[str, Any]:
        return {"callback_query": {
            "id": f"cb{self.next_update_id}", "from": self.user(user_id),
            "chat_instance": "ci-1", "data": data, "message": message,
        }}

    # -- the API -----------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> tuple[dict[str, Any], dict[str, bytes]]:
        params: dict[str, Any] = dict(request.query)
        files: dict[str, bytes] = {}
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                data = await part.read()  # type: ignore[union-attr]
                if part.filename:  # type: ignore[union-attr]
                    files[part.name or ""] = data  # type: ignore[union-attr]
                    params[f"{part.name}__filename"] = part.filename  # type: ignore[union-attr]
                else:
                    params[part.name or ""] = data.decode()  # type: ignore[union-attr]
        elif request.can_read_body:
            params.update(dict(await request.post()))
        for key, value in list(params.items()):
            if isinstance(value, str) and value[:1] in "[{":
                try:
                    params[key] = json.loads(value)
                except ValueError:
                    pass
        return params, files

    @staticmethod
    def _error(status: int, description: str, **parameters: Any) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if parameters:
            body["parameters"] = parameters
        return web.json_response(body, status=status)

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params, files = await self._params(request)
        call = Call(method, params, time.time(), files=files)
        if request.match_info["token"] != self.token:
            call.status = 401
            self.calls.append(call)
            return self._error(401, "Unauthorized")
        stall = self.stalled.get(method)
        if stall is not None and len(self.of(method)) >= stall[1]:
            self.held += 1
            await self._notify()
            try:
                await stall[0].wait()
            finally:
                self.held -= 1
            if request.transport is None or request.transport.is_closing():
                return web.Response(status=499)  # the client went away: nothing happened
        pending = self.failures.get(method)
        if pending:
            failure = pending.pop(0)
            call.status = failure.status
            self.calls.append(call)
            await self._notify()
            if failure.retry_after is not None:
                return self._error(
                    failure.status, failure.description or
                    f"Too Many Requests: retry after {failure.retry_after}",
                    retry_after=failure.retry_after,
                )
            return self._error(failure.status, failure.description or "Bad Gateway")
        handler = getattr(self, f"_m_{method.lower()}", None)
        if handler is None:
            call.status = 404
            self.calls.append(call)
            return self._error(404, "Not Found: method not found")
        try:
            result = await handler(params, files)
        except _ApiError as exc:
            call.status = exc.status
            self.calls.append(call)
            await self._notify()
            return self._error(exc.status, exc.description)
        self.calls.append(call)
        await self._notify()
        return web.json_response({"ok": True, "result": result})

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        for file_path, content in self.files.values():
            if file_path == path:
                return web.Response(body=content)
        return web.Response(status=404)

    # -- methods -----------------------------------------------------------------------------

    def _bot_user(self) -> dict[str, Any]:
        return {"id": BOT_ID, "is_bot": True, "first_name": "Wintermute", "username": BOT_USERNAME,
                "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False}

    async def _m_getme(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        return self._bot_user()

    async def _m_getupdates(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        if self.webhook.get("url"):
            raise _ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(p.get("offset") or 0)
        if offset:
            self.confirmed = max(self.confirmed, offset - 1)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        limit = int(p.get("limit") or 100)
        deadline = time.monotonic() + float(p.get("timeout") or 0)
        while True:
            ready = [u for u in self.updates if u["update_id"] >= offset][:limit]
            if ready or time.monotonic() >= deadline:
                return ready
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), deadline - time.monotonic())
                except TimeoutError:
                    pass

    def _chat(self, chat_id: Any) -> dict[str, Any]:
        cid = int(chat_id)
        return {"id": cid, "type": "private" if cid > 0 else "supergroup"}

    def _store(self, p: dict[str, Any], **content: Any) -> dict[str, Any]:
        msg = {"message_id": self.next_message_id, "date": int(time.time()),
               "chat": self._chat(p["chat_id"]), "from": self._bot_user(), **content}
        if p.get("reply_markup"):
            msg["reply_markup"] = p["reply_markup"]
        if p.get("message_thread_id"):
            msg["message_thread_id"] = int(p["message_thread_id"])
        self.next_message_id += 1
        self.sent.append(msg)
        return msg

    async def _m_sendmessage(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        text = str(p.get("text", ""))
        mode = p.get("parse_mode")
        if mode and str(mode).upper() == "HTML" and (err := check_html(text)):
            raise _ApiError(400, err)
        seen = shown(text, mode)
        if not seen.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if utf16_len(seen) > 4096:
            raise _ApiError(400, "Bad Request: message is too long")
        return self._store(p, text=seen, raw=text)

    async def _m_editmessagetext(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        text = str(p.get("text", ""))
        if (p.get("parse_mode") or "").upper() == "HTML" and (err := check_html(text)):
            raise _ApiError(400, err)
        seen = shown(text, p.get("parse_mode"))
        if not seen.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if utf16_len(seen) > 4096:
            raise _ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        for m in self.sent:
            if m["message_id"] == int(p.get("message_id", 0)):
                if m["text"] == seen and m.get("raw", text) == text:
                    raise _ApiError(400, "Bad Request: message is not modified: specified new "
                                    "message content and reply markup are exactly the same as "
                                    "a current content and reply markup of the message")
                m["text"], m["raw"] = seen, text
                return m
        raise _ApiError(400, "Bad Request: message to edit not found")

    async def _m_deletemessage(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        for m in self.sent:
            if m["message_id"] == int(p.get("message_id", 0)) and \
                    str(m["chat"]["id"]) == str(p.get("chat_id")):
                self.sent.remove(m)
                self.deleted.append(m)
                return True
        raise _ApiError(400, "Bad Request: message to delete not found")

    async def _m_editmessagereplymarkup(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        for m in self.sent:
            if m["message_id"] == int(p.get("message_id", 0)):
                m["reply_markup"] = p.get("reply_markup") or {}
                return m
        return True

    async def _m_sendchataction(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        return True

    async def _send_file(self, p: dict[str, Any], f: dict[str, bytes], kind: str) -> Any:
        if kind not in f:
            raise _ApiError(400, f"Bad Request: there is no {kind} in the request")
        caption = str(p.get("caption", ""))
        if caption and (p.get("parse_mode") or "").upper() == "HTML" and (err := check_html(caption)):
            raise _ApiError(400, err)
        content = {"file_name": p.get(f"{kind}__filename", ""), "size": len(f[kind]),
                   "data": f[kind]}
        return self._store(p, caption=shown(caption, p.get("parse_mode")), **{kind: content})

    async def _m_senddocument(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        msg = await self._send_file(p, f, "document")
        return {**msg, "document": {"file_id": "sent", "file_unique_id": "sent",
                                    "file_name": msg["document"]["file_name"]}}

    async def _m_sendphoto(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        msg = await self._send_file(p, f, "photo")
        return {**msg, "photo": [{"file_id": "sent", "file_unique_id": "sent", "width": 1,
                                  "height": 1}]}

    async def _m_answercallbackquery(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        return True

    async def _m_getfile(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        file_id = str(p.get("file_id", ""))
        if file_id not in self.files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        path, content = self.files[file_id]
        return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(content),
                "file_path": path}

    async def _m_setwebhook(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        self.webhook = {"url": p.get("url", ""), "secret_token": p.get("secret_token", ""),
                        "allowed_updates": p.get("allowed_updates")}
        return True

    async def _m_deletewebhook(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        self.webhook = {}
        return True

    async def _m_getwebhookinfo(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        return {"url": self.webhook.get("url", ""), "has_custom_certificate": False,
                "pending_update_count": len(self.updates)}

    async def _m_close(self, p: dict[str, Any], f: dict[str, bytes]) -> Any:
        return True


class _ApiError(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


async def _main(port: int) -> None:
    server = FakeTelegram()
    url = await server.start(port)
    print(url, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_main(parser.parse_args().port))
