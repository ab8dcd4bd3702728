"""Real sandbox engines for tests: install what is missing, a throwaway Podman Docker-API
service, and a sandbox image built from a local Debian rootfs (nothing can be pulled here).

A fresh CI machine (root, apt) installs bubblewrap, podman, runc and mmdebstrap on first use.
Where that is impossible the test fails when CI is set and is skipped otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

APT_TIMEOUT = 900
ROOTFS_VERSION = 1  # bump when the package list below changes
ROOTFS_PACKAGES = "python3-minimal,ca-certificates"  # minbase brings bash and coreutils


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _apt_install(packages: list[str]) -> str:
    """apt-get install as root; '' on success, else what went wrong."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "not root or no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    for argv in (["apt-get", *lock, "update", "-qq"],
                 ["apt-get", *lock, "install", "-y", "-qq", *packages]):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT)
        if proc.returncode != 0:
            return f"{' '.join(argv)} failed: {proc.stderr[-500:]}"
    return ""


def require(binaries: dict[str, str]) -> None:
    """Make sure each binary exists (binary -> Debian package), installing the missing ones."""
    missing = {b: p for b, p in binaries.items() if shutil.which(b) is None}
    if not missing:
        return
    problem = _apt_install(sorted(set(missing.values())))
    still = [b for b in missing if shutil.which(b) is None]
    if still:
        _unavailable(f"{', '.join(still)} not available and could not be installed ({problem})")


def _codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return "bookworm"


def _host_sources() -> list[str]:
    """The host's apt sources files, so the rootfs comes from the host's own distribution."""
    found = [str(p) for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
    plain = Path("/etc/apt/sources.list")
    if plain.exists() and any(ln.strip() and not ln.lstrip().startswith("#")
                              for ln in plain.read_text().splitlines()):
        found.append(str(plain))
    return found


def sandbox_rootfs() -> Path:
    """A minimal rootfs tarball (bash, coreutils, python3), built once with mmdebstrap and kept
    in the temp folder across sessions; a lock makes parallel sessions build it once."""
    cache = Path(tempfile.gettempdir()) / "wintermute-test-cache"
    cache.mkdir(exist_ok=True)
    target = cache / f"sandbox-rootfs-{_codename()}-v{ROOTFS_VERSION}.tar"
    with open(cache / "rootfs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        partial = target.with_suffix(".partial.tar")
        argv = ["mmdebstrap", "--variant=minbase", f"--include={ROOTFS_PACKAGES}",
                _codename(), str(partial), *_host_sources()]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=APT_TIMEOUT)
        if proc.returncode != 0:
            _unavailable(f"mmdebstrap could not build the sandbox rootfs: {proc.stderr[-800:]}")
        partial.rename(target)
    return target


class PodmanService:
    """`podman system service` with its own store in a temp folder: a real Docker API."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.socket = base / "podman.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Our own containers.conf: exec sessions' conmon lingers 5 s, not podman's 300 s."""
        conf = self.base / "containers.conf"
        if not conf.exists():
            conf.write_text("[engine]\nexit_command_delay = 5\n")
        return {**os.environ, "CONTAINERS_CONF": str(conf)}

    def podman(self, *args: str) -> list[str]:
        b = self.base
        return ["podman", "--root", str(b / "root"), "--runroot", str(b / "run"),
                "--tmpdir", str(b / "tmp"), "--runtime", "runc", "--cgroup-manager", "cgroupfs",
                "--events-backend", "none", *args]

    async def start(self) -> None:
        for sub in ("root", "run", "tmp"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        # A daemon outliving this call: Popen (not asyncio's) so stop() works from sync teardown.
        log = open(self.base / "service.log", "wb")  # noqa: ASYNC230
        self.proc = subprocess.Popen(  # noqa: ASYNC220
            self.podman("system", "service", "--time=0", self.url), stdout=log, stderr=log,
            start_new_session=True, env=self.env(),
        )
        async with asyncio.timeout(60):
            while not await self._answers():
                if self.proc.poll() is not None:
                    raise RuntimeError(f"podman service exited: {(self.base / 'service.log').read_text()[-800:]}")
                await asyncio.sleep(0.1)

    async def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.socket))
        except OSError:
            return False
        # /version, not /_ping: podman answers the ping before its store is ready, and the
        # executor's first call (version) then took over its probe's deadline on a busy machine.
        writer.write(b"GET /version HTTP/1.0\r\n\r\n")
        data = await reader.read()
        writer.close()
        return b" 200 " in data.split(b"\r\n", 1)[0] + b" "

    async def import_image(self, tarball: Path, tag: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self.podman("import", str(tarball), tag), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=self.env())
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"podman import failed: {out.decode()[-800:]}")

    def stop(self) -> None:
        """Remove every container, then stop the service."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(self.podman("rm", "-af", "-t", "0"), capture_output=True, timeout=120,
                           env=self.env())
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(self.podman("system", "reset", "-f"), capture_output=True, timeout=120,
                           env=self.env())
        # The overlay driver bind-mounts its folder onto itself; without this pytest cannot
        # delete the temp folder later.
        overlay = self.base / "root" / "overlay"
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(["umount", "-l", str(overlay)], capture_output=True, timeout=60)

