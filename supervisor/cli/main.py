"""The `wintermute` command line."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import click

from contracts.config import ConfigError, Settings, default_home, load_settings


def _settings(home: Path | None = None) -> Settings:
    try:
        return load_settings(home)
    except ConfigError as exc:
        click.echo(f"Configuration error: {exc}", err=True)
        sys.exit(2)


def _home() -> Path:
    return default_home().resolve()


@click.group()
def main() -> None:
    """Wintermute: a personal AI agent built as actor processes on NATS JetStream."""


@main.command()
@click.option("--seed", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder with AGENTS.md, USER.md, HEARTBEAT.md or agent.toml to start from "
                   "(a file the agent changed since is kept).")
def init(seed: Path | None) -> None:
    """Create WINTERMUTE_HOME with config, templates and folders (idempotent)."""
    from supervisor.process.home import init_home

    home = _home()
    created = init_home(home, seed)
    click.echo(f"{home}: " + (f"created {', '.join(created)}" if created else "already set up"))


@main.command()
@click.option("--nats-port", type=int, default=0, help="Port for the embedded nats-server.")
@click.option("--nats-url", default="", help="Use this NATS server instead of the embedded one.")
@click.option("--no-spawn", is_flag=True, help="Watch mode (Kubernetes): do not spawn actors.")
@click.option("--chat", "with_chat", is_flag=True, help="Also chat in this terminal (logs go to logs/).")
def up(nats_port: int, nats_url: str, no_spawn: bool, with_chat: bool) -> None:
    """Start NATS (embedded unless a URL is given), the supervisor and every actor."""
    from contracts.config_urls import url_problem
    from supervisor.process.home import init_home
    from supervisor.process.up import run_up

    if nats_url and (why := url_problem(nats_url)):  # a command line lands in shell history
        raise click.UsageError(f"--nats-url: {why}; give the user and password in "
                               "nats.user/nats.password (or nats.seed) instead")
    home = _home()
    init_home(home)
    settings = _settings(home)
    sys.exit(asyncio.run(run_up(settings, nats_url, nats_port, spawn=not no_spawn, chat=with_chat)))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(as_json: bool) -> None:
    """Actors, health, restarts, NATS and stream counts of the running instance."""
    from supervisor.cli.client import gather_status, render_status

    data = asyncio.run(gather_status(_settings()))
    click.echo(json.dumps(data, indent=2) if as_json else render_status(data))


@main.command("audit")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--since", default="", help="Only from then: 30m, 12h, 7d, or a date (UTC).")
def audit_cmd(as_json: bool, since: str) -> None:
    """The audit log: approvals, refusals, denied senders, breakers, oldest first."""
    from supervisor.cli.audit import SinceError
    from supervisor.cli.audit import audit as run_audit

    try:
        click.echo(asyncio.run(run_audit(_settings(), since, as_json)))
    except SinceError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)


@main.command()
@click.option("--once", "once", default=None, help="Send one message, print the reply, exit.")
@click.option("--chat", default="owner", show_default=True, help="Terminal chat id.")
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait (--once).")
def chat(once: str | None, chat: str, timeout: float) -> None:
    """Talk to the agent in the terminal, as the owner."""
    from supervisor.cli.chat import chat_once, chat_repl

    settings = _settings()
    if once is not None:
        sys.exit(asyncio.run(chat_once(settings, once, chat, timeout)))
    sys.exit(asyncio.run(chat_repl(settings, chat)))


@main.command()
@click.argument("approval_id")
@click.option("--chat", default="owner", show_default=True)
def approve(approval_id: str, chat: str) -> None:
    """Approve a pending action by its 8-character id; exit 1 if that did not happen."""
    from supervisor.cli.approve import decide

    sys.exit(asyncio.run(decide(_settings(), approval_id, True, chat)))


@main.command()
@click.argument("approval_id")
@click.option("--chat", default="owner", show_default=True)
def deny(approval_id: str, chat: str) -> None:
    """Deny a pending action by its 8-character id; exit 1 if that did not happen."""
    from supervisor.cli.approve import decide

    sys.exit(asyncio.run(decide(_settings(), approval_id, False, chat)))


@main.command()
@click.argument("filter", required=False, default="")
@click.option("--json", "as_json", is_flag=True, help="Print raw payloads.")
def tap(filter: str, as_json: bool) -> None:
    """Live decoded view of the bus. FILTER: a subject (wm.evt.>), a session id as written
    (terminal:owner, telegram:12345) or a type prefix (tool.)."""
    from supervisor.cli.tap import tap as run_tap

    try:
        sys.exit(asyncio.run(run_tap(_settings(), filter, as_json)))
    except KeyboardInterrupt:
        pass


@main.command("nats-context")
@click.option("--user", type=click.Choice(["operator", "cli"]), default="operator",
              show_default=True, help="operator reads everything; cli is the owner's commands.")
@click.option("--name", default="", help="Context name (default: wintermute-USER).")
def nats_context(user: str, name: str) -> None:
    """Write a context for the standard `nats` CLI and print how to use it."""
    from supervisor.cli.natscontext import write_context

    path, name = write_context(_settings(), user, name)
    click.echo(f"wrote {path}\n  nats --context {name} sub 'wm.>'\n"
               f"  nats --context {name} stream ls")


@main.command()
@click.argument("turn_id", required=False, default="")
@click.option("--session", default="", help="Only this session (default for showing and "
              "re-running one turn: the latest of terminal:owner). With --rerun: all its turns.")
@click.option("--list", "list_turns", is_flag=True, help="List turns with ids, times, outcome.")
@click.option("--rerun", is_flag=True, help="Re-drive through a fresh planner and diff; "
              "exits 1 when anything differs.")
@click.option("--model", default="", help="Re-run against this live model (provider/model or "
              "a [models.roles] role) instead of the recorded answers.")
@click.option("--fork-at", default="", metavar="TURN",
              help="Continue live from TURN in a new session (the original is untouched).")
@click.option("--say", multiple=True, help="With --fork-at: more inputs for the fork, in order "
              "(at a terminal without --say, type them; end with Ctrl-D).")
@click.option("--export", default="", metavar="SESSION",
              help="Write SESSION's recorded messages to stdout as JSON lines.")
@click.option("--import", "import_path", default="", metavar="FILE",
              help="Replay from an exported file instead of this instance's history.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds per re-run turn.")
def replay(turn_id: str, session: str, list_turns: bool, rerun: bool, model: str, fork_at: str,
           say: tuple[str, ...], export: str, import_path: str, as_json: bool,
           timeout: float) -> None:
    """Show, list, re-run, export or fork recorded turns (JetStream history)."""
    from supervisor.cli.replay import Options
    from supervisor.cli.replay import replay as run_replay

    opts = Options(turn_id=turn_id, session=session, list_turns=list_turns, rerun=rerun,
                   as_json=as_json, model=model, fork_at=fork_at, say=say, export=export,
                   import_path=import_path, timeout=timeout,
                   interactive=bool(fork_at) and not say and not as_json and sys.stdin.isatty())
    sys.exit(asyncio.run(run_replay(_settings(), opts)))


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def tools(ctx: click.Context, as_json: bool) -> None:
    """Every tool (core and agent-created) with its status and _meta."""
    if ctx.invoked_subcommand is not None:
        return
    from supervisor.cli.tools import NotReported, gather_tools, render_tools

    try:
        rows = asyncio.run(gather_tools(_settings()))
    except NotReported as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    click.echo(json.dumps(rows, indent=2) if as_json else render_tools(rows))


@main.command()
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for the executor.")
def revert(timeout: float) -> None:
    """Undo the last change in scripts/ (a new git commit); the executor reloads the tools."""
    from supervisor.cli.tools import revert_scripts

    ok, text = asyncio.run(revert_scripts(_settings(), timeout))
    click.echo(text, err=not ok)
    sys.exit(0 if ok else 1)


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def skills(ctx: click.Context, as_json: bool) -> None:
    """The skills in skills/ with their use counts, and any SKILL.md that cannot be used."""
    if ctx.invoked_subcommand is not None:
        return
    from supervisor.cli.skills import gather_skills, render_skills

    data = asyncio.run(gather_skills(_settings()))
    click.echo(json.dumps(data, indent=2) if as_json else render_skills(data))


@skills.command("revert")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for the executor.")
def skills_revert(timeout: float) -> None:
    """Undo the last change in skills/ (a new commit in data/skills.git)."""
    from supervisor.cli.tools import revert_scripts

    ok, text = asyncio.run(revert_scripts(_settings(), timeout, repo="skills"))
    click.echo(text, err=not ok)
    sys.exit(0 if ok else 1)


@tools.command("release")
@click.argument("name")
def tools_release(name: str) -> None:
    """Lift the supervisor's quarantine of the tool NAME."""
    from supervisor.cli.holds import release

    click.echo(asyncio.run(release(_settings(), name)))


