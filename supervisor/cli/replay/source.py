"""Where a recording comes from: the instance's JetStream history, or an exported file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO

import msgspec

from bus import Bus
from bus.history import read_stream
from contracts.replay import ExportedMessage
from supervisor.cli.replay.record import Entry, Recording, build, decode_entry

_line = msgspec.json.Decoder(ExportedMessage)
_enc = msgspec.json.Encoder()


class ImportError_(Exception):  # noqa: N801 - not the builtin ImportError
    """An exported file that cannot be read; the message says which line and why."""


async def from_history(bus: Bus) -> Recording:
    """Every stream of the instance, oldest first (WM_CMD and WM_EVT keep 7 days, the rest 30)."""
    entries: list[Entry] = []
    for spec in bus.subjects.streams():
        async for stored in read_stream(bus, spec.name):
            entry = decode_entry(stored.stream, stored.seq, stored.subject, stored.headers,
                                 stored.data)
            if entry is not None:
                entries.append(entry)
    return build(entries)


def export_lines(entries: Iterable[Entry]) -> list[bytes]:
    """One JSON object per stored message: stream, sequence, subject, headers and payload."""
    return [_enc.encode(ExportedMessage(stream=e.stream, seq=e.seq, subject=e.subject,
                                        headers=e.headers, msg=msgspec.Raw(e.raw)))
            for e in entries]


def from_file(path: Path) -> Recording:
    """A recording from `replay --export` output; a bad line is an error naming the line."""
    try:
        with path.open("rb") as f:
            return from_lines(f, str(path))
    except OSError as exc:
        raise ImportError_(f"Cannot read {path}: {exc.strerror}.") from None


def from_lines(f: IO[bytes], name: str) -> Recording:
    entries: list[Entry] = []
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            rec = _line.decode(line)
        except msgspec.DecodeError as exc:
            raise ImportError_(
                f"{name} line {n} is not an exported message ({exc}); export a session with "
                "`wintermute replay --export SESSION > file.jsonl`.") from None
        entry = decode_entry(rec.stream, rec.seq, rec.subject, rec.headers, bytes(rec.msg))
        if entry is None:
            raise ImportError_(f"{name} line {n} holds a payload this version cannot decode.")
        entries.append(entry)
    if not entries:
        raise ImportError_(f"{name} holds no messages.")
    return build(entries)
