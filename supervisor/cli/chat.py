"""`wintermute chat`: the terminal side of the terminal channel, as the owner."""

from __future__ import annotations

import asyncio
import sys
import uuid

import msgspec

from bus import Bus, Delivery, PayloadTooLarge, PublishError, StoreFull, codec
from contracts import Delivered, TerminalInput
from contracts.config import Settings
from kit.redact import credential_guard
from supervisor.cli import progress
from supervisor.cli.client import connect
from supervisor.cli.watch import until_stopped

_delivered = codec.decoder_for(Delivered)


def _approval_text(d: Delivered) -> str:
    return (
        f"Approval needed [{d.ref}]: {d.text}\n"
        f"  approve: wintermute approve {d.ref}\n  deny:    wintermute deny {d.ref}"
    )


class ChatClient:
    def __init__(self, bus: Bus, chat: str) -> None:
        self.bus = bus
        self.chat = chat
        self.inbox: asyncio.Queue[Delivered] = asyncio.Queue()

    async def start(self) -> None:
        async def on_msg(raw: Delivery) -> None:
            try:
                self.inbox.put_nowait(_delivered.decode(raw.data))
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass

        subject = self.bus.subjects.route(Delivered, chat=self.chat)
        await self.bus.subscribe(subject, on_msg)

    async def send(self, text: str) -> str:
        """Publish a line as terminal input; a pasted credential never reaches the stream (it
        would be stored there and in the event log): blocked here, or redacted in place."""
        msg = TerminalInput(id=uuid.uuid4().hex, chat=self.chat, text=text)
        guard = credential_guard(text)
        if guard.action == "block":
            self.inbox.put_nowait(Delivered(id=f"{msg.id}:notice", chat=self.chat,
                                            kind="notice", text=guard.text, ref=msg.id))
            return msg.id
        if guard.action == "redact":
            msg = TerminalInput(id=msg.id, chat=self.chat, text=guard.text)
        await self.bus.send(msg)
        return msg.id

    async def try_send(self, text: str) -> str | None:
        """send(), printing a sentence instead of a traceback when it cannot be stored."""
        try:
            return await self.send(text)
        except PublishError as exc:
            print(f"Not sent: {unsent_reason(exc)}", file=sys.stderr, flush=True)
            return None


def unsent_reason(exc: PublishError) -> str:
    """Why a message could not be handed over, as a sentence with what to do."""
    if isinstance(exc, StoreFull):
        return ("the message store is full (the disk is out of space). Free some space on the "
                "disk holding the home's data/ folder; wintermute resumes by itself, then send "
                "it again.")
    if isinstance(exc, PayloadTooLarge):
        return "the message is over the 1 MiB limit; send it in smaller parts or as a file."
    return f"{exc}. Check `wintermute status`, then send it again."


async def chat_once(settings: Settings, text: str, chat: str, timeout: float) -> int:  # noqa: ASYNC109
    """Send one message, print the reply; progress and "still thinking…" go to stderr."""
    bus = await connect(settings, "chat")
    tasks: list[asyncio.Task[object]] = []
    try:
        client = ChatClient(bus, chat)
        await client.start()
        tasks.append(asyncio.create_task(progress.startup(bus, _to_stderr)))
        sent = await client.try_send(text)
        if sent is None:
            return 1
        input_id = sent
        turn_id = f"terminal:{input_id}"
        thinking = progress.Thinking()
        thinking.sent(input_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                print(f"No reply within {timeout:.0f}s: {await progress.why_no_reply(bus)}. "
                      "Check `wintermute status` and logs/ under WINTERMUTE_HOME.",
                      file=sys.stderr)
                return 1
            try:
                d = await asyncio.wait_for(client.inbox.get(), min(remaining, 1.0))
            except TimeoutError:
                for line in thinking.due():
                    _to_stderr(line)
                continue
            if d.kind == "approval":
                print(_approval_text(d), flush=True)
            elif d.kind in ("reply", "suppressed") and d.ref == turn_id:
                if d.text:
                    print(d.text)
                return 0
            elif d.kind == "notice" and d.ref == input_id:
                print(d.text)
                return 0
            elif d.kind in ("reply", "notice"):
                print(f"[{d.kind}] {d.text}", file=sys.stderr)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await bus.close()


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _between_prompts(line: str) -> None:
    """A line from the agent's side, printed over the prompt, which is then shown again."""
    print(f"\r{line}\n> ", end="", flush=True)


async def _stdin_lines() -> asyncio.StreamReader:
    """stdin as an asyncio stream, so leaving never waits on a blocked reader thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def chat_repl(settings: Settings, chat: str, bus: Bus | None = None) -> int:
    """Interactive chat until end of input (or until `up` stops); approvals answered with y/n.

    `bus` is given by `up --chat` (the supervisor's own connection); a standalone `chat`
    connects itself and leaves with one line when the instance it talks to stops.
    """
    own_bus = bus is None
    bus = bus or await connect(settings, "chat")
    client = ChatClient(bus, chat)
    await client.start()
    pending: list[str] = []
    thinking = progress.Thinking()

    async def printer() -> None:
        while True:
            d = await client.inbox.get()
            thinking.answered(d.ref)
            if d.kind == "approval":
                pending.append(d.ref)
                print(f"\n{_approval_text(d)}\n  approve? [y/n] ", end="", flush=True)
            elif d.text:
                print(f"\n{d.text}\n> ", end="", flush=True)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1.0)
            for line in thinking.due():
                _between_prompts(line)

    tasks: list[asyncio.Task[object]] = [
        asyncio.create_task(printer()), asyncio.create_task(ticker()),
        asyncio.create_task(progress.startup(bus, _between_prompts)),
    ]
    stopped: asyncio.Task[str] | None = None
    if own_bus:
        stopped = asyncio.create_task(until_stopped(settings, bus, "chat"))
    print("Talking to Wintermute as the owner. /help for commands, Ctrl-D to leave.")
    lines = await _stdin_lines()
    try:
        while True:
            print("> ", end="", flush=True)
            reading = asyncio.ensure_future(lines.readline())
            await asyncio.wait([reading, *([stopped] if stopped else [])],
                               return_when=asyncio.FIRST_COMPLETED)
            if stopped is not None and stopped.done():
                reading.cancel()
                print(f"\n{stopped.result()}", file=sys.stderr, flush=True)
                return 1
            line = reading.result().decode(errors="replace")
            if not line:
                return 0
            text = line.strip()
            if not text:
                continue
            if pending and text.lower() in ("y", "yes", "n", "no"):
                verb = "/approve" if text.lower().startswith("y") else "/deny"
                text = f"{verb} {pending.pop(0)}"
            sent = await client.try_send(text)
            if sent is not None:
                thinking.sent(sent)
    finally:
        everything = [*tasks, *([stopped] if stopped else [])]
        for task in everything:
            task.cancel()
        await asyncio.gather(*everything, return_exceptions=True)
        if own_bus:
            await bus.close()
