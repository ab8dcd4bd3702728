"""The executor's policy gate: who may call a tool, and which commands need the owner's approval."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec

from actors.executor.shellgate import review

DEFAULT_OWNER_ONLY = frozenset({"execute_command"})


class Decision(msgspec.Struct, frozen=True):
    """A verdict ('allow', 'approve' or 'deny') and a sentence explaining it."""

    verdict: str
    reason: str = ""


class PolicyGate:
    """Decides whether a tool call runs, needs the owner's approval, or is refused."""

    def __init__(
        self, risky_patterns: Iterable[str], owner_only_tools: Iterable[str] = DEFAULT_OWNER_ONLY,
        *, allowlist: Iterable[str] | None = None,
    ) -> None:
        """Compile the risky command regexes (re.error on a bad one). With an allowlist (direct
        mode) a command must also pass shellgate.review: harmless commands only."""
        self.risky = [re.compile(pattern) for pattern in risky_patterns]
        self.owner_only = frozenset(owner_only_tools)
        self.allowlist = None if allowlist is None else frozenset(allowlist)

    def decide(self, tool: str, arguments: dict[str, Any], is_owner: bool) -> Decision:
        """Return the verdict for one tool call."""
        if tool in self.owner_only and not is_owner:
            return Decision("deny", f"Only the owner may use {tool}; this request was refused.")
        if tool != "execute_command":
            return Decision("allow")
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return Decision("deny", "execute_command needs a non-empty 'command' string.")
        for pattern in self.risky:
            if pattern.search(command):
                return Decision(
                    "approve",
                    f"The command matches the risky pattern `{pattern.pattern}`, "
                    "so it needs the owner's approval.",
                )
        if self.allowlist is not None and (reason := review(command, self.allowlist)):
            return Decision("approve", reason)
        return Decision("allow")
