"""One NATS account per actor: the permission table rendered so replies cannot become actions.

A user's publish permissions are checked on the subject it publishes to, never on the reply
subject it names; the server itself then publishes its answer (a pulled message, a publish
acknowledgement, a KV value, a status) to that reply subject. In the account that owns
JetStream, an answer sent to `$JS.API.STREAM.DELETE.X` *is* a request to delete X, made with
the server's own rights. So every actor lives in an account of its own, with no JetStream, that
imports from the JetStream account exactly the services its permissions allow (the same
subjects: `permissions()` stays the one table). A request made through an import is answered
through the import, back into the actor's own account, where a reply subject names nothing but
the same imports the actor could call anyway.

Imports of the JetStream API are mapped under `API_PREFIX` (an actor's JetStream context uses
that prefix): in an account without JetStream the server itself answers `$JS.API.>` with "not
enabled", which would race the imported answer. `$JS.ACK`, `$KV` and stream subjects keep
their names.

What such a role subscribes to besides its own inbox (the `operator`'s `wm.>`) is imported as a
stream: it sees the messages, and a reply subject on them is only a name. The supervisor and
the command line (`cli`, the owner's tool) stay in the JetStream account.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bus.consumer import Subscription
from bus.permissions import CLI, SUPERVISOR, permissions
from bus.subjects import Subjects

#: The account that owns every stream, bucket and consumer.
JS_ACCOUNT = "wintermute"
#: Where an actor's account sees the JetStream API it imports (`$JS.API.X` -> `API_PREFIX.X`).
API_PREFIX = "JS.wintermute.API"
_JS_API = "$JS.API"


def account_of(role: str) -> str:
    """The NATS account a role's user lives in."""
    return JS_ACCOUNT if role in (SUPERVISOR, CLI) else role


def api_prefix(role: str) -> str:
    """The JetStream API prefix a role's connection uses."""
    return _JS_API if account_of(role) == JS_ACCOUNT else API_PREFIX


def _local(subject: str) -> str:
    """The name an imported subject has in the importing account."""
    if subject.startswith(_JS_API + "."):
        return API_PREFIX + subject[len(_JS_API):]
    return subject


def _response_type(subject: str) -> str:
    # A pull request is answered by as many messages as it asked for (and status messages).
    return "Stream" if subject.startswith("$JS.API.CONSUMER.MSG.NEXT.") else "Singleton"


def _own_inbox(subject: str) -> bool:
    return subject.startswith("_INBOX")


def server_accounts(
    s: Subjects, users: Mapping[str, dict[str, Any]],
    durables: Mapping[str, Iterable[Subscription]],
) -> dict[str, Any]:
    """The nats-server `accounts` block: `users[role]` is the role's credential entry (e.g.
    `{"nkey": "U..."}`), to which its permissions are added."""
    accounts: dict[str, Any] = {JS_ACCOUNT: {"jetstream": "enabled", "users": [],
                                             "exports": []}}
    exported: dict[str, list[str]] = {}  # service subject -> accounts that import it
    streamed: dict[str, list[str]] = {}  # stream (core message) subject -> importing accounts
    for role, entry in users.items():
        perms = permissions(s, role, durables.get(role, ()))
        name = account_of(role)
        if name == JS_ACCOUNT:
            accounts[JS_ACCOUNT]["users"].append({**entry, "permissions": perms})
            continue
        imports = [p for p in perms["publish"]["allow"] if not _own_inbox(p)]
        watched = [p for p in perms["subscribe"]["allow"] if not _own_inbox(p)]
        local = {"publish": {"allow": [_local(p) for p in perms["publish"]["allow"]]},
                 "subscribe": perms["subscribe"]}
        accounts[name] = {
            "jetstream": "disabled", "users": [{**entry, "permissions": local}],
            "imports": [{"service": {"account": JS_ACCOUNT, "subject": subject},
                         "to": _local(subject)} for subject in imports]
            + [{"stream": {"account": JS_ACCOUNT, "subject": subject}} for subject in watched],
        }
        for subject in imports:
            exported.setdefault(subject, []).append(name)
        for subject in watched:
            streamed.setdefault(subject, []).append(name)
    accounts[JS_ACCOUNT]["exports"] = [
        {"service": subject, "accounts": names, "response_type": _response_type(subject)}
        for subject, names in exported.items()
    ] + [{"stream": subject, "accounts": names} for subject, names in streamed.items()]
    return accounts