@main.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def tasks(ctx: click.Context, as_json: bool) -> None:
    """Scheduled tasks, cadences and proactive checks: next fire, last outcome, tokens spent."""
    if ctx.invoked_subcommand is not None:
        return
    from supervisor.cli.tasks import gather_tasks, render_tasks

    view = asyncio.run(gather_tasks(_settings()))
    click.echo(json.dumps(view, indent=2) if as_json else render_tasks(view))


@tasks.command("run")
@click.argument("name")
def tasks_run(name: str) -> None:
    """Fire the scheduled job NAME now (its answer goes to its sink)."""
    from supervisor.cli.tasks import run_task

    done, text = asyncio.run(run_task(_settings(), name))
    click.echo(text, err=not done)
    sys.exit(0 if done else 1)


@tasks.command("enable")
@click.argument("name")
def tasks_enable(name: str) -> None:
    """Enable the scheduled task NAME again after the supervisor disabled it."""
    from supervisor.cli.holds import enable

    click.echo(asyncio.run(enable(_settings(), name)))


@main.command()
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the archive (default: backups/ in the home).")
@click.option("--no-secrets", is_flag=True, help="Leave .env out of the archive.")
@click.option("--keep", default=0, show_default=True, help="Keep only the newest N archives.")
def backup(dest: Path | None, no_secrets: bool, keep: int) -> None:
    """Back up the agent: config and prompt files, tools with history, memories, streams, KV."""
    from supervisor.process.backup import backup_now

    path, counts = asyncio.run(backup_now(_settings(), dest, not no_secrets, keep))
    held = ", ".join(f"{k} {v}" for k, v in counts.items())
    click.echo(f"Backed up to {path} ({held}).")


