"""`wintermute memory list|search|forget|export|import|reembed`: the owner's view of memory.

The memory actor owns the LanceDB store, so these are commands to it on `cmd.memory.admin`, a
subject only the `cli` NATS user may publish; its answers come back as `memory.answer` events
(several parts for an export or a re-embedding's progress). They need `wintermute up` running.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import msgspec

from bus import Delivery, codec
from contracts import MemoryAdmin, MemoryAnswer, MemoryRecord, short_hash
from contracts.config import Settings
from supervisor.cli.client import connect

IMPORT_PART = 200  # records per import message
_answer = codec.decoder_for(MemoryAnswer)
_record = msgspec.json.Decoder(MemoryRecord)
_enc = msgspec.json.Encoder()


async def ask(settings: Settings, request: MemoryAdmin, timeout: float,
              on_part: Callable[[MemoryAnswer], None] = lambda a: None) -> list[MemoryAnswer]:
    """Send one command to the memory actor and collect its answers up to the last part."""
    bus = await connect(settings, "memory")
    try:
        parts: list[MemoryAnswer] = []
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def on_msg(delivery: Delivery) -> None:
            try:
                answer = _answer.decode(delivery.data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return
            if answer.request != request.id or any(p.part == answer.part for p in parts):
                return
            parts.append(answer)
            on_part(answer)
            if answer.last and not done.done():
                done.set_result(None)

        subject = bus.subjects.evt("memory", "answer", short_hash(request.id, 16))
        await bus.subscribe(subject, on_msg)
        await bus.send(request)
        try:
            await asyncio.wait_for(done, timeout)
        except TimeoutError:
            sys.exit(f"The memory actor did not answer within {timeout:.0f}s; check "
                     "`wintermute status` (the command stays queued until it is back).")
        return sorted(parts, key=lambda p: p.part)
    finally:
        await bus.close()


def _settings() -> Settings:
    from supervisor.cli.main import _settings as settings

    return settings()


def _run(action: str, timeout: float = 60.0, **fields: Any) -> list[MemoryAnswer]:
    request = MemoryAdmin(id=f"cli:memory:{uuid.uuid4().hex}", action=action, **fields)
    return asyncio.run(ask(_settings(), request, timeout))


def _finish(answers: list[MemoryAnswer]) -> None:
    text = "\n".join(a.text for a in answers if a.text)
    ok = all(a.ok for a in answers)
    if text:
        click.echo(text, err=not ok)
    sys.exit(0 if ok else 1)


def render(records: list[MemoryRecord]) -> str:
    """One line per memory: id, scope, kind, content."""
    if not records:
        return "No memories."
    return "\n".join(f"{r.id}  {r.scope}  [{r.kind}] {r.content}" for r in records)


scope_option = click.option("--scope", default="", help="Only this scope (global, user:ID, "
                            "group:ID, session:ID); default: all.")
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@click.group()
def memory() -> None:
    """What the agent remembers, in every scope (needs `wintermute up`)."""


@memory.command("list")
@scope_option
@json_option
@click.option("--limit", default=50, show_default=True)
def list_(scope: str, as_json: bool, limit: int) -> None:
    """The newest memories."""
    answers = _run("list", scope=scope, limit=limit)
    records = [r for a in answers for r in a.records]
    if not all(a.ok for a in answers):
        _finish(answers)
    click.echo(json.dumps([msgspec.to_builtins(r) for r in records], indent=2) if as_json
               else render(records))


@memory.command()
@click.argument("query")
@scope_option
@json_option
@click.option("--limit", default=10, show_default=True)
def search(query: str, scope: str, as_json: bool, limit: int) -> None:
    """Hybrid search (full text and meaning), best first."""
    answers = _run("search", query=query, scope=scope, limit=limit)
    if as_json and all(a.ok for a in answers):
        records = [msgspec.to_builtins(r) for a in answers for r in a.records]
        click.echo(json.dumps(records, indent=2))
        return
    _finish(answers)


@memory.command()
@click.argument("memory_id")
def forget(memory_id: str) -> None:
    """Archive one memory: it is no longer recalled (export keeps it, marked archived)."""
    _finish(_run("forget", target=memory_id))


@memory.command()
@scope_option
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write JSONL here instead of standard output.")
def export(scope: str, output: Path | None) -> None:
    """Every memory (archived too) as JSONL, one record a line: a backup."""
    answers = _run("export", timeout=300.0, scope=scope)
    lines = [_enc.encode(r).decode() for a in answers for r in a.records]
    text = "".join(line + "\n" for line in lines)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"Exported {len(lines)} memories to {output}.", err=True)


@memory.command("import")
@click.argument("source", type=click.File("r"))
@scope_option
def import_(source: Any, scope: str) -> None:
    """Load a JSONL export (ids are kept: importing twice adds nothing). --scope puts every
    record into that scope."""
    records: list[MemoryRecord] = []
    for n, line in enumerate(source, 1):
        if not line.strip():
            continue
        try:
            records.append(_record.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            sys.exit(f"Line {n} of {source.name} is not a memory record ({exc}); nothing was "
                     "imported. Fix or remove that line and run the import again.")
    answers: list[MemoryAnswer] = []
    for start in range(0, len(records), IMPORT_PART) or [0]:
        answers += _run("import", timeout=300.0, scope=scope,
                        records=records[start : start + IMPORT_PART])
    _finish(answers)


@memory.command()
def reembed() -> None:
    """Rebuild every vector with the configured [models] embedding model."""

    def progress(answer: MemoryAnswer) -> None:
        if not answer.last:
            click.echo(f"\r{answer.text}   ", nl=False, err=True)

    request = MemoryAdmin(id=f"cli:memory:{uuid.uuid4().hex}", action="reembed")
    answers = asyncio.run(ask(_settings(), request, 3600.0, progress))
    click.echo("", err=True)
    _finish([a for a in answers if a.last])


@memory.command()
@scope_option
@json_option
@click.option("--limit", default=50, show_default=True)
def pending(scope: str, as_json: bool, limit: int) -> None:
    """Learned memories waiting for promotion (policy `suggest`, or below the confidence bar)."""
    answers = _run("pending", scope=scope, limit=limit)
    records = [r for a in answers for r in a.records]
    if as_json:
        click.echo(json.dumps([msgspec.to_builtins(r) for r in records], indent=2))
    else:
        click.echo(render(records) if records else "No learned memories are waiting.")


@memory.command()
@click.argument("memory_id")
def promote(memory_id: str) -> None:
    """Make a waiting learned memory active: it is recalled from now on."""
    _finish(_run("promote", target=memory_id))


@memory.command()
@click.argument("memory_id")
def reject(memory_id: str) -> None:
    """Drop a waiting learned memory (kept as rejected in exports, never recalled)."""
    _finish(_run("reject", target=memory_id))


@memory.command()
@scope_option
def undo(scope: str) -> None:
    """Revert the last change to memory (in SCOPE, or anywhere): one save, one learned batch,
    one promotion with what it superseded, one forget or one night's dreaming."""
    _finish(_run("undo", scope=scope))


@memory.command()
@click.argument("memory_id")
def revoke(memory_id: str) -> None:
    """Withdraw a memory (active or waiting): never recalled again, kept as revoked."""
    _finish(_run("revoke", target=memory_id))


@memory.command()
def dream() -> None:
    """Run tonight's dreaming now: merge near-duplicate memories (reworded by the model when
    one is configured), decay stale ones."""
    _finish(_run("dream", timeout=600.0))
