"""`wintermute up`: embedded nats-server (unless a URL is given), then the supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from bus import Bus, lost
from bus import logs as buslogs
from contracts.config import Settings
from supervisor.process import natsauth
from supervisor.process.natsserver import EmbeddedNats
from supervisor.process.provision import actor_subscriptions, provision_all
from supervisor.process.status import write_runtime
from supervisor.process.storage import measure
from supervisor.process.supervisor import Supervisor

log = logging.getLogger(__name__)


async def _with_chat(sup: Supervisor, settings: Settings, bus: Bus) -> None:
    """Supervise and chat in one terminal; leaving the chat stops everything."""
    from supervisor.cli.chat import chat_repl

    run = asyncio.create_task(sup.run())
    talk = asyncio.create_task(chat_repl(settings, "owner", bus))
    await asyncio.wait([run, talk], return_when=asyncio.FIRST_COMPLETED)
    talk.cancel()
    sup.stop()
    await asyncio.gather(run, talk, return_exceptions=True)


def runtime_path(home: Path) -> Path:
    return home / "data" / "runtime.json"


def running_instance(home: Path) -> dict[str, object] | None:
    """The runtime record of a live `up` for this home, or None."""
    path = runtime_path(home)
    try:
        data = json.loads(path.read_text())
        pid = int(data["supervisor_pid"])
        if pid == os.getpid():  # a stale record naming us (PID 1 in a restarted container)
            return None
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError):
        return None
    return data  # type: ignore[no-any-return]


async def run_up(
    settings: Settings, nats_url: str = "", nats_port: int = 0, spawn: bool = True,
    chat: bool = False,
) -> int:
    """Foreground: run until SIGINT/SIGTERM (or, with chat, end of input), then stop in order."""
    lost.set_path(settings.home / "logs" / "lost.jsonl")
    from kit.redact import Redactor

    buslogs.setup("supervisor", settings.config.logging.level,
                  settings.home / "logs" / "supervisor.log" if chat else None,
                  scrub=Redactor.for_home(settings.home, os.environ).redact)
    home = settings.home
    if running_instance(home):
        print(f"wintermute is already running for {home} (see `wintermute status`).")
        return 1
    cfg = settings.config.nats
    url = nats_url or cfg.url
    server: EmbeddedNats | None = None
    auth: natsauth.EmbeddedAuth | None = None
    login = {"credentials": cfg.credentials, "user": cfg.user, "password": cfg.password,
             "seed": cfg.seed, "api_prefix": cfg.api_prefix}
    durables = actor_subscriptions(settings)
    if not url:
        # Embedded: one NATS user per actor, plus the supervisor and the command line.
        auth = natsauth.prepare(home, Bus("", cfg.prefix).subjects, durables)
        login = auth.login("supervisor")
        store = home / "data" / "jetstream"
        server = EmbeddedNats(store, nats_port or cfg.port, home / "logs" / "nats-server.log",
                              config=auth.config, max_file_store=measure(store).limit,
                              monitor_port=cfg.monitor_port)
        try:
            url = await server.start()
        except (OSError, RuntimeError, TimeoutError) as exc:
            print(f"Could not start the embedded nats-server: {exc}. Its log is "
                  f"{home / 'logs' / 'nats-server.log'}; with --nats-port, pick a free port.",
                  file=sys.stderr, flush=True)
            return 1
    bus = Bus(url, cfg.prefix, name="wintermute-supervisor")
    sup: Supervisor | None = None
    try:
        try:
            await bus.connect(timeout=30, **login)
        except ConnectionError as exc:
            user = login.get("user") or ("the supervisor's key" if login.get("seed") else "")
            who = f" as {user}" if user else ""
            print(f"The supervisor could not connect{who}: {exc}. Check the NATS URL and the "
                  "credentials (nats.user/nats.password, nats.seed, nats.credentials or "
                  "WM__NATS__*).", file=sys.stderr, flush=True)
            return 1
        await provision_all(bus, durables)  # actors with their own users may only look
        sup = Supervisor(settings, bus, url, spawn=spawn, nats=server,
                         runtime_file=runtime_path(home),
                         logins={u: auth.login(u) for u in auth.seeds} if auth else None)
        write_runtime(runtime_path(home), {
            "nats_url": url, "nats_pid": server.pid if server else None,
            "supervisor_pid": os.getpid(), "prefix": cfg.prefix,
            "nats_keys": str(natsauth.keys_dir(home)) if auth else None,
        })
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, sup.stop)
        print(f"wintermute is up: nats {url}, home {home}. `wintermute chat` to talk; "
              "Ctrl-C stops.", flush=True)
        if chat:
            await _with_chat(sup, settings, bus)
        else:
            await sup.run()
        return 0
    finally:
        if sup is not None:
            await sup.shutdown()
        await bus.close()
        if server is not None:
            await server.stop()
        with contextlib.suppress(OSError):
            runtime_path(home).unlink()
