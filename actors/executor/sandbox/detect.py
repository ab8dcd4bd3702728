"""Pick the sandbox at start-up: Docker API with the image, else bubblewrap, else direct."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

from actors.executor.sandbox.base import (
    Layout,
    Sandbox,
    SandboxError,
    UnavailableSandbox,
    start_egress,
)
from actors.executor.sandbox.bwrap import BwrapSandbox
from actors.executor.sandbox.direct import DirectSandbox
from actors.executor.sandbox.limits import CommandLimits, Limits, detect_cgroups
from contracts.config import Config

log = logging.getLogger(__name__)


async def open_bwrap(config: Config, layout: Layout, *, reason: str = "") -> BwrapSandbox:
    """A working bubblewrap sandbox (probed), or SandboxError saying why not."""
    if shutil.which("bwrap") is None:
        raise SandboxError("bwrap is not installed (apt-get install bubblewrap)")
    cgroups = await asyncio.to_thread(detect_cgroups)
    limits = CommandLimits(Limits.from_config(config.sandbox), cgroups)
    proxy, egress_dir = await start_egress(config, layout)
    sandbox = BwrapSandbox(layout, network=config.executor.network, proxy=proxy,
                           egress_dir=egress_dir, reason=reason, limits=limits)
    try:
        await sandbox.probe()
    except SandboxError:
        await sandbox.close()
        raise
    return sandbox


async def detect_sandbox(config: Config, home: Path) -> Sandbox:
    """The sandbox for executor.mode ("auto", "docker", "bwrap" or "direct"), never a silent
    downgrade: an explicit mode that cannot start refuses commands and says why."""
    mode = config.executor.mode
    if mode == "direct":
        return DirectSandbox()
    layout = Layout(home)
    skipped: list[str] = []
    if mode in ("auto", "docker"):
        from actors.executor.sandbox._docker_open import open_docker

        try:
            why = "executor.mode is \"docker\"" if mode == "docker" else ""
            return await open_docker(config, layout, reason=why)
        except SandboxError as exc:
            if mode == "docker":
                log.error("docker sandbox unavailable: %s", exc)
                return UnavailableSandbox(mode, str(exc))
            skipped.append(f"docker: {exc}")
    if mode in ("auto", "bwrap"):
        why = "executor.mode is \"bwrap\"" if mode == "bwrap" else (
            f"chosen by executor.mode \"auto\" because {skipped[0]}")
        try:
            return await open_bwrap(config, layout, reason=why)
        except SandboxError as exc:
            if mode == "bwrap":
                log.error("bwrap sandbox unavailable: %s", exc)
                return UnavailableSandbox(mode, str(exc))
            skipped.append(f"bwrap: {exc}")
    log.warning("no sandbox available, running commands unsandboxed: %s", "; ".join(skipped))
    return DirectSandbox(reason="executor.mode \"auto\" found no sandbox: " + "; ".join(skipped))
