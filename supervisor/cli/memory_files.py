"""`wintermute memory history|revert|changes|apply|drop`: the versions of AGENTS.md and USER.md.

The executor owns those files behind the WriteGate (actors/executor/gate), so these are
`home.command` messages to it, answered by one `home.answer` event; they need `wintermute up`.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import click
import msgspec

from bus import Delivery, codec
from contracts import HomeAnswer, HomeCommand, short_hash
from contracts.config import Settings
from supervisor.cli.client import connect

_answer = codec.decoder_for(HomeAnswer)


async def ask(settings: Settings, request: HomeCommand, timeout: float) -> HomeAnswer:
    """Send one command to the executor and wait for its answer."""
    bus = await connect(settings, "memory")
    try:
        done: asyncio.Future[HomeAnswer] = asyncio.get_running_loop().create_future()

        async def on_msg(delivery: Delivery) -> None:
            try:
                answer = _answer.decode(delivery.data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return
            if answer.request == request.id and not done.done():
                done.set_result(answer)

        await bus.subscribe(bus.subjects.evt("home", "answer", short_hash(request.id, 16)),
                            on_msg)
        await bus.send(request)
        try:
            return await asyncio.wait_for(done, timeout)
        except TimeoutError:
            sys.exit(f"The executor did not answer within {timeout:.0f}s; check `wintermute "
                     "status` (the command stays queued until it is back).")
    finally:
        await bus.close()


def _run(action: str, arg: str = "") -> None:
    from supervisor.cli.main import _settings

    request = HomeCommand(id=f"cli:home:{uuid.uuid4().hex}", action=action, arg=arg,
                          principal="cli", is_owner=True)
    answer = asyncio.run(ask(_settings(), request, 60.0))
    click.echo(answer.text, err=not answer.ok)
    sys.exit(0 if answer.ok else 1)


@click.command()
def history() -> None:
    """The versions of AGENTS.md and USER.md, newest first."""
    _run("history")


@click.command()
@click.argument("version", default="")
def revert(version: str) -> None:
    """Undo one version of AGENTS.md/USER.md (default: the newest) as a new version."""
    _run("revert", version)


@click.command()
def changes() -> None:
    """Proposed changes to AGENTS.md/USER.md waiting for the owner."""
    _run("pending")


@click.command("apply")
@click.argument("change_id")
def apply_(change_id: str) -> None:
    """Apply a waiting change (one whose approval prompt expired, too)."""
    _run("apply", change_id)


@click.command()
@click.argument("change_id")
def drop(change_id: str) -> None:
    """Drop a waiting change to AGENTS.md/USER.md."""
    _run("drop", change_id)


COMMANDS = (history, revert, changes, apply_, drop)
