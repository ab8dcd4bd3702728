"""Outbound to Telegram: what a message becomes (parts) and sending one part with retries.

A part is one Telegram message: an HTML text chunk (with a plain fallback) or a workspace file.
The adapter marks each part sent in KV, so a crash after part 2 of 4 resends only parts 3-4.
Retries: 429 waits exactly `retry_after`; network errors and 5xx back off exponentially; a
request Telegram refused (400/403) is never retried.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from actors.channel._telegram_format import (
    escape,
    extract_files,
    split_html,
    split_plain,
)
from contracts import ApprovalPrompt, Notice
from kit.outbound import Refused, SecretScanner, check_file
from kit.safefs import UnsafePath, read_bytes

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_RETRY_SECS = 300.0  # then the handler fails and the bus redelivers (sent parts stay sent)
PHOTO_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp"}
PHOTO_MAX = 10 << 20
UPLOAD_MAX = 50 << 20


@dataclass(frozen=True)
class Part:
    """One Telegram message to send."""

    html: str = ""
    plain: str = ""
    path: Path | None = None
    data: bytes = b""  # a file's bytes, read once without following links, as checked
    buttons: tuple[tuple[str, str], ...] = ()  # (label, callback data)


def reply_parts(text: str, workspace: Path, scanner: SecretScanner) -> list[Part]:
    """A reply as HTML chunks followed by the workspace files it names with [file: path].

    Files pass the same outbound gate as send_message (inside the workspace, size, no secret),
    whoever's turn wrote the marker."""
    body, refs = extract_files(text)
    parts = [Part(html=h, plain=src) for h, src in split_html(body)]
    notes = []
    for ref in refs:
        try:
            rel = check_file(workspace, ref.strip().strip("'\""), scanner)
        except Refused as exc:
            notes.append(f"(Could not attach {ref}: {exc})")
            continue
        path = workspace.resolve() / rel
        try:
            # What is sent is exactly what was checked: read once, no links, checked again.
            data = read_bytes(workspace.resolve(), rel, limit=UPLOAD_MAX + 1)
        except (OSError, UnsafePath) as exc:
            notes.append(f"(Could not attach {ref}: {exc})")
            continue
        if len(data) > UPLOAD_MAX:
            notes.append(f"(Could not attach {ref}: Telegram bots can send files up to 50 MB.)")
        elif scanner.find(data.decode("latin-1"), shapes=True):
            notes.append(f"(Could not attach {ref}: it contains a secret, so it was not sent.)")
        else:
            parts.append(Part(path=path, data=data))
    if notes:
        note = "\n".join(notes)
        parts.append(Part(html=escape(note), plain=note))
    return parts


def notice_parts(msg: Notice) -> list[Part]:
    """A notice is plain text: escaped, never interpreted as markup."""
    return [Part(html=escape(c), plain=c) for c in split_plain(msg.text)]


def approval_parts(msg: ApprovalPrompt) -> list[Part]:
    """The prompt text, with Approve / Deny buttons on its last message."""
    minutes = max(1, round((msg.expires_at - time.time()) / 60))
    head = f"Approval needed (ID {msg.approval_id}, expires in about {minutes} min)\n"
    chunks = split_plain(head + msg.summary, 3900)
    parts = [Part(html=escape(c), plain=c) for c in chunks]
    data = (f"a:{msg.approval_id}", f"d:{msg.approval_id}")
    if parts and all(len(d.encode()) <= 64 for d in data):  # Telegram's callback data limit
        last = parts[-1]
        parts[-1] = Part(html=last.html, plain=last.plain,
                         buttons=(("Approve", data[0]), ("Deny", data[1])))
    return parts


def retry_secs(exc: Any) -> float:
    """Seconds a RetryAfter asks for (PTB is migrating this attribute to timedelta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


async def with_retries(call: Callable[[], Awaitable[T]], what: str) -> T:
    """Run one Bot API call, waiting out 429s and backing off on transient failures."""
    from telegram.error import (
        BadRequest,
        ChatMigrated,
        Conflict,
        Forbidden,
        InvalidToken,
        NetworkError,
        RetryAfter,
    )

    delay, waited = 1.0, 0.0
    while True:
        try:
            return await call()
        except RetryAfter as exc:
            wait = retry_secs(exc) + 0.05
            log.warning("telegram %s: rate limited, waiting %.0fs as asked", what, wait)
        except (BadRequest, Forbidden, InvalidToken, ChatMigrated, Conflict):
            raise  # Telegram answered: repeating the same request cannot help
        except NetworkError as exc:  # includes TimedOut and 5xx answers
            wait, delay = delay, min(delay * 2, 30.0)
            log.warning("telegram %s failed (%s); retrying in %.0fs", what, type(exc).__name__,
                        wait)
        if waited + wait > MAX_RETRY_SECS:
            raise TimeoutError(f"telegram {what}: still failing after {waited:.0f}s of retries")
        await asyncio.sleep(wait)
        waited += wait


async def deliver(bot: Any, chat: int, thread: int | None, part: Part) -> int:
    """Send one part; returns Telegram's message id."""
    from telegram import InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions
    from telegram.error import BadRequest, ChatMigrated

    markup = None
    if part.buttons:
        markup = InlineKeyboardMarkup(
            [[InlineKeyboardButton(label, callback_data=data) for label, data in part.buttons]]
        )
    no_preview = LinkPreviewOptions(is_disabled=True)

    async def text(target: int) -> Any:
        try:
            return await with_retries(lambda: bot.send_message(
                target, part.html, parse_mode="HTML", reply_markup=markup,
                message_thread_id=thread, link_preview_options=no_preview), "sendMessage")
        except BadRequest as exc:
            if "parse entities" not in str(exc).lower():
                raise
            log.warning("telegram refused the HTML (%s); sending plain text", exc)
            return await with_retries(lambda: bot.send_message(
                target, part.plain, reply_markup=markup, message_thread_id=thread,
                link_preview_options=no_preview), "sendMessage")

    async def upload(target: int) -> Any:
        path = part.path
        assert path is not None
        data = part.data
        photo = path.suffix.lower() in PHOTO_SUFFIXES and len(data) <= PHOTO_MAX

        async def once() -> Any:
            if photo:
                return await bot.send_photo(target, data, message_thread_id=thread,
                                            filename=path.name)
            return await bot.send_document(target, data, filename=path.name,
                                           message_thread_id=thread)

        return await with_retries(once, "sendPhoto" if photo else "sendDocument")

    send = upload if part.path is not None else text
    try:
        message = await send(chat)
    except ChatMigrated as exc:  # a group became a supergroup: same conversation, new id
        message = await send(int(exc.new_chat_id))
    return int(message.message_id)
