"""What a tool is to the executor: a spec, a few flags, and `run`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from contracts import ToolRequest, ToolSpec

if TYPE_CHECKING:
    from actors.executor.sandbox import Sandbox
    from bus import Bus
    from contracts.config import Settings
    from kit.redact import Redactor


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool produced; the executor redacts it and publishes the ToolResult."""

    ok: bool
    output: str
    timed_out: bool = False
    label: str = ""  # what the tool claims its output is; the ceiling overrides a lower claim
    refused: bool = False  # refused by policy (not allowed), not the tool failing


class ToolContext:
    """What tools may use: settings, the bus, the sandbox, the redactor, the workspace."""

    def __init__(
        self, settings: Settings, bus: Bus, sandbox: Sandbox, redactor: Redactor,
        env: dict[str, str],
    ) -> None:
        self.settings = settings
        self.config = settings.config
        self.home: Path = settings.home
        self.bus = bus
        self.subjects = bus.subjects
        self.sandbox = sandbox
        self.redactor = redactor
        from kit.outbound import SecretScanner

        self.scanner = SecretScanner(redactor)  # the outbound gate's view of known secrets
        self.env = env
        self.workspace = settings.home / "workspace"
        self.scripts = settings.home / "scripts"


class Tool:
    """A tool offered to the model. Subclasses set `spec` and implement `run`."""

    spec: ToolSpec
    owner_only: bool = False  # refused for anyone but the owner
    side_effects: bool = True  # never run twice: a redelivery after a crash is reported instead
    core: bool = True  # core tools are always offered; agent-created ones are ranked
    outbound: bool = False  # sends its arguments off this machine (network, chats, models)

    @property
    def name(self) -> str:
        return self.spec.name

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        """Why this call needs the owner's approval, or "" when it does not."""
        return ""

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput | None:
        """Do the work. None means another actor publishes the result (forwarded)."""
        raise NotImplementedError


def arg_str(req: ToolRequest, key: str, default: str = "") -> str:
    value: Any = req.arguments.get(key, default)
    return value if isinstance(value, str) else str(value)


def arg_float(req: ToolRequest, key: str, default: float) -> float:
    try:
        value = req.arguments.get(key)
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def arg_int(req: ToolRequest, key: str, default: int) -> int:
    try:
        value = req.arguments.get(key)
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default
