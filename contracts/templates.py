"""Task templates (seed 003 §4.5): the capability ceiling a turn runs under.

A turn's template is chosen by the planner from the turn's principal and principal kind, both
set at the edge (never from model output): it bounds which tools the turn may call, which
sinks it may write to, the highest label its tools may read, and whether the turn runs as
plan-then-execute (the planning model never sees the raw message). The executor derives the
same template from the same fields and checks every call's capability token against it, so
neither a steered model nor a planner bug can widen a turn's reach.

Shipped defaults (`DEFAULTS`) cover every principal kind; `[privacy.templates.<name>]` in
config.toml replaces one of them by name or adds another (matched before the defaults).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

import msgspec

from contracts.labels import Label

#: What "reply" in a template's `sinks` stands for: the turn's own reply sink.
REPLY = "reply"
KINDS = ("owner", "paired", "third_party", "webhook", "cron", "event")


class Template(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One task template: who it serves and what a turn under it may reach."""

    # For plan-then-execute turns, what the planning model is told instead of the message.
    description: str = ""
    kinds: list[str] = msgspec.field(default_factory=list)  # principal kinds it serves
    # Principals it serves (glob patterns such as "webhook:github", "telegram:*"); a template
    # matching the principal wins over one matching only its kind.
    principals: list[str] = msgspec.field(default_factory=list)
    tools: list[str] = msgspec.field(default_factory=list)  # allowed tool name patterns
    denied_tools: list[str] = msgspec.field(default_factory=list)  # never, whatever `tools` says
    # Where its data may be written: "reply" (the turn's own chat) or "channel:chat" patterns.
    sinks: list[str] = msgspec.field(default_factory=lambda: [REPLY])
    data_ceiling: Label = "internal"  # no read up: tool results above it are withheld
    max_tool_calls: int = 0  # 0: budget.max_tool_calls_per_turn
    plan_then_execute: bool = False
    # Seed 003 §11.1's opt-in: the owner lets this template's `sensitive` data go to cloud
    # models (audited per call); regulated and secret data never leave the machine.
    owner_acknowledged_cloud_risk: bool = False

    def allows_tool(self, name: str) -> bool:
        """Whether a call of tool `name` is within this template."""
        if any(fnmatch.fnmatchcase(name, p) for p in self.denied_tools):
            return False
        return any(fnmatch.fnmatchcase(name, p) for p in self.tools)

    def allows_sink(self, sink: str, reply_to: str) -> bool:
        """Whether data may be written to `sink` ("channel:chat[:thread]") in a turn replying
        to `reply_to`."""
        for pattern in self.sinks:
            if pattern == REPLY:
                if reply_to and sink == reply_to:
                    return True
            elif fnmatch.fnmatchcase(sink, pattern):
                return True
        return False


DEFAULTS: dict[str, Template] = {
    "owner_chat": Template(
        description="The owner's own conversation.", kinds=["owner"], tools=["*"],
        sinks=["*"], data_ceiling="secret"),
    "scheduled": Template(
        description="A scheduled task of the owner's, replying to its configured sink.",
        kinds=["cron"], tools=["*"], sinks=["*"], data_ceiling="secret"),
    "paired_dm": Template(
        description="A person the owner paired with writes in a direct conversation.",
        kinds=["paired"], tools=["memory_search", "memory_save", "web_fetch"],
        data_ceiling="internal"),
    "third_party_dm": Template(
        description=(
            "Someone other than the owner wrote in a direct conversation. Decide which of the "
            "offered tools, if any, would help answer them; the owner's private data and the "
            "owner's tools are not available here."),
        kinds=["third_party"], tools=["memory_search"], data_ceiling="internal",
        plan_then_execute=True),
    "webhook": Template(
        description=(
            "An external service delivered an event through a webhook; its content is "
            "untrusted. Decide which of the offered tools, if any, are needed to report it."),
        kinds=["webhook"], tools=["memory_search"], data_ceiling="internal",
        plan_then_execute=True),
}


#: What a turn no template serves runs under: nothing but its own reply.
LOCKED = Template(description="A message from someone no task template serves.", tools=[],
                  data_ceiling="public", plan_then_execute=True)


def get(name: str, configured: Mapping[str, Template]) -> Template:
    """The template called `name` ("" or unknown: LOCKED, which allows no tool)."""
    return merged(configured).get(name, LOCKED)


def merged(configured: Mapping[str, Template]) -> dict[str, Template]:
    """Configured templates first (they are matched first), then the defaults they leave."""
    return {**configured, **{k: v for k, v in DEFAULTS.items() if k not in configured}}


def choose(principal: str, kind: str, is_owner: bool,
           configured: Mapping[str, Template]) -> str:
    """The template a turn of `principal` (of `kind`) runs under: the first matching its
    principal, else the first serving its kind. A kind of "" (a producer older than the
    field) counts as owner for the owner's turns, third_party otherwise."""
    every = merged(configured)
    for name, template in every.items():
        if any(fnmatch.fnmatchcase(principal, p) for p in template.principals):
            return name
    kind = kind or ("owner" if is_owner else "third_party")
    for name, template in every.items():
        if kind in template.kinds:
            return name
    return ""


def check(name: str, template: Template) -> str:
    """A sentence naming what is wrong with a configured template, or ""."""
    where = f"privacy.templates.{name}"
    bad = [k for k in template.kinds if k not in KINDS]
    if bad:
        return f"'{where}.kinds': {bad[0]!r} is not a principal kind; use " + ", ".join(KINDS)
    if not template.kinds and not template.principals:
        return f"'{where}': say whom it serves with kinds = [...] or principals = [...]"
    if template.max_tool_calls < 0:
        return f"'{where}.max_tool_calls': must be 0 (the budget's limit) or more"
    for sink in template.sinks:
        if sink != REPLY and ":" not in sink and sink != "*":
            return f"'{where}.sinks': {sink!r} is neither \"reply\" nor 'channel:chat'"
    return ""
