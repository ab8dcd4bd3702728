"""Direct mode: no sandbox at all, the last resort, labelled as such everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from actors.executor.command import CommandResult, run_command
from actors.executor.sandbox.base import Sandbox

DIRECT_NOTE = (
    "direct (UNSANDBOXED): commands run as the Wintermute user on the host with its full "
    "network and file access; the environment is scrubbed, only commands made of "
    "executor.direct_allowlist (parsed like the shell) run without the owner's approval, and "
    "at the timeout every process a command started is killed"
)


class DirectSandbox(Sandbox):
    """No isolation: bash as the Wintermute user, scrubbed environment, anything not plainly
    harmless approved (shellgate), the whole process tree killed at the timeout."""

    kind = "direct"
    note = DIRECT_NOTE
    isolated = False
    network = "host"

    def __init__(self, reason: str = "executor.mode is \"direct\"") -> None:
        self.reason = reason
        self.note = f"{DIRECT_NOTE} ({reason})"

    async def run(
        self, command: str, *, cwd: Path, timeout: float, output_limit: int,
        env: Mapping[str, str], stdin: bytes = b"", read_only_scripts: bool = False,
    ) -> CommandResult:
        # No isolation at all here: the host's own permissions are all there is.
        return await run_command(
            command, cwd=cwd, timeout=timeout, output_limit=output_limit, env=env, stdin=stdin
        )
