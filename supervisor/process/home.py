"""`wintermute init`: lay out WINTERMUTE_HOME. Idempotent: never overwrites what exists."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from kit.private import private_dir
from kit.safegit import ensure_repo
from kit.skillmd import ship_examples

CONFIG_TOML = """\
# Wintermute configuration: owned by you; the agent reads it and never writes it.
# Every key can also be set from the environment: WM__SECTION__KEY=value
# (JSON literals such as 3, true or [111] are taken as such).

[models]
# "{provider}/{model}" with provider anthropic, openai (any OpenAI-compatible server) or ollama.
# Empty: picked from ANTHROPIC_API_KEY / OPENAI_API_KEY / OPENAI_BASE_URL / OLLAMA_HOST.
default = ""
fallback = []
# [models.roles]
# observer = "ollama/qwen3:8b"
# oracle = "anthropic/claude-opus-4-6"

[budget]
max_tokens_per_session = 500000
max_tokens_per_day = 5000000
max_tool_calls_per_turn = 20
max_dynamic_tools_per_turn = 20

[owner]
# Where owner notifications and approval prompts go.
sink = "terminal:owner"
principals = ["terminal:owner"]

[channels.terminal]
enabled = true

[executor]
# auto: a Docker/Podman API that has `image`, else bubblewrap, else direct (unsandboxed: risky
# commands then need your approval). docker / bwrap force one; direct never sandboxes.
mode = "auto"
network = "proxy"      # sandboxed modes: "proxy" (allowlisted domains + package registries) or "none"
timeout_secs = 120
output_limit = 16000

[nats]
# Empty url: `wintermute up` runs an embedded nats-server with its store under data/, with
# one NATS account and user per actor (nkeys in data/nats/keys/, created by `up`).
# Your own server: set url and credentials = "/path/to/user.creds", seed = "/path/to/user.nk"
# or user and password.
url = ""
port = 0
prefix = "wm"
"""

AGENT_TOML = """\
# Owned by the agent (personality, schedule); you may edit it too.

[personality]
name = "Wintermute"

[heartbeat]
enabled = true
interval_secs = 30

# [[scheduled_tasks]]
# name = "morning_brief"
# cron = "0 8 * * *"
# prompt = "Summarise what is on my plate today."
# sink = "terminal:owner"
"""

ENV_TEMPLATE = """\
# Secrets for Wintermute (this file is mode 0600). Only the process that needs a key reads it.
# ANTHROPIC_API_KEY=
# OPENAI_API_KEY=
# OPENAI_BASE_URL=http://127.0.0.1:8080/v1
# OLLAMA_HOST=http://127.0.0.1:11434
# WINTERMUTE_TELEGRAM_TOKEN=
"""

AGENTS_MD = "# AGENTS.md\n\nLessons learned while working. The agent appends here.\n"
USER_MD = "# User Profile\n\nWhat the agent knows about its owner (kept up to date by the observer).\n"
IDENTITY_MD = "# Wintermute\n\nThe heartbeat regenerates this file from the live configuration.\n"

#: Folders with conversations or credentials in them (logs, the NATS store, keys, memory).
PRIVATE_DIRS = ("data", "logs")
DIRS = ("docs", "scripts", "workspace", "workspace/inbox", "workspace/outputs", "data", "logs",
        "backups")


#: Files a deployment may provide (Helm values, `init --seed DIR`): prompt files and agent.toml.
SEEDABLE = ("AGENTS.md", "USER.md", "HEARTBEAT.md", "agent.toml")


def init_home(home: Path, seed: Path | None = None) -> list[str]:
    """Create missing files and folders; returns what was created. Safe to run from several
    processes at once on a shared volume (Kubernetes init containers): one at a time."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".init.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            created = apply_seed(home, seed) if seed is not None else []
            return created + _init_locked(home)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def apply_seed(home: Path, seed: Path) -> list[str]:
    """Copy the deployment's prompt files and agent.toml into the home.

    The rule: a seed file is written when the home has no such file, or when the home's file is
    still exactly what the last seed (or the built-in template) put there. Once the agent or the
    owner changed a file, a new seed never overwrites it (it is reported as kept); delete the
    file to take the seed again. What was seeded is remembered in data/seeded.json.
    """
    record_path = home / "data" / "seeded.json"
    try:
        record: dict[str, str] = json.loads(record_path.read_text())  # a local file, not KV
    except (OSError, ValueError):
        record = {}
    templates = {"AGENTS.md": AGENTS_MD, "USER.md": USER_MD, "agent.toml": AGENT_TOML}
    done: list[str] = []
    for name in SEEDABLE:
        source = seed / name
        if not source.is_file():
            continue
        text = source.read_text()
        target = home / name
        current = target.read_text() if target.exists() else None
        pristine = current is None or _digest(current) in {
            record.get(name), _digest(templates.get(name, "\0"))}
        if current == text:
            record[name] = _digest(text)
        elif pristine:
            target.write_text(text)
            record[name] = _digest(text)
            done.append(f"{name} (seeded)")
        else:
            done.append(f"{name} (kept: changed since it was seeded)")
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True))
    return done


def _init_locked(home: Path) -> list[str]:
    created: list[str] = []
    for d in DIRS:
        path = home / d
        if not path.exists():
            path.mkdir(parents=True)
            created.append(d + "/")
        if d in PRIVATE_DIRS:  # conversations, credentials, the store: the owner's only
            private_dir(path)
    files = {
        "config.toml": CONFIG_TOML, "agent.toml": AGENT_TOML, "AGENTS.md": AGENTS_MD,
        "USER.md": USER_MD, "IDENTITY.md": IDENTITY_MD,
    }
    for name, text in files.items():
        path = home / name
        if not path.exists():
            path.write_text(text)
            created.append(name)
    env = home / ".env"
    if not env.exists():
        fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(ENV_TEMPLATE)
        created.append(".env")
    os.chmod(env, 0o600)
    # Outside every sandbox mount; also moves an old, untrusted scripts/.git aside.
    created += ensure_repo(home / "scripts")
    created += [f"skills/{name}/" for name in ship_examples(home / "skills")]
    return created

