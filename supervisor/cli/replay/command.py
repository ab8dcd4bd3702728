"""`wintermute replay`: list, show, re-run, export, import and fork recorded turns.

Exit codes: 0 when every re-run step matched the recording (or nothing was re-run), 1 when
one differed, diverged or stalled (so a prompt or code change can be gated in CI over a folder
of exported sessions), 2 when there was nothing to replay or the input was bad.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bus import Bus
from contracts.config import Settings
from supervisor.cli.replay.drive import Scratch
from supervisor.cli.replay.record import Recording, Turn
from supervisor.cli.replay.results import RerunBusy, TurnResult
from supervisor.cli.replay.timeline import incident_dict, listing, render_listing, timeline

DEFAULT_SESSION = "terminal:owner"


@dataclass(frozen=True)
class Options:
    turn_id: str = ""
    session: str = ""
    list_turns: bool = False
    rerun: bool = False
    as_json: bool = False
    model: str = ""
    fork_at: str = ""
    say: tuple[str, ...] = ()  # follow-up inputs of a fork
    interactive: bool = False  # a fork reads more inputs from stdin
    export: str = ""
    import_path: str = ""
    timeout: float = 30.0


def _out(text: str) -> None:
    print(text, flush=True)


def _err(text: str) -> int:
    print(text, file=sys.stderr, flush=True)
    return 2


def resolve_model(settings: Settings, name: str) -> str:
    """A `provider/model`, or the model of a role in [models.roles]; ValueError otherwise."""
    if "/" in name:
        return name
    spec = settings.config.models.roles.get(name)
    if not spec:
        roles = ", ".join(sorted(settings.config.models.roles)) or "none configured"
        raise ValueError(f"--model {name!r} is neither provider/model (e.g. openai/gpt-4o-mini) "
                         f"nor a role of [models.roles] (roles: {roles}).")
    return spec


async def replay(settings: Settings, opts: Options) -> int:
    """Run one `wintermute replay` invocation; returns the exit code."""
    model = ""
    if opts.model:
        try:
            model = resolve_model(settings, opts.model)
        except ValueError as exc:
            return _err(str(exc))
    if opts.import_path:
        from supervisor.cli.replay.source import ImportError_, from_file

        try:
            rec = from_file(Path(opts.import_path))
        except ImportError_ as exc:
            return _err(str(exc))
        if opts.fork_at:
            return _err("--fork-at continues a session of the running instance; it cannot "
                        "start from an imported file.")
        async with _rerun_server(settings) as (url, login, live):
            return await _act(settings, rec, opts, model, url, login, live)
    from supervisor.cli.client import connect, nats_login
    from supervisor.cli.replay.source import from_history

    bus = await connect(settings, "replay")
    try:
        rec = await from_history(bus)
        return await _act(settings, rec, opts, model, bus.url, nats_login(settings), bus)
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def _rerun_server(
    settings: Settings,
) -> AsyncIterator[tuple[str, dict[str, str], Bus | None]]:
    """The running instance's NATS (as `cli`), else a private nats-server for this command."""
    from supervisor.cli.client import connect, nats_login
    from supervisor.process.up import running_instance

    if settings.config.nats.url or running_instance(settings.home) is not None:
        login = nats_login(settings)
        bus = await connect(settings, "replay")
        try:
            yield bus.url, login, bus
        finally:
            await bus.close()
        return
    from supervisor.process.natsserver import EmbeddedNats

    with tempfile.TemporaryDirectory(prefix="wintermute-replay-nats-") as store:
        server = EmbeddedNats(Path(store))
        url = await server.start()
        try:
            yield url, {}, None
        finally:
            await server.stop()


def _select(rec: Recording, opts: Options, whole: bool) -> list[Turn]:
    if opts.turn_id:
        turn = rec.find(opts.turn_id)
        return [turn] if turn else []
    if opts.session:
        turns = rec.session(opts.session)
        return turns if whole else turns[-1:]
    if opts.import_path:
        return list(rec.turns) if whole else rec.turns[-1:]
    latest = rec.latest(DEFAULT_SESSION)
    return [latest] if latest else []


