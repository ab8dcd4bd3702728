"""`wintermute nats-context`: a context file for the standard `nats` CLI (and other clients).

The file is what `nats context save` writes (`$XDG_CONFIG_HOME/nats/context/<name>.json`): the
running server's URL, the path of the user's nkey seed (never the seed), its inbox prefix and,
for `operator`, the JetStream API prefix its account imports the API under.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from bus.accounts import api_prefix
from bus.permissions import CLI, OPERATOR, inbox_prefix
from contracts.config import Settings
from kit.private import private_dir, write_private
from supervisor.process.natsauth import seed_file
from supervisor.process.up import running_instance

USERS = (OPERATOR, CLI)


def context_dir() -> Path:
    """Where the nats CLI looks for contexts."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nats" / "context"


def context(settings: Settings, user: str) -> dict[str, Any]:
    """The context of one embedded-server user of the running instance."""
    info = running_instance(settings.home)
    if info is None:
        sys.exit(f"wintermute is not running for {settings.home}: start it with `wintermute up`, "
                 "then write the context (the embedded server's port changes at every start "
                 "unless [nats] port is set).")
    seed = seed_file(settings.home, user)
    if not info.get("nats_keys") or not seed.exists():
        sys.exit(f"This instance has no key for {user} ({seed}); NATS contexts are for the "
                 "embedded server, whose keys `wintermute up` creates.")
    ctx: dict[str, Any] = {
        "description": f"Wintermute at {settings.home}, as {user}",
        "url": str(info["nats_url"]), "nkey": str(seed), "inbox_prefix": inbox_prefix(user),
    }
    if api_prefix(user) != "$JS.API":
        ctx["jetstream_api_prefix"] = api_prefix(user)
    return ctx


def write_context(settings: Settings, user: str, name: str = "") -> tuple[Path, str]:
    """Write the context file; returns its path and its name for `nats --context`."""
    name = name or f"wintermute-{user}"
    path = private_dir(context_dir()) / f"{name}.json"
    write_private(path, json.dumps(context(settings, user), indent=2) + "\n")
    return path, name
