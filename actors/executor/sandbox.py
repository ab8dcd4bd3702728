"""Where commands run. Only direct mode is built; bubblewrap and Docker-API backends come next."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from actors.executor.command import CommandResult, run_command


class Sandbox:
    """Runs one shell command with a timeout and an output cap."""

    kind = "none"
    note = ""

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"",
    ) -> CommandResult:
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the sandbox holds (containers, proxies)."""


class DirectSandbox(Sandbox):
    """No isolation: bash as the Wintermute user, scrubbed environment, risky commands approved."""

    kind = "direct"
    note = (
        "direct: commands run as the Wintermute user without a sandbox; risky commands need "
        "the owner's approval"
    )

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"",
    ) -> CommandResult:
        return await run_command(
            command, cwd=cwd, timeout=timeout, output_limit=output_limit, env=env, stdin=stdin
        )


async def detect_sandbox(mode: str, home: Path) -> Sandbox:
    """The sandbox for `executor.mode` (only "direct" exists so far; "auto" picks it)."""
    del home
    if mode in ("direct", "auto"):
        return DirectSandbox()
    raise ValueError(f"executor.mode {mode!r} is not built")
