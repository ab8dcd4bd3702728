"""Sign a tool call as the planner would (kit/capability.py), for tests that hand calls to the
executor directly; tests/conftest.py puts TEST_KEY in the environment."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec

from contracts import ToolRequest, templates
from contracts.capability import Capability
from kit import capability

TEST_KEY = bytes(range(32))


def signed(req: ToolRequest, kind: str = "", configured: dict[str, Any] | None = None,
           **override: Any) -> ToolRequest:
    """`req` with a valid token for its principal's template (fields in `override` replace
    the token's, to forge one)."""
    name = templates.choose(req.principal, kind, req.is_owner, configured or {})
    template = templates.get(name, configured or {})
    cap = Capability(
        request=req.id, session=req.session, turn_id=req.turn_id, template=name,
        principal=req.principal, principal_kind=kind, tool=req.name,
        args=capability.digest(req.arguments),
        reply_to="" if req.reply_to is None else str(req.reply_to), sinks=list(template.sinks),
        ceiling=template.data_ceiling, issued_at=time.time(), expires_at=time.time() + 600,
    )
    cap = msgspec.structs.replace(cap, **override)
    return msgspec.structs.replace(req, capability=capability.sign(TEST_KEY, cap))


#: A template giving paired principals every tool, for tests of the executor's own checks
#: (owner-only tools) behind the template's: add OPEN_TOML to the home's config.toml.
OPEN = {"open_paired": templates.Template(kinds=["paired"], tools=["*"], sinks=["*"])}
OPEN_TOML = '\n[privacy.templates.open_paired]\nkinds = ["paired"]\ntools = ["*"]\nsinks = ["*"]\n'


def open_templates(home: Path, toml: str = OPEN_TOML) -> None:
    """Append template settings to the home's config.toml."""
    with (home / "config.toml").open("a") as fh:
        fh.write(toml)


def as_paired(req: ToolRequest) -> ToolRequest:
    """A non-owner's call signed under OPEN (the owner's under owner_chat)."""
    return signed(req) if req.is_owner else signed(req, "paired", OPEN)
