"""Run a skill's script under the skill's own limits (seed 004), whatever executor.mode is.

A skill script always runs in a fresh bubblewrap namespace: the skill folder read-only at
/skill, the workspace read-write at /workspace, nothing else of the home, no capabilities, no
network at all (its own network namespace and no egress forwarder, so even loopback is its
own), and the manifest's time, memory and process caps (cgroups where this process may create
them, else rlimits; limits.py). Without a working bwrap the script is refused with the reason:
running it on the host would ignore the limits the skill was written against. A one-shot
Docker container per script is not built.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

import msgspec

from actors.executor.command import CommandResult
from actors.executor.sandbox.base import Layout, SandboxError, refused
from actors.executor.sandbox.bwrap import BwrapSandbox
from actors.executor.sandbox.limits import CommandLimits, Hierarchy, Limits, detect_cgroups
from contracts.config import SandboxConfig
from kit.skillmd import SkillLimits

SKILL_INSIDE = "/skill"
INTERPRETERS = {".py": "python3", ".sh": "bash"}


class _WorkspaceOnly(Layout):
    """The workspace only: a skill script does not see scripts/ (the agent's own tools)."""

    def shared(self) -> list[tuple[Path, str]]:
        return [(self.workspace, "/workspace")]


class _SkillBwrap(BwrapSandbox):
    """bwrap with the skill folder bound read-only at /skill."""

    def __init__(self, layout: Layout, skill_dir: Path, limits: CommandLimits) -> None:
        self.skill_dir = skill_dir
        super().__init__(layout, network="none", limits=limits)

    def _base_args(self, python_binds: list[str]) -> list[str]:
        args = super()._base_args(python_binds)
        assert args[-2:] == ["--remount-ro", "/"]  # mounts must come before the remount
        return [*args[:-2], "--ro-bind", str(self.skill_dir), SKILL_INSIDE, *args[-2:]]


def script_command(script: str, args: list[str]) -> str:
    """The shell command that runs scripts/<script> from /skill with args, in /workspace."""
    path = f"{SKILL_INSIDE}/{script}"
    runner = INTERPRETERS.get(Path(script).suffix)
    argv = ([runner, path] if runner else [path]) + args
    return shlex.join(argv)


class SkillRunner:
    """Checks once that bubblewrap works here, then runs skill scripts one namespace each."""

    def __init__(self, home: Path, sandbox: SandboxConfig) -> None:
        self.home = home
        self.sandbox = sandbox
        self._hierarchies: list[Hierarchy] | None = None
        self._problem: str | None = None  # None: not probed yet
        self._lock = asyncio.Lock()

    def describe(self) -> str:
        """How skill scripts run here, for `wintermute skills` and status."""
        if self._problem:
            return f"skill scripts are refused: {self._problem}"
        return ("each skill script runs under bubblewrap: skill folder read-only, workspace "
                "writable, no network, no capabilities, the skill's time/memory/process caps")

    async def ready(self) -> str:
        """"" when scripts can run, else the reason they cannot (probed once)."""
        async with self._lock:
            if self._problem is None:
                self._problem = await self._probe()
            return self._problem

    async def _probe(self) -> str:
        if shutil.which("bwrap") is None:
            return "bwrap is not installed (apt-get install bubblewrap)"
        self._hierarchies = await asyncio.to_thread(detect_cgroups)
        layout = _WorkspaceOnly(self.home)
        probe = _SkillBwrap(layout, layout.workspace, self._limits(SkillLimits()))
        try:
            await probe.probe()
        except SandboxError as exc:
            return str(exc)
        return ""

    def capped(self, limits: SkillLimits) -> SkillLimits:
        """The manifest's limits within the owner's [sandbox] ceilings (a skill may ask for
        less than a command gets, never more)."""
        return msgspec.structs.replace(
            limits, memory_mb=min(limits.memory_mb, self.sandbox.memory_mb),
            pids=min(limits.pids, self.sandbox.pids_limit))

    def _limits(self, limits: SkillLimits) -> CommandLimits:
        lim = Limits(pids=limits.pids, memory_mb=limits.memory_mb,
                     file_size_mb=self.sandbox.file_size_mb, cpu_secs=limits.timeout_secs)
        return CommandLimits(lim, self._hierarchies or [])

    async def run(self, skill_dir: Path, script: str, args: list[str], limits: SkillLimits, *,
                  env: Mapping[str, str], stdin: bytes, output_limit: int) -> CommandResult:
        """Run one script of the skill; a refusal (exit code 126) says why it did not run."""
        problem = await self.ready()
        if problem:
            return refused(f"Not run: skill scripts need a working bubblewrap sandbox and "
                           f"{problem}.")
        limits = self.capped(limits)
        layout = await asyncio.to_thread(_WorkspaceOnly, self.home)
        real = await asyncio.to_thread(skill_dir.resolve)
        sandbox = _SkillBwrap(layout, real, self._limits(limits))
        return await sandbox.run(script_command(script, args), cwd=layout.workspace,
                                 timeout=limits.timeout_secs, output_limit=output_limit,
                                 env={**env, "SKILL_DIR": SKILL_INSIDE}, stdin=stdin)
