"""`wintermute approve ID` / `deny ID`: decide, then say what happened (exit 1 if it did not)."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import msgspec

from bus import Delivery, codec
from contracts import ApprovalResolved
from contracts.config import Settings
from supervisor.cli.chat import ChatClient
from supervisor.cli.client import connect

_resolved = codec.decoder_for(ApprovalResolved)


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

        async def on_resolved(raw: Delivery) -> None:
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                resolved = _resolved.decode(raw.data)
                if resolved.approval_id == approval_id:
                    outcome.put_nowait(resolved)

        await bus.subscribe(bus.subjects.rel("evt.approval.resolved.>"), on_resolved)
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