async def _act(settings: Settings, rec: Recording, opts: Options, model: str, url: str,
               login: dict[str, str], bus: Bus | None) -> int:
    if opts.list_turns:
        rows = listing(rec, opts.session)
        _out(json.dumps(rows, indent=2) if opts.as_json else render_listing(rows))
        return 0
    if opts.export:
        from supervisor.cli.replay.source import export_lines

        turns = rec.session(opts.export)
        if not turns:
            return _err(f"No turns of session {opts.export} in the stream history; "
                        "`wintermute replay --list` shows the sessions there are.")
        sys.stdout.buffer.write(b"\n".join(export_lines(rec.entries_of(turns))) + b"\n")
        sys.stdout.flush()
        return 0
    if opts.fork_at:
        return await _fork(rec, opts, bus)
    rerun = opts.rerun or bool(model)
    turns = _select(rec, opts, whole=rerun and not opts.turn_id)
    if not turns:
        what = (f"turn {opts.turn_id}" if opts.turn_id else
                f"a turn of session {opts.session or DEFAULT_SESSION}")
        return _err(f"No {what} in the {'file' if opts.import_path else 'stream history'} "
                    "(WM_IN keeps 30 days, WM_CMD and WM_EVT 7); `wintermute replay --list` "
                    "shows what there is.")
    if not rerun:
        return _show(turns[0], opts.as_json)
    try:
        results = await rerun_turns(settings, url, login, turns, model, opts.timeout, bus)
    except RerunBusy as exc:
        return _err(str(exc))
    _report(results, opts.as_json, model, charged=bus is not None)
    return 1 if any(r.status == "different" for r in results) else 0


def _show(turn: Turn, as_json: bool) -> int:
    if as_json:
        import msgspec

        _out(json.dumps({
            "turn": turn.id, "session": turn.session, "kind": turn.kind, "ts": turn.ts,
            "outcome": turn.outcome,
            "events": [{"at": round(e.msg.ts - turn.ts, 3), "subject": e.subject,
                        "stream": e.stream, "seq": e.seq, "msg": msgspec.to_builtins(e.msg)}
                       for e in (turn.start, *turn.events)],
            "incidents": [incident_dict(e, turn.ts) for e in turn.incidents],
        }, indent=2))
        return 0
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(turn.ts))
    _out(f"Turn {turn.id} ({when}), session {turn.session}, {turn.outcome}")
    for line in timeline(turn):
        _out("  " + line)
    return 0


async def rerun_turns(settings: Settings, url: str, login: dict[str, str], turns: list[Turn],
                      model: str = "", timeout: float = 30.0,
                      live: Bus | None = None) -> list[TurnResult]:
    """Re-drive `turns` in order through one scratch planner; the first of each session (and
    any after a turn that could not run) starts from the recorded history. A live model's
    tokens are charged to the instance's daily budget (`live`), which also limits them."""
    from state.budget import add, day_key, used

    results: list[TurnResult] = []
    tz = settings.config.budget.timezone
    spent_today = await used(live, day_key(tz=tz)) if model and live is not None else 0
    async with Scratch(settings, url, login, model=model, timeout=timeout,
                       spent_today=spent_today) as scratch:
        seeded: set[str] = set()
        for turn in turns:
            fresh = turn.session not in seeded or turn.reset_before
            result = await scratch.run_turn(turn, seed=fresh)
            results.append(result)
            if result.status == "same":
                seeded.add(turn.session)
            else:
                seeded.discard(turn.session)  # start the next one from the recording again
    tokens = sum(r.tokens for r in results)
    if tokens and live is not None:
        await add(live, day_key(tz=tz), tokens, "replay")
    return results


def _report(results: list[TurnResult], as_json: bool, model: str, charged: bool) -> None:
    differ = [r for r in results if r.status == "different"]
    tokens = sum(r.tokens for r in results)
    if as_json:
        _out(json.dumps({"model": model or "recording", "turns": [r.as_dict() for r in results],
                         "same": len(results) - len(differ), "different": len(differ),
                         "tokens": tokens, "charged": bool(tokens) and charged}, indent=2))
        return
    how = f"the live model {model}" if model else "the recorded answers"
    _out(f"Re-running {len(results)} turn(s) through a fresh planner with {how}:")
    for r in results:
        status = r.status.upper() if r.status != "same" else "same"
        _out(f"turn {r.turn} ({r.kind}) {r.text[:60]!r}: {status}")
        for step in r.steps:
            _out("  " + step.line().replace("\n", "\n  "))
    if tokens:
        where = ("charged to today's budget" if charged else
                 "not charged: no running instance to charge")
        _out(f"live model: {tokens} tokens ({where})")
    _out(f"{len(results) - len(differ)} same, {len(differ)} different")


async def _fork(rec: Recording, opts: Options, bus: Bus | None) -> int:
    from supervisor.cli.replay.fork import ForkError, fork, render_fork

    turn = rec.find(opts.fork_at)
    if turn is None or bus is None:
        return _err(f"No turn {opts.fork_at} in the stream history; `wintermute replay --list` "
                    "shows the turns there are.")
    try:
        out = await fork(bus, turn, opts.timeout, opts.say, opts.interactive)
    except ForkError as exc:
        return _err(str(exc))
    _out(json.dumps(out, indent=2) if opts.as_json else render_fork(out))
    return 0 if all(t["reply"] is not None for t in out["turns"]) else 1

