"""The Docker-API sandbox (Docker or Podman): one warm container, `exec` per command.

The container runs our forwarder as its init (reaps orphans, relays 127.0.0.1:3128 to the
egress proxy's socket), has no network of its own, all capabilities dropped,
no-new-privileges, pid/memory/CPU limits, and only workspace/ and scripts/ mounted: no .env,
no data/, no Docker socket. It is reused across executor restarts while its configuration is
unchanged (so what setup.sh installed stays), stopped on close, and recreated by `reset`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.executor.command import CommandResult, _Capture
from actors.executor.egress_proxy import EgressProxy
from actors.executor.sandbox._docker_spec import (
    CONFIG_LABEL,
    SANDBOX_PATH,
    SETUP_SCRIPT,
    container_name,
    container_spec,
    exec_command,
)
from actors.executor.sandbox.base import (
    Layout,
    Sandbox,
    SandboxError,
    refused,
    sandbox_env,
    stop_egress,
)
from contracts.config import Config

if TYPE_CHECKING:
    import aiodocker

log = logging.getLogger(__name__)

API_TIMEOUT = 10.0  # a Docker API call that takes longer means the engine is stuck
BACKSTOP_SECS = 10.0  # after GNU timeout's own TERM + 5 s KILL, give up on the exec stream
SETUP_TIMEOUT = 900.0
TIMEOUT_CODES = (124, 137)  # GNU timeout: TERM worked / KILL was needed


class DockerSandbox(Sandbox):
    """Commands run by `exec` in one long-lived, locked-down container."""

    kind = "docker"
    isolated = True

    def __init__(
        self, docker: aiodocker.Docker, url: str, config: Config, layout: Layout, *,
        image_id: str, rootless: bool, proxy: EgressProxy | None, egress_dir: Path | None,
        reason: str = "",
    ) -> None:
        self.docker = docker
        self.url = url
        self.config = config
        self.layout = layout
        self.image = config.executor.image
        self.image_id = image_id
        self.proxy = proxy
        self.egress_dir = egress_dir
        self.network = "proxy" if proxy else "none"
        self.reason = reason
        # Rootless engines map container root to the owner; rootful ones need the owner's uid
        # so files written to the workspace stay the owner's.
        self.user = "0:0" if rootless else f"{os.geteuid()}:{os.getegid()}"
        self.name = container_name(layout)
        self.container: Any = None
        self.setup_note = ""
        self._ready: asyncio.Task[None] | None = None
        sb = config.sandbox
        where = f"only through the egress proxy ({proxy.describe()})" if proxy else "none"
        self.note = (
            f"docker: commands run in the warm container {self.name} (image {self.image} via "
            f"{url}) with all capabilities dropped, at most {sb.pids_limit} processes, "
            f"{sb.memory_mb} MB and {sb.cpu_cores:g} CPUs; only /workspace and /scripts are "
            f"mounted; network: {where}" + (f" ({reason})" if reason else "")
        )

    def facts(self) -> dict[str, Any]:
        return {**super().facts(), "container": self.name, "image": self.image,
                "docker_host": self.url, "setup": self.setup_note}

    async def start(self) -> None:
        """Reuse the container if its configuration is unchanged, else create it afresh."""
        spec = self._spec()
        existing = await self._existing()
        if existing is not None:
            info = await self._call(existing.show())
            labels = info.get("Config", {}).get("Labels") or {}
            if labels.get(CONFIG_LABEL) == spec["Labels"][CONFIG_LABEL]:
                self.container = existing
                if info["State"]["Running"]:
                    # close() stops it: still running means its executor died uncleanly, and
                    # the commands it ran there may still run (invariant I): end them all.
                    log.warning("sandbox container %s was left running: restarting it to end "
                                "the commands of an executor that died", self.name)
                    await self._call(existing.restart(t=0))
                else:
                    await self._call(existing.start())
                self._ready = _done()
                return
            await self._call(existing.delete(force=True))
        await self._create(spec)

    def _spec(self) -> dict[str, Any]:
        return container_spec(self.config, self.layout, image_id=self.image_id, user=self.user,
                              egress_dir=self.egress_dir)

    async def _existing(self) -> Any:
        from aiodocker.exceptions import DockerError

        try:
            return await self._call(self.docker.containers.get(self.name))
        except DockerError as exc:
            if exc.status == 404:
                return None
            raise

    async def _create(self, spec: dict[str, Any]) -> None:
        from aiodocker.exceptions import DockerError

        try:
            self.container = await self._call(
                self.docker.containers.create(spec, name=self.name))
            await self._call(self.container.start())
        except DockerError as exc:
            raise SandboxError(
                f"the sandbox container could not be started from {self.image}: {exc.message} "
                "(the image needs python3, bash and GNU timeout)"
            ) from exc
        self._ready = asyncio.create_task(self._setup(), name="sandbox-setup")

    async def _setup(self) -> None:
        """Run scripts/setup.sh and requirements.txt once per fresh container, as root."""
        scripts = self.layout.scripts
        if not (scripts / "setup.sh").exists() and not (scripts / "requirements.txt").exists():
            self.setup_note = ""
            return
        env = {**sandbox_env({}, self.network, SANDBOX_PATH), "HOME": "/root"}
        res = await self._exec(SETUP_SCRIPT, cwd="/scripts", timeout=SETUP_TIMEOUT,
                               output_limit=4000, env=env, user="0:0")
        status = "timed out" if res.timed_out else f"exit code {res.exit_code}"
        self.setup_note = f"setup ({status}): {res.output[-1500:]}"
        if res.exit_code != 0:
            log.warning("sandbox setup failed: %s", self.setup_note)

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"", read_only_scripts: bool = False,
    ) -> CommandResult:
        # The container's mounts are fixed when it starts: a tool run sees scripts/ as every
        # command does (read-write); `scripts_read_only` stays False and docs/security.md says so.
        inside = self.layout.inside(cwd)
        if inside is None:
            return refused(f"{cwd} is outside the workspace and scripts folders, which are all "
                           "the sandbox can see.")
        if self._ready is not None and not self._ready.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._ready), timeout)
            if not self._ready.done():
                return refused("The sandbox is still running scripts/setup.sh and "
                               "requirements.txt; try again in a minute.")
        env = sandbox_env(env, self.network, SANDBOX_PATH)
        return await self._exec(command, cwd=inside, timeout=timeout, output_limit=output_limit,
                                env=env, stdin=stdin, user=self.user)

    async def _exec(
        self, command: str, *, cwd: str, timeout: float, output_limit: int,
        env: Mapping[str, str], user: str, stdin: bytes = b"",
    ) -> CommandResult:
        import aiohttp
        from aiodocker.exceptions import DockerError

        started = time.monotonic()
        argv = exec_command(command, timeout)
        try:
            exe = await self._open_exec(argv, cwd, env, user, bool(stdin))
        except DockerError as exc:
            return refused(f"The sandbox container could not run the command: {exc.message}")
        capture = _Capture(output_limit)
        stuck, lost = False, ""
        stream = exe.start(detach=False)
        try:
            async with asyncio.timeout(timeout + BACKSTOP_SECS):
                async with stream:
                    if stdin:
                        await stream.write_in(stdin)
                        _close_stdin(stream)
                    while (msg := await stream.read_out()) is not None:
                        capture.feed(msg.data)
        except TimeoutError:
            stuck = True
        except (DockerError, OSError, aiohttp.ClientError) as exc:
            lost = f"\n[the connection to the Docker API broke: {exc}; the outcome is unknown]"
        capture.feed(b"", final=True)
        elapsed = time.monotonic() - started
        code: int | None = None
        if stuck:  # GNU timeout did not end it: restart the container to stop everything
            with contextlib.suppress(DockerError, TimeoutError, OSError, aiohttp.ClientError):
                await self._call(self.container.restart(t=1))
        elif not lost:
            with contextlib.suppress(DockerError, TimeoutError, OSError, aiohttp.ClientError):
                code = (await self._call(exe.inspect())).get("ExitCode")
        timed_out = stuck or (code in TIMEOUT_CODES and elapsed >= timeout)
        return CommandResult(
            exit_code=None if timed_out else code, output=capture.render() + lost,
            timed_out=timed_out, duration_ms=int(elapsed * 1000), truncated=capture.truncated,
        )

    async def _open_exec(self, argv: list[str], cwd: str, env: Mapping[str, str], user: str,
                         stdin: bool) -> Any:
        """Create the exec; if the container is gone or stopped, bring it back once."""
        from aiodocker.exceptions import DockerError

        for attempt in (1, 2):
            try:
                return await self._call(self.container.exec(
                    argv, stdin=stdin, environment=dict(env), workdir=cwd, user=user))
            except DockerError as exc:
                if attempt == 2 or exc.status not in (404, 409, 500):
                    raise
                log.warning("sandbox container unavailable (%s); bringing it back", exc.message)
                await self.start()
        raise AssertionError("unreachable")

    async def reset(self) -> str:
        """Delete the container and create it afresh from the image, running setup again."""
        from aiodocker.exceptions import DockerError

        if self.container is not None:
            with contextlib.suppress(DockerError):
                await self._call(self.container.delete(force=True))
        await self._create(self._spec())
        assert self._ready is not None
        await self._ready
        done = f"The sandbox container {self.name} was recreated from {self.image}."
        return done + (f" Setup: {self.setup_note}" if self.setup_note else "")

    async def close(self) -> None:
        """Stop (not remove) the container, so the next start reuses it; stop the proxy."""
        from aiodocker.exceptions import DockerError

        if self._ready is not None and not self._ready.done():
            self._ready.cancel()
        if self.container is not None:
            with contextlib.suppress(DockerError, TimeoutError, OSError):
                await self._call(self.container.stop(t=2))
        await stop_egress(self.proxy, self.egress_dir)
        await self.docker.close()

    async def _call(self, coro: Any) -> Any:
        async with asyncio.timeout(API_TIMEOUT):
            return await coro


def _close_stdin(stream: Any) -> None:
    """Half-close the hijacked connection so the command sees end of input (aiodocker has no
    public API for it; without it a command reading stdin waits for its timeout)."""
    try:
        transport = stream._resp.connection.transport
    except AttributeError:
        log.warning("cannot signal end of stdin with this aiodocker version")
        return
    if transport is not None and transport.can_write_eof():
        transport.write_eof()


def _done() -> asyncio.Task[None]:
    async def nothing() -> None:
        return None

    return asyncio.create_task(nothing())
