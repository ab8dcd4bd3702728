"""Least privilege on the bus: what each NATS user may publish and subscribe, from one table.

`GRANTS` says, per role, what it publishes, which core subjects it subscribes to and which KV
keys it reads and writes, relative to the instance prefix. Durable consumers are not listed
here: they come from each actor's `subscriptions()`, so a new consumer is granted by declaring
it. `permissions()` turns a grant plus its durables into the `permissions` block of a
nats-server user; the embedded server's config and (later) the Helm chart render from it.

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
from bus.subjects import BucketSpec, StreamSpec, Subjects

#: The channels whose inbound subjects the channel actor publishes (its adapters).
CHANNELS = ("terminal", "telegram", "slack")

#: Roles that are not actors: the supervisor (admin) and the owner's command line.
SUPERVISOR = "supervisor"
CLI = "cli"


@dataclass(frozen=True)
class Grant:
    """What one role does on the bus besides pulling from its durables (prefix-relative)."""

    publish: tuple[str, ...] = ()  # subjects after "<prefix>.", e.g. "cmd.executor.run", "out.>"
    subscribe: tuple[str, ...] = ()  # core subscriptions after "<prefix>."
    kv_read: tuple[str, ...] = ()  # buckets by short name ("state"): get and list keys
    kv_write: tuple[str, ...] = ()  # "bucket:keys", e.g. "state:telegram.>" (implies reading)
    history: tuple[str, ...] = ()  # streams ("in", "cmd", ...) read with short-lived consumers
    scratch: bool = False  # administers the scratch prefix of `replay --rerun`
    admin: bool = False  # provisions streams, buckets and consumers: everything


GRANTS: dict[str, Grant] = {
    "channel": Grant(
        publish=(*(f"in.{c}.>" for c in CHANNELS), "out.>", "evt.channel.delivered.>",
                 "cmd.approval.request", "cmd.approval.decide", "cmd.planner.reset",
                 "cmd.executor.revert", "evt.flatline.release.>"),
        kv_read=("state", "budget", "tools"),
        kv_write=("done:sent.>", "done:tgsent.>", "done:tgpreview.>", "done:slack.>",
                  "state:telegram.>", "state:flatline.tool.>", "tools:>"),
    ),
    "planner": Grant(
        publish=("cmd.memory.recall", "cmd.llm.complete", "cmd.executor.run", "out.>",
                 "evt.task.outcome.>"),
        kv_read=("state", "budget"),
        kv_write=("sessions:>",),
    ),
    "llm": Grant(
        publish=("evt.llm.response.>", "evt.llm.preview.>", "evt.tool.result.>"),
        kv_write=("budget:day.>", "budget:session.>"),
    ),
    "executor": Grant(
        publish=("cmd.approval.request", "cmd.llm.complete", "cmd.memory.save",
                 "cmd.memory.search", "evt.tool.result.>", "evt.tool.outcome.>",
                 "evt.scripts.reverted.>", "out.>"),
        kv_read=("state", "tools"),
        kv_write=("state:executor", "state:tools", "state:tools.>", "state:trust.>",
                  "state:image.>", "done:exec.>", "done:revert.>"),
    ),
    "memory": Grant(
        publish=("evt.memory.recalled.>", "evt.tool.result.>"),
        kv_write=("state:memory",),
    ),
    "approval": Grant(
        publish=("out.>", "evt.approval.resolved.>"),
        kv_write=("approvals:>",),
    ),
    "observer": Grant(publish=("evt.session.idle.>",)),
    "heartbeat": Grant(publish=("in.schedule.>", "out.>"), kv_read=("health", "state", "budget"),
                       kv_write=("state:sched.>", "state:schedule")),
    CLI: Grant(
        # chat, approve/deny, revert, tools release, tasks enable; tap and chat read wm.>
        publish=("cmd.channel.terminal", "cmd.executor.revert", "evt.flatline.release.>",
                 "evt.flatline.enable_task.>", "in.schedule.>"),
        subscribe=(">",),
        kv_read=("state", "tools"),
        kv_write=("tools:>", "state:flatline.tool.>", "state:task.>"),
        history=("in", "out", "cmd", "evt", "dlq"),
        scratch=True,
    ),
    SUPERVISOR: Grant(admin=True),
}


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
    return {"in": s.stream_in, "out": s.stream_out, "cmd": s.stream_cmd, "evt": s.stream_evt,
            "dlq": s.stream_dlq}[short]


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


def _actors() -> list[str]:
    return [r for r in GRANTS if r not in (SUPERVISOR, CLI)]


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


def permissions(s: Subjects, role: str, subs: Iterable[Subscription] = ()) -> dict[str, Any]:
    """The nats-server `permissions` of one role, given the durables it pulls from."""
    grant = GRANTS[role]
    if grant.admin:
        return _admin(s, role)
    subs = list(subs)
    pub = [f"{s.p}.{x}" for x in grant.publish]
    sub = [f"{s.p}.{x}" for x in grant.subscribe] + [f"{inbox_prefix(role)}.>"]
    if role in _actors():
        pub += [s.dlq(role), f"$KV.{s.kv_health}.{role}"]
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
