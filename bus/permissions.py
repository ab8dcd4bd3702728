"""Least privilege on the bus: what each NATS user may publish and subscribe, from one table.

What a role publishes and which durables it pulls from come from the route table
(contracts/routes.py): a type's producers may publish its subject, a durable's actor may pull
from it, so a new message or consumer is granted by declaring it there. `GRANTS` adds, per
role, the core subjects it subscribes to, the KV keys it reads and writes and the streams whose
history it reads, relative to the instance prefix. `permissions()` turns these into the
`permissions` block of a nats-server user; the embedded server's config and (later) the Helm
chart render from it.

What a user may do on JetStream is spelled out subject by subject. Actors get no
`$JS.API.CONSUMER.CREATE` at all: nats-server does not check a push consumer's deliver subject
against the creator's permissions, so creating consumers would let an actor republish stream
content anywhere. The supervisor creates every durable consumer; actors look theirs up, pull
from it and ack. Key listing goes through `$JS.API.STREAM.INFO` (subject counts), not a watch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bus.consumer import Subscription
from bus.routing import subscriptions
from bus.subjects import BucketSpec, StreamSpec, Subjects
from contracts.routes import ACTORS, CHANNELS, CLI, SUPERVISOR, publishes

__all__ = ["CHANNELS", "CLI", "GRANTS", "INSPECT", "OPERATOR", "SUPERVISOR", "Grant",
           "permissions", "scope", "users"]

#: A read-only user for standard NATS tools (`wintermute nats-context`): not an actor, it
#: produces nothing, so it is not in the route table.
OPERATOR = "operator"


@dataclass(frozen=True)
class Grant:
    """What one role does on the bus besides publishing its routes and pulling from its
    durables (prefix-relative)."""

    subscribe: tuple[str, ...] = ()  # core subscriptions after "<prefix>."
    kv_read: tuple[str, ...] = ()  # buckets by short name ("state"): get and list keys
    kv_write: tuple[str, ...] = ()  # "bucket:keys", e.g. "state:telegram.>" (implies reading)
    history: tuple[str, ...] = ()  # streams ("in", "cmd", ...) read with short-lived consumers
    scratch: bool = False  # administers the scratch prefix of `replay --rerun`
    inspect: bool = False  # lists and reads every stream, consumer and bucket; changes nothing
    admin: bool = False  # provisions streams, buckets and consumers: everything


GRANTS: dict[str, Grant] = {
    "channel": Grant(
        kv_read=("state", "budget"),
        kv_write=("done:sent.>", "done:tgsent.>", "done:tgpreview.>", "done:slack.>",
                  "done:webhook.>", "state:telegram.>"),
    ),
    "planner": Grant(kv_read=("state", "budget"),
                     # budget: renewal of a paused session on the next message, /reset
                     kv_write=("sessions:>", "budget:session.>")),
    "llm": Grant(kv_write=("budget:day.>", "budget:session.>")),
    "executor": Grant(
        kv_read=("state", "tools"),
        kv_write=("state:executor", "state:tools", "state:tools.>", "state:trust.>",
                  "state:image.>", "done:exec.>", "done:revert.>",
                  # the WriteGate's proposals and its once-only reverts (actors/executor/gate)
                  "state:gate.>", "done:homerevert.>"),
    ),
    "memory": Grant(kv_write=("state:memory",)),
    "approval": Grant(kv_write=("approvals:>",)),
    # learning is charged to the daily budget: the observer reads it before asking the model
    "observer": Grant(kv_read=("budget",)),
    "heartbeat": Grant(kv_read=("health", "state", "budget"),
                       kv_write=("state:sched.>", "state:schedule")),
    CLI: Grant(
        # chat, approve/deny, revert, tools release, tasks enable; tap and chat read wm.>
        subscribe=(">",),
        # health: `status` checks the actors' own reports
        kv_read=("state", "tools", "budget", "health"),
        # sessions: `replay --fork-at` seeds the history of the new session it forks into
        # budget:day: `replay --model` charges a live model's tokens to today's budget
        kv_write=("tools:>", "state:flatline.tool.>", "state:task.>", "sessions:>",
                  "budget:day.>"),
        history=("in", "out", "cmd", "evt", "dlq", "audit"),
        scratch=True,
    ),
    # `nats sub`, `nats stream ls/info/get`, `nats consumer ls/info`, `nats kv ls/get`.
    OPERATOR: Grant(subscribe=(">",), inspect=True),
    SUPERVISOR: Grant(admin=True),
}

#: What `inspect` allows: the JetStream API's read-only requests.
INSPECT = ("$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.STREAM.INFO.*",
           "$JS.API.STREAM.MSG.GET.*", "$JS.API.DIRECT.GET.*", "$JS.API.DIRECT.GET.*.>",
           "$JS.API.CONSUMER.NAMES.*", "$JS.API.CONSUMER.LIST.*", "$JS.API.CONSUMER.INFO.*.*")


def users() -> list[str]:
    """Every NATS user of an instance: one per actor, the supervisor and the command line."""
    return list(GRANTS)


def inbox_prefix(user: str) -> str:
    """Where a user's replies arrive: its own inbox space, so nobody reads another's replies."""
    return f"_INBOX_{user}" if user else "_INBOX"


def scratch_prefix(prefix: str) -> str:
    """The prefix `replay --rerun` provisions and deletes (a fixed name: NATS permissions
    cannot match part of a token)."""
    return f"{prefix}_replay"


def _stream(s: Subjects, short: str) -> str:
    return s.stream(short)


def _bucket(s: Subjects, short: str) -> str:
    return f"{s.p}_{short}"


def _buckets(s: Subjects, grant: Grant, role: str, subs: Iterable[Subscription]) -> set[str]:
    """Buckets a role reads or writes (an actor also writes its health and handled-markers)."""
    names = {_bucket(s, b) for b in grant.kv_read}
    names |= {_bucket(s, w.split(":", 1)[0]) for w in grant.kv_write}
    if role in _actors():
        names.add(s.kv_health)
    if any(sub.dedupe for sub in subs):
        names.add(s.kv_done)
    return names


def _actors() -> tuple[str, ...]:
    return ACTORS


def _admin(s: Subjects, user: str) -> dict[str, Any]:
    return {
        "publish": {"allow": [f"{s.p}.>", "$JS.API.>", "$KV.>", "$JS.ACK.>", "$JS.FC.>"]},
        "subscribe": {"allow": [f"{s.p}.>", f"{inbox_prefix(user)}.>"]},
    }


def _read_bucket(name: str) -> list[str]:
    stream = f"KV_{name}"
    return [f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.STREAM.MSG.GET.{stream}",
            f"$JS.API.DIRECT.GET.{stream}.>"]


def _durable(stream: str, durable: str) -> list[str]:
    return [f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}", f"$JS.ACK.{stream}.{durable}.>"]


def _history(stream: str) -> list[str]:
    # Short-lived pull consumers with generated names (bus/history.py).
    return [f"$JS.API.STREAM.INFO.{stream}", f"$JS.API.CONSUMER.CREATE.{stream}.*",
            f"$JS.API.CONSUMER.CREATE.{stream}.*.>", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.*"]


def _scratch(prefix: str) -> tuple[list[str], list[str]]:
    """Everything on the scratch prefix: its streams, buckets, consumers and subjects."""
    sc = Subjects(scratch_prefix(prefix))
    pub = [f"{sc.p}.>"]
    names = [spec.name for spec in sc.streams()] + [f"KV_{b.name}" for b in sc.buckets()]
    for name in names:
        pub += [f"$JS.API.STREAM.*.{name}", f"$JS.API.STREAM.MSG.GET.{name}",
                f"$JS.API.DIRECT.GET.{name}.>", f"$JS.API.CONSUMER.CREATE.{name}",
                f"$JS.API.CONSUMER.CREATE.{name}.>", f"$JS.API.CONSUMER.*.{name}.*",
                f"$JS.API.CONSUMER.MSG.NEXT.{name}.*", f"$JS.ACK.{name}.>"]
    pub += [f"$KV.{b.name}.>" for b in sc.buckets()]
    return pub, [f"{sc.p}.>"]


def permissions(
    s: Subjects, role: str, subs: Iterable[Subscription] | None = None
) -> dict[str, Any]:
    """The nats-server `permissions` of one role: its routes and durables from the route
    table (`subs`: the durables this configuration runs; all the table's when omitted)."""
    grant = GRANTS[role]
    if grant.admin:
        return _admin(s, role)
    subs = subscriptions(s, role) if subs is None else list(subs)
    pub = [f"{s.p}.{x}" for x in publishes(role)]
    sub = [f"{s.p}.{x}" for x in grant.subscribe] + [f"{inbox_prefix(role)}.>"]
    if role in _actors():
        pub.append(f"$KV.{s.kv_health}.{role}")
    for bucket in sorted(_buckets(s, grant, role, subs)):
        pub += _read_bucket(bucket)
    for write in grant.kv_write:
        short, keys = write.split(":", 1)
        pub.append(f"$KV.{_bucket(s, short)}.{keys}")
    for c in subs:
        pub += _durable(c.stream, c.durable)
        if c.dedupe:
            pub.append(f"$KV.{s.kv_done}.{c.durable}.>")
    for short in grant.history:
        pub += _history(_stream(s, short))
    if grant.inspect:
        pub += INSPECT
    if grant.scratch:
        more_pub, more_sub = _scratch(s.p)
        pub += more_pub
        sub += more_sub
    return {"publish": {"allow": _unique(pub)}, "subscribe": {"allow": _unique(sub)}}


def scope(
    s: Subjects, role: str, subs: Iterable[Subscription]
) -> tuple[list[StreamSpec], list[BucketSpec]]:
    """The streams and buckets a role uses: what it verifies at start-up."""
    subs = list(subs)
    grant = GRANTS.get(role)
    if grant is None or grant.admin:
        return s.streams(), s.buckets()
    streams = {c.stream for c in subs} | {_stream(s, h) for h in grant.history}
    buckets = _buckets(s, grant, role, subs)
    return ([spec for spec in s.streams() if spec.name in streams],
            [b for b in s.buckets() if b.name in buckets])


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
