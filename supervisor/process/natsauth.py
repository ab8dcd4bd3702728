"""Per-actor NATS users for the embedded server: nkeys, and the server config they go into.

Everything lives in WINTERMUTE_HOME/data/nats/ (folders 0700, files 0600):

- `keys/<user>.nk`: each user's nkey seed (ed25519), generated once and kept, so a restarted
  server, the actors the supervisor spawns and CLI commands all find them. A connection signs
  the server's nonce with it: microseconds of server time, where a bcrypt password cost
  ~120 ms per connect and stalled every reconnect on a busy CPU. The server only ever sees
  public keys; no password is stored anywhere.
- `server.json`: the nats-server config, rewritten by every `up`: one account per actor
  importing what its permissions allow, the supervisor and `cli` in the JetStream account
  (bus/accounts.py), each user known by its public key.

An older home's `users.json` (plaintext passwords) is deleted when the keys are made.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bus import Subjects, Subscription
from bus.accounts import api_prefix, server_accounts
from bus.permissions import inbox_prefix, users
from kit.private import private_dir, write_private


def nats_dir(home: Path) -> Path:
    return home / "data" / "nats"


def keys_dir(home: Path) -> Path:
    return nats_dir(home) / "keys"


def seed_file(home: Path, user: str) -> Path:
    return keys_dir(home) / f"{user}.nk"


@dataclass(frozen=True)
class EmbeddedAuth:
    """The users of one embedded server and where its config is."""

    config: Path
    seeds: dict[str, Path]

    def login(self, user: str) -> dict[str, str]:
        """`Bus.connect` keyword arguments for one user."""
        return login_kwargs(user, self.seeds[user])


def login_kwargs(user: str, seed: Path) -> dict[str, str]:
    """How one user connects: its seed file, its own inbox space, its JetStream API prefix
    (`user` names it; with a seed it is not sent to the server)."""
    return {"user": user, "seed": str(seed), "inbox": inbox_prefix(user),
            "api_prefix": api_prefix(user)}


def new_seed() -> str:
    """A fresh user nkey seed ("SU...")."""
    import nkeys

    return bytes(nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER)).decode()


def public_key(seed: str) -> str:
    """The public key ("U...") the server checks a seed's signatures against."""
    import nkeys

    pair = nkeys.from_seed(bytearray(seed.strip().encode()))
    try:
        return bytes(pair.public_key).decode()
    finally:
        pair.wipe()


def _read_seed(path: Path) -> str | None:
    try:
        seed = path.read_text().strip()
        public_key(seed)
    except Exception:  # noqa: BLE001 - missing, unreadable or not a seed: made anew
        return None
    return seed


def ensure_keys(home: Path) -> dict[str, str]:
    """Every user's public key; missing or broken seeds are generated and saved (0600)."""
    private_dir(nats_dir(home))
    private_dir(keys_dir(home))
    legacy = nats_dir(home) / "users.json"  # plaintext passwords of older versions
    legacy.unlink(missing_ok=True)
    found: dict[str, str] = {}
    for user in users():
        path = seed_file(home, user)
        seed = _read_seed(path)
        if seed is None:
            seed = new_seed()
            write_private(path, seed + "\n")
        os.chmod(path, 0o600)
        found[user] = public_key(seed)
    return found


def server_config(
    subjects: Subjects, logins: dict[str, dict[str, Any]],
    durables: dict[str, list[Subscription]],
) -> dict[str, Any]:
    """The nats-server config (JSON is valid NATS config): accounts, users and permissions.
    `logins[user]` is how the user authenticates: `{"nkey": "U..."}` here, a user and a
    password reference in the Helm chart (supervisor/process/natschart.py)."""
    return {"accounts": server_accounts(subjects, {u: logins[u] for u in users()}, durables)}


def prepare(
    home: Path, subjects: Subjects, durables: dict[str, list[Subscription]]
) -> EmbeddedAuth:
    """Make sure every user has a key and write the server config for this start."""
    keys = ensure_keys(home)
    config = nats_dir(home) / "server.json"
    logins = {user: {"nkey": key} for user, key in keys.items()}
    write_private(config, json.dumps(server_config(subjects, logins, durables), indent=2))
    return EmbeddedAuth(config, {u: seed_file(home, u) for u in keys})


def connect_kwargs(home: Path, user: str) -> dict[str, str]:
    """`Bus.connect` keyword arguments for one embedded-server user ({} when it has no key)."""
    path = seed_file(home, user)
    return login_kwargs(user, path) if _read_seed(path) is not None else {}
