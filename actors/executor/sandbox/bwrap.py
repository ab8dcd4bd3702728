"""bubblewrap: a fresh Linux namespace per command, no daemon.

Inside: the host's system folders read-only (only what any user may read), the workspace and
scripts read-write at /workspace and /scripts (and at their host paths, so paths the executor
hands over still work), a private /tmp, no view of the rest of WINTERMUTE_HOME or the user's
home, no capabilities, its own pid/ipc/uts/network namespaces. The network is loopback only;
with network "proxy" a forwarder relays 127.0.0.1:3128 to the egress proxy: once per sandbox in
a network namespace every command joins (netns.py), else inside each command's namespace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from actors.executor.command import CommandResult, run_process
from actors.executor.egress_proxy import EgressProxy
from actors.executor.sandbox.base import (
    DEFAULT_PATH,
    EGRESS_INSIDE,
    EGRESS_SOCKET,
    FORWARD_SOURCE,
    PROXY_PORT,
    SANDBOX_HOME,
    SCRIPTS,
    Layout,
    Sandbox,
    SandboxError,
    refused,
    sandbox_env,
    stop_egress,
)
from actors.executor.sandbox.limits import CommandLimits, Limits
from actors.executor.sandbox.netns import SharedNet
from contracts.config import SandboxConfig

log = logging.getLogger(__name__)

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
MASK_ROOTS = ("/etc",)  # system folders that hold files only root may read (shadow, ssh keys)
PROBE_TIMEOUT = 15.0
SANDBOX_PATH = f"{SANDBOX_HOME}/.local/bin:{DEFAULT_PATH}"


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    return args


def _masks(root: str) -> list[str]:
    """Hide what an unprivileged user could not read, so a root executor leaks nothing more."""
    args: list[str] = []
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & 0o005 != 0o005:
                    args += ["--tmpfs", entry.path]
                else:
                    stack.append(entry.path)
            elif stat.S_ISREG(mode) and not mode & 0o004:
                args += ["--ro-bind", "/dev/null", entry.path]
    return args


def _python() -> tuple[str, list[str]]:
    """An interpreter visible inside for the forwarder, and any bind it needs."""
    if Path("/usr/bin/python3").exists():
        return "/usr/bin/python3", []
    real = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if any(real.startswith(d + "/") for d in SYSTEM_DIRS):
        return real, []
    return real, ["--ro-bind", prefix, prefix]


class BwrapSandbox(Sandbox):
    """One bubblewrap namespace per command."""

    kind = "bwrap"
    isolated = True
    scripts_read_only = True

    def __init__(
        self, layout: Layout, *, network: str, proxy: EgressProxy | None = None,
        egress_dir: Path | None = None, reason: str = "", limits: CommandLimits | None = None,
    ) -> None:
        self.layout = layout
        self.limits = limits or CommandLimits(Limits.from_config(SandboxConfig()), [])
        self.network = network
        self.proxy = proxy
        self.egress_dir = egress_dir
        self.reason = reason
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.bash = shutil.which("bash") or "/bin/bash"
        python, python_binds = _python()
        self.python = python
        self.base = self._base_args(python_binds)
        self.net = (SharedNet(self._holder_args(python_binds), python)
                    if network == "proxy" and egress_dir is not None else None)
        self.note = self._describe()

    def _describe(self) -> str:
        where = "none (loopback only)"
        if self.proxy:
            how = ("a forwarder per sandbox in a network namespace its commands share"
                   if self.net is not None and self.net.usable else "a forwarder per command")
            where = f"only through the egress proxy ({self.proxy.describe()}; {how})"
        return (
            "bwrap: each command runs under bubblewrap with a read-only system, writable "
            f"/workspace and /scripts, a private /tmp, no capabilities and no view of "
            f"WINTERMUTE_HOME's secrets or data; network: {where}; {self.limits.describe()}"
            + (f" ({self.reason})" if self.reason else "")
        )

    def _base_args(self, python_binds: list[str]) -> list[str]:
        layout = self.layout
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session",
                "--cap-drop", "ALL", "--hostname", "wintermute-sandbox"]
        args += _system_binds() + python_binds
        for root in MASK_ROOTS:
            args += _masks(root)
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        args += ["--tmpfs", str(layout.home)]  # hides .env, data/, logs/, config ...
        for host, inside in layout.shared():
            args += ["--bind", str(host), str(host), "--bind", str(host), inside]
        if self.egress_dir is not None:
            args += ["--ro-bind", str(self.egress_dir), EGRESS_INSIDE]
        return args + ["--remount-ro", "/"]

    def _holder_args(self, python_binds: list[str]) -> list[str]:
        """bwrap for the shared forwarder: the system read-only and the egress socket's folder;
        nothing of the home."""
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session",
                "--cap-drop", "ALL", "--hostname", "wintermute-sandbox"]
        args += _system_binds() + python_binds
        for root in MASK_ROOTS:
            args += _masks(root)
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        args += ["--ro-bind", str(self.egress_dir), EGRESS_INSIDE]
        return args + ["--remount-ro", "/"]

    def argv(self, command: str, cwd: str, shared: list[str] | None = None,
             read_only_scripts: bool = False) -> list[str]:
        """The full bwrap command line for one shell command; `shared` is the prefix that joins
        the sandbox's network namespace (SharedNet.enter), whose forwarder already listens.
        With `read_only_scripts`, scripts/ is mounted again read-only over both its paths."""
        inner = [self.bash, "-c", command]
        if read_only_scripts:
            scripts = str(self.layout.scripts)
            inner = ["--ro-bind", scripts, scripts, "--ro-bind", scripts, SCRIPTS,
                     "--chdir", cwd, "--", *inner]
        else:
            inner = ["--chdir", cwd, "--", *inner]
        if shared is not None:
            # bwrap unshares everything but the network it starts in: the shared namespace.
            assert self.net is not None
            return [*shared, self.base[0], self.base[1], *self.net.bwrap_args, *self.base[2:],
                    *inner]
        if self.network == "proxy":
            sock = f"{EGRESS_INSIDE}/{EGRESS_SOCKET}"
            at = inner.index("--") + 1
            inner[at:at] = [self.python, "-I", "-S", "-c", FORWARD_SOURCE, "run",
                            str(PROXY_PORT), sock]
        return [*self.base, *inner]

    async def probe(self) -> None:
        """Run `true` the way commands run; SandboxError with bwrap's words if that fails."""
        try:
            res = await self._run_limited("true", "/workspace", timeout=PROBE_TIMEOUT,
                                          output_limit=2000, env={"PATH": DEFAULT_PATH})
            if res.exit_code != 0 and self.net is not None and self.net.usable:
                log.warning("bwrap: commands cannot join the shared network namespace (%s); "
                            "the egress forwarder starts with each command instead",
                            res.output.strip() or f"exit code {res.exit_code}")
                await self.net.disable()
                res = await self._run_limited("true", "/workspace", timeout=PROBE_TIMEOUT,
                                              output_limit=2000, env={"PATH": DEFAULT_PATH})
        except OSError as exc:
            raise SandboxError(f"bwrap could not be started: {exc}") from exc
        finally:
            self.note = self._describe()
        if res.exit_code != 0:
            why = res.output.strip() or f"exit code {res.exit_code}"
            raise SandboxError(f"bwrap does not work here: {why}")

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"", read_only_scripts: bool = False,
    ) -> CommandResult:
        inside = self.layout.inside(cwd)
        if inside is None:
            return refused(f"{cwd} is outside the workspace and scripts folders, which are all "
                           "the sandbox can see.")
        try:
            return await self._run_limited(
                command, inside, timeout=timeout, output_limit=output_limit,
                env=sandbox_env(env, self.network, SANDBOX_PATH), stdin=stdin,
                read_only_scripts=read_only_scripts)
        except OSError as exc:
            return refused(f"Not run: the command's resource limits could not be set up "
                           f"({exc}); check that the executor may still create cgroups.")

    async def _run_limited(
        self, command: str, inside: str, *, timeout: float, output_limit: int,  # noqa: ASYNC109
        env: Mapping[str, str], stdin: bytes = b"", read_only_scripts: bool = False,
    ) -> CommandResult:
        """bwrap under the launcher: in fresh cgroups (where possible) with rlimits set."""
        shared = await self.net.enter() if self.net is not None else None
        if shared is None and self.net is not None:
            self.note = self._describe()  # it may have just fallen back to a forwarder per command
        cgroups = self.limits.create()
        try:
            return await run_process(
                self.limits.argv(self.argv(command, inside, shared, read_only_scripts), cgroups),
                cwd=self.layout.workspace,
                timeout=timeout, output_limit=output_limit, env=env, stdin=stdin)
        finally:
            await asyncio.to_thread(self.limits.remove, cgroups)

    async def reset(self) -> str:
        if self.net is None:
            return await super().reset()
        await self.net.close()  # the next command starts a fresh namespace and forwarder
        return ("The bwrap sandbox keeps no state between commands; its egress forwarder and "
                "network namespace start afresh with the next command.")

    async def close(self) -> None:
        if self.net is not None:
            await self.net.close()
        await stop_egress(self.proxy, self.egress_dir)

