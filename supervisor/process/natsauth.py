"""Per-actor NATS users for the embedded server: passwords, bcrypt hashes, the server config.

Everything lives in WINTERMUTE_HOME/data/nats/ (folder 0700, files 0600):

- `users.json`: each user's random password and its bcrypt hash, generated once and kept, so
  a restarted server, the actors the supervisor spawns and CLI commands all find them;
- `server.json`: the nats-server config, rewritten by every `up`: one user per actor, the
  supervisor and `cli`, each with a bcrypt hash and the permissions of bus/permissions.py.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bus import Subjects, Subscription
from bus.permissions import permissions, users

BCRYPT_COST = 11  # what `nats server passwd` uses; the server checks it once per connection


def nats_dir(home: Path) -> Path:
    return home / "data" / "nats"


def users_file(home: Path) -> Path:
    return nats_dir(home) / "users.json"


@dataclass(frozen=True)
class EmbeddedAuth:
    """The users of one embedded server and where its config is."""

    config: Path
    passwords: dict[str, str]

    def login(self, user: str) -> tuple[str, str]:
        """(user, password) for one user."""
        return user, self.passwords[user]


def _write_private(path: Path, text: str) -> None:
    """Write a file readable only by its owner, replacing it atomically."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _load_users(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {u: v for u, v in data.items()
            if isinstance(v, dict) and v.get("password") and str(v.get("hash", "")).startswith("$2")}


def ensure_users(home: Path) -> dict[str, dict[str, str]]:
    """Every user's password and bcrypt hash; missing users are generated and saved (0600)."""
    import bcrypt

    folder = nats_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = users_file(home)
    known = _load_users(path)
    changed = False
    for user in users():
        if user not in known:
            password = secrets.token_urlsafe(24)
            digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(BCRYPT_COST, prefix=b"2a"))
            known[user] = {"password": password, "hash": digest.decode()}
            changed = True
    if changed or not path.exists():
        _write_private(path, json.dumps(known, indent=2, sort_keys=True))
    os.chmod(path, 0o600)
    return known


def server_config(
    subjects: Subjects, known: dict[str, dict[str, str]], durables: dict[str, list[Subscription]]
) -> dict[str, Any]:
    """The nats-server config (JSON is valid NATS config): users, hashes and permissions."""
    entries = [
        {"user": user, "password": known[user]["hash"],
         "permissions": permissions(subjects, user, durables.get(user, ()))}
        for user in users()
    ]
    return {"authorization": {"users": entries}}


def prepare(
    home: Path, subjects: Subjects, durables: dict[str, list[Subscription]]
) -> EmbeddedAuth:
    """Make sure every user exists and write the server config for this start."""
    known = ensure_users(home)
    config = nats_dir(home) / "server.json"
    _write_private(config, json.dumps(server_config(subjects, known, durables), indent=2))
    return EmbeddedAuth(config, {u: v["password"] for u, v in known.items()})


def login(home: Path, user: str) -> tuple[str, str] | None:
    """(user, password) of one embedded-server user, or None when there are no credentials."""
    entry = _load_users(users_file(home)).get(user)
    return (user, entry["password"]) if entry else None


def connect_kwargs(home: Path, user: str) -> dict[str, str]:
    """`Bus.connect` keyword arguments for one embedded-server user ({} when it has none)."""
    found = login(home, user)
    return {"user": found[0], "password": found[1]} if found else {}