@main.command()
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def restore(archive: Path) -> None:
    """Restore an archive of `wintermute backup` into this (stopped, fresh) home."""
    from supervisor.process.backup import restore as restore_archive
    from supervisor.process.home import init_home

    home = _home()
    init_home(home)
    try:
        counts = asyncio.run(restore_archive(_settings(home), archive))
    except (RuntimeError, ValueError) as exc:
        click.echo(f"Not restored: {exc}", err=True)
        sys.exit(1)
    held = ", ".join(f"{k} {v}" for k, v in counts.items())
    click.echo(f"Restored {archive} into {home} ({held}). Start it with `wintermute up`.")


@main.command()
@click.argument("name")
def actor(name: str) -> None:
    """Run one actor in the foreground (what Kubernetes runs; `python -m actors NAME`)."""
    from contracts.routes import ACTORS

    if name not in ACTORS:
        raise click.BadParameter(f"unknown actor {name!r}; actors are: {', '.join(ACTORS)}")
    _settings()  # a configuration error is reported here, before the hand-over
    # Replace this process by the actors' entry point, so the CLI imports no actor code.
    os.execv(sys.executable, [sys.executable, "-m", "actors", name])


@main.command()
@click.argument("name")
def probe(name: str) -> None:
    """Exit 0 if the actor NAME on this machine or pod is alive (liveness/readiness probe)."""
    from supervisor.probe import main as probe_main

    sys.exit(probe_main([name]))


@main.command()
def schema() -> None:
    """JSON Schema of every contract and every shared KV record."""
    import msgspec

    from contracts import ALL_MESSAGES
    from contracts.records import ALL_RECORDS

    _, components = msgspec.json.schema_components((*ALL_MESSAGES, *ALL_RECORDS))
    click.echo(json.dumps({"$defs": components}, indent=2, sort_keys=True))


def _register() -> None:
    from supervisor.cli.memory import memory  # light: click, msgspec and contracts
    from supervisor.cli.memory_files import COMMANDS as FILE_COMMANDS

    for command in FILE_COMMANDS:  # AGENTS.md/USER.md versions, through the executor
        memory.add_command(command)
    main.add_command(memory)


_register()

if __name__ == "__main__":
    main()
