"""Telegram media to workspace/inbox/: voice, audio, photos, videos and documents.

File names derive from the update, so handling an update twice writes the same file. A file
that cannot be fetched (too big for the Bot API, or failing after retries) is still described
to the agent, with the reason instead of a path, so the message itself is never held up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contracts import Attachment
from kit import safefs

if TYPE_CHECKING:
    from actors.channel.telegram import TelegramAdapter

log = logging.getLogger(__name__)

ATTEMPTS = 3


def seconds(obj: Any, attr: str) -> int:
    """A duration attribute in whole seconds (PTB is migrating these to timedelta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = getattr(obj, attr, None)
    if value is None:
        return 0
    return int(value.total_seconds()) if hasattr(value, "total_seconds") else int(value)


def _safe_name(name: str, default: str) -> tuple[str, str]:
    """(stem, suffix) of a user-supplied file name, reduced to harmless characters."""
    base = Path(name or default).name
    stem, suffix = os.path.splitext(base)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._")[:60] or "file"
    suffix = re.sub(r"[^A-Za-z0-9.]+", "", suffix)[:10]
    return stem, suffix


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{max(1, n // 1024)} KB"


def _items(update_id: int, msg: Any) -> list[tuple[str, Any, str, str]]:
    """(kind, telegram file, file name, description) for each medium in a message."""
    stamp = msg.date.strftime("%Y%m%d-%H%M%S")
    tag = f"{stamp}_{update_id}"
    out: list[tuple[str, Any, str, str]] = []
    if msg.voice:
        out.append(("voice message", msg.voice, f"voice_{tag}.ogg",
                    f"{seconds(msg.voice, 'duration')}s"))
    if msg.audio:
        stem, suffix = _safe_name(msg.audio.file_name or "", "audio.mp3")
        title = msg.audio.title or msg.audio.file_name or ""
        desc = f"{seconds(msg.audio, 'duration')}s" + (f", {title}" if title else "")
        out.append(("audio", msg.audio, f"audio_{tag}_{stem}{suffix or '.mp3'}", desc))
    if msg.photo:
        best = msg.photo[-1]  # Telegram lists sizes smallest first
        out.append(("photo", best, f"photo_{tag}.jpg", f"{best.width}x{best.height}"))
    if msg.video:
        out.append(("video", msg.video, f"video_{tag}.mp4", f"{seconds(msg.video, 'duration')}s"))
    if msg.video_note:
        out.append(("video message", msg.video_note, f"videonote_{tag}.mp4",
                    f"{seconds(msg.video_note, 'duration')}s"))
    if msg.document:
        doc = msg.document
        stem, suffix = _safe_name(doc.file_name or "", "document")
        desc = ", ".join(x for x in (doc.file_name, doc.mime_type,
                                     _size(doc.file_size) if doc.file_size else "") if x)
        out.append(("document", doc, f"{stem}_{update_id}{suffix}", desc))
    return out


async def _fetch(bot: Any, media: Any, workspace: Path, rel: str) -> None:
    """Download through getFile into workspace/rel, atomically (a partial file never shows
    up) and never through a link the sandbox planted (kit.safefs)."""
    from telegram.error import BadRequest, NetworkError, RetryAfter

    from actors.channel._telegram_send import retry_secs

    for attempt in range(1, ATTEMPTS + 1):
        try:
            tg_file = await bot.get_file(media.file_id)
            with safefs.atomic_writer(workspace, rel) as out:
                await tg_file.download_to_memory(out)
            return
        except BadRequest:
            raise
        except RetryAfter as exc:
            if attempt == ATTEMPTS:
                raise
            await asyncio.sleep(retry_secs(exc))
        except (NetworkError, OSError):
            if attempt == ATTEMPTS:
                raise
            await asyncio.sleep(0.5 * 2**attempt)


async def download_media(adapter: TelegramAdapter, update_id: int, msg: Any) -> list[Attachment]:
    """Store a message's media under workspace/inbox/ and describe each file."""
    from telegram.error import TelegramError

    items = _items(update_id, msg)
    if not items:
        return []
    inbox = adapter.workspace / "inbox"
    with contextlib.suppress(safefs.UnsafePath):  # a planted link: each download says so
        safefs.make_dirs(adapter.workspace, "inbox")
    limit = adapter.tg.max_download_mb << 20
    out: list[Attachment] = []
    for kind, media, name, desc in items:
        target = inbox / name
        rel = f"inbox/{name}"
        size = getattr(media, "file_size", 0) or 0
        if size > limit:
            out.append(Attachment(kind=kind, path="(not downloaded)", description=(
                f"{desc}; {_size(size)} is over the {adapter.tg.max_download_mb} MB "
                "download limit of the Bot API")))
            continue
        if not target.exists():
            try:
                await _fetch(adapter.bot, media, adapter.workspace, rel)
            except (TelegramError, OSError, safefs.UnsafePath) as exc:
                log.warning("could not download %s for update %s: %s", kind, update_id,
                            adapter.scrub(str(exc)))
                out.append(Attachment(kind=kind, path="(not downloaded)",
                                      description=f"{desc}; the download failed"))
                continue
        out.append(Attachment(kind=kind, path=rel, description=desc))
    return out
