"""What every sandbox offers, and the layout they share: /workspace and /scripts, nothing else."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors.executor.command import CommandResult
from actors.executor.egress_proxy import EgressProxy
from contracts import short_hash
from contracts.config import Config

WORKSPACE = "/workspace"
SCRIPTS = "/scripts"
SANDBOX_HOME = "/workspace/.home"  # HOME inside: persistent, but outside the owner's files
EGRESS_INSIDE = "/run/wintermute"  # where the egress socket's folder is mounted
EGRESS_SOCKET = "egress.sock"
PROXY_PORT = 3128  # the in-sandbox forwarder listens on 127.0.0.1:PROXY_PORT
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FORWARD_SOURCE = (Path(__file__).parent / "forward.py").read_text()

# Host-shaped variables that would mislead or leak the host's layout inside a sandbox.
HOST_ONLY_VARS = frozenset({
    "PATH", "HOME", "PWD", "OLDPWD", "SHELL", "USER", "LOGNAME", "MAIL", "TMPDIR", "SHLVL", "_",
    "VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "DOCKER_HOST", "WINTERMUTE_HOME",
    "SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "XAUTHORITY", "WAYLAND_DISPLAY",
})
HOST_ONLY_PREFIXES = ("LD_", "XDG_", "PYENV", "CONDA", "http_proxy", "https_proxy", "HTTP_PROXY",
                      "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy")


class SandboxError(Exception):
    """The sandbox cannot be used; the message is a sentence for the owner."""


class Sandbox:
    """Runs one shell command with a timeout and an output cap."""

    kind = "none"
    note = ""
    isolated = False  # True when a command sees only workspace/ and scripts/ of the home
    network = "host"  # "host" (direct), "proxy" (egress allowlist) or "none"
    reason = ""  # why detection chose this backend

    #: Whether `run(..., read_only_scripts=True)` really mounts scripts/ read-only (bwrap).
    scripts_read_only = False

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"", read_only_scripts: bool = False,
    ) -> CommandResult:
        """Run `command`; with `read_only_scripts`, where the backend can (see
        `scripts_read_only`), the command cannot change scripts/ (an agent-created tool's run:
        it must not rewrite itself or another tool)."""
        raise NotImplementedError

    async def reset(self) -> str:
        """Start the sandbox afresh; returns a sentence saying what happened."""
        return f"The {self.kind} sandbox keeps no state between commands, so there is nothing to reset."

    async def close(self) -> None:
        """Release what the sandbox holds (containers, proxies)."""

    def facts(self) -> dict[str, Any]:
        """What status --json and IDENTITY.md report about this sandbox."""
        return {"mode": self.kind, "note": self.note, "sandboxed": self.isolated,
                "network": self.network, "reason": self.reason}


def refused(sentence: str) -> CommandResult:
    """A command that was not run, with the reason as its output."""
    return CommandResult(exit_code=126, output=sentence, timed_out=False, duration_ms=0,
                         truncated=False)


class Layout:
    """Where the home's shared folders are on the host, and how paths map inside."""

    def __init__(self, home: Path) -> None:
        self.home = home.resolve()
        self.workspace = self.home / "workspace"
        self.scripts = self.home / "scripts"
        for path in (self.workspace, self.scripts, self.workspace / ".home"):
            path.mkdir(parents=True, exist_ok=True)

    def shared(self) -> list[tuple[Path, str]]:
        """(host folder, path inside) pairs that sandboxes mount read-write."""
        return [(self.workspace, WORKSPACE), (self.scripts, SCRIPTS)]

    def inside(self, path: Path) -> str | None:
        """The path as a sandbox sees it, or None if a sandbox cannot see it."""
        path = path.resolve()
        for host, inside in self.shared():
            if path == host:
                return inside
            if host in path.parents:
                return f"{inside}/{path.relative_to(host).as_posix()}"
        return None

    def egress_dir(self) -> Path:
        """A stable, private-to-this-user folder for the egress socket (also mounted inside)."""
        path = Path(tempfile.gettempdir()) / f"wintermute-{os.geteuid()}-{short_hash(str(self.home), 12)}"
        path.mkdir(mode=0o755, exist_ok=True)
        st = path.lstat()
        if not path.is_dir() or path.is_symlink() or st.st_uid != os.geteuid():
            raise SandboxError(f"{path} exists but is not a folder owned by this user; remove it and restart.")
        path.chmod(0o755)  # readable by the sandbox's user, writable only by us
        return path


def sandbox_env(env: Mapping[str, str], network: str, path: str) -> dict[str, str]:
    """The caller's (already scrubbed) environment minus host-only variables, plus HOME/PATH
    and, with the egress proxy, the proxy variables every common client honours."""
    out = {k: v for k, v in env.items()
           if k not in HOST_ONLY_VARS and not k.startswith(HOST_ONLY_PREFIXES)}
    out.update({"HOME": SANDBOX_HOME, "PATH": path, "TMPDIR": "/tmp"})
    if network == "proxy":
        url = f"http://127.0.0.1:{PROXY_PORT}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            out[name] = url
        out["NO_PROXY"] = out["no_proxy"] = "localhost,127.0.0.1,::1"
    return out




async def start_egress(config: Config, layout: Layout) -> tuple[EgressProxy | None, Path | None]:
    """With executor.network "proxy": the allowlist proxy on a socket in the egress folder."""
    if config.executor.network != "proxy":
        return None, None
    folder = layout.egress_dir()
    egress = config.egress
    proxy = EgressProxy(egress.allowed_domains, blocked_domains=egress.blocked_domains,
                        ports=egress.allowed_ports)
    await proxy.start_unix(folder / EGRESS_SOCKET)
    return proxy, folder


async def stop_egress(proxy: EgressProxy | None, folder: Path | None) -> None:
    """Stop the proxy and remove its socket and folder (recreated at the same path next time)."""
    if proxy is not None:
        await proxy.close()
    if folder is not None:
        with contextlib.suppress(OSError):
            os.unlink(folder / EGRESS_SOCKET)
            os.rmdir(folder)


class UnavailableSandbox(Sandbox):
    """The configured sandbox cannot start: every command is refused with the reason."""

    kind = "unavailable"
    isolated = True
    network = "none"

    def __init__(self, mode: str, reason: str) -> None:
        self.reason = reason
        self.note = (
            f"unavailable: executor.mode is {mode!r} but {reason}; commands are refused until "
            "that is fixed or executor.mode is changed (\"auto\" falls back to what works)"
        )

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"", read_only_scripts: bool = False,
    ) -> CommandResult:
        return refused(f"Not run: the sandbox is {self.note}.")
