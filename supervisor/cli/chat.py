"""`wintermute chat`: the terminal side of the terminal channel, as the owner."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from typing import Any

import msgspec

from bus import Bus, codec
from contracts import ApprovalResolved, Delivered, TerminalInput
from contracts.config import Settings
from supervisor.cli.client import connect

_delivered = codec.decoder_for(Delivered)
_resolved = codec.decoder_for(ApprovalResolved)


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
        async def on_msg(raw: object) -> None:
            try:
                self.inbox.put_nowait(_delivered.decode(raw.data))  # type: ignore[attr-defined]
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass

        subject = self.bus.subjects.evt("channel", "delivered", self.chat)
        await self.bus.nc.subscribe(subject, cb=on_msg)

    async def send(self, text: str) -> str:
        msg = TerminalInput(id=uuid.uuid4().hex, chat=self.chat, text=text)
        await self.bus.publish(self.bus.subjects.cmd("channel", "terminal"), msg)
        return msg.id


async def chat_once(settings: Settings, text: str, chat: str, timeout: float) -> int:
    bus = await connect(settings, "chat")
    try:
        client = ChatClient(bus, chat)
        await client.start()
        input_id = await client.send(text)
        turn_id = f"terminal:{input_id}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                print(f"No reply within {timeout:.0f}s. Check `wintermute status` and "
                      "logs/ under WINTERMUTE_HOME.", file=sys.stderr)
                return 1
            try:
                d = await asyncio.wait_for(client.inbox.get(), remaining)
            except TimeoutError:
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
        await bus.close()


async def _stdin_lines() -> asyncio.StreamReader:
    """stdin as an asyncio stream, so leaving never waits on a blocked reader thread."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def chat_repl(settings: Settings, chat: str, bus: Bus | None = None) -> int:
    """Interactive chat until end of input; approval prompts are answered with y/n."""
    own_bus = bus is None
    bus = bus or await connect(settings, "chat")
    client = ChatClient(bus, chat)
    await client.start()
    pending: list[str] = []

    async def printer() -> None:
        while True:
            d = await client.inbox.get()
            if d.kind == "approval":
                pending.append(d.ref)
                print(f"\n{_approval_text(d)}\n  approve? [y/n] ", end="", flush=True)
            elif d.text:
                print(f"\n{d.text}\n> ", end="", flush=True)

    task = asyncio.create_task(printer())
    print("Talking to Wintermute as the owner. /help for commands, Ctrl-D to leave.")
    lines = await _stdin_lines()
    try:
        while True:
            print("> ", end="", flush=True)
            line = (await lines.readline()).decode(errors="replace")
            if not line:
                return 0
            text = line.strip()
            if not text:
                continue
            if pending and text.lower() in ("y", "yes", "n", "no"):
                verb = "/approve" if text.lower().startswith("y") else "/deny"
                text = f"{verb} {pending.pop(0)}"
            await client.send(text)
    finally:
        task.cancel()
        if own_bus:
            await bus.close()


async def decide(settings: Settings, approval_id: str, approve: bool, chat: str,
                 timeout: float = 30) -> int:  # noqa: ASYNC109 - a deadline for the answer
    """approve/deny: 0 once the approval is resolved as asked, 1 (with the reason) otherwise.

    The decision goes through the terminal channel like `/approve ID` in chat; the outcome is
    the approval actor's `approval.resolved` for that id, or its notice saying why not.
    """
    verb = "approve" if approve else "deny"
    principal = f"terminal:{chat}"
    if principal not in settings.config.owner.principals:
        print(f"Only the owner can {verb}: {principal} is not in owner.principals "
              f"({settings.home}/config.toml [owner]); add it to decide from this terminal.",
              file=sys.stderr)
        return 1
    bus = await connect(settings, verb)
    try:
        outcome: asyncio.Queue[ApprovalResolved] = asyncio.Queue()

        async def on_resolved(raw: Any) -> None:
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                resolved = _resolved.decode(raw.data)
                if resolved.approval_id == approval_id:
                    outcome.put_nowait(resolved)

        await bus.nc.subscribe(f"{bus.subjects.p}.evt.approval.resolved.>", cb=on_resolved)
        client = ChatClient(bus, chat)
        await client.start()
        input_id = await client.send(f"/{verb} {approval_id}")
        refused_ref = f"{input_id}:decision:notice"  # the approval actor's "it did not happen"
        want = "approved" if approve else "denied"
        async with asyncio.timeout(timeout):
            while True:
                got_resolved = asyncio.ensure_future(outcome.get())
                got_notice = asyncio.ensure_future(client.inbox.get())
                done, pending = await asyncio.wait({got_resolved, got_notice},
                                                   return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                if got_resolved in done:
                    resolved = got_resolved.result()
                    if resolved.status == want:
                        print(f"{want.capitalize()} {approval_id}.")
                        return 0
                    print(f"Approval {approval_id} was {resolved.status}, not {want}.",
                          file=sys.stderr)
                    return 1
                d = got_notice.result()
                if d.kind == "notice" and d.ref == refused_ref:
                    print(d.text, file=sys.stderr)
                    return 1
    except TimeoutError:
        print(f"No answer about approval {approval_id} within {timeout:.0f} s: the approval "
              "actor may be down or busy. Check `wintermute status`, then try again.",
              file=sys.stderr)
        return 1
    finally:
        await bus.close()
