"""Slack events into the bus: who may speak, which session, commands, the credential guard.

Every handler publishes to JetStream before it returns; the app runs with
`process_before_response`, so Slack's envelope (or HTTP request) is acknowledged only after
that. A handler that raises leaves the envelope unacknowledged and Slack delivers it again;
the deterministic ids below make the repeat a no-op.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from actors.channel.commands import CommandContext, handle_command
from bus import StoreFull
from contracts import ApprovalDecision, Notice, Sink, TurnRequest, short_hash, taint
from kit.redact import credential_guard

log = logging.getLogger(__name__)

IGNORED_SUBTYPES = {None, "file_share", "thread_broadcast"}  # everything else is not a message
REFUSE_USER = ("Sorry, I only talk to people my owner has allowed. If you should have access, "
               "ask them to add your Slack user id ({user}) to channels.slack.allowed_users.")
REFUSE_CHANNEL = ("I'm not enabled in this channel. My owner can add its id ({channel}) to "
                  "channels.slack.allowed_channels.")
NOT_OWNER = "Only the owner can approve or deny."


class Inbound:
    """Turns Slack events, button clicks and slash commands into bus messages."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.actor = adapter.actor
        self.bus = adapter.bus
        self.subjects = adapter.subjects
        self.cfg = adapter.config.channels.slack
        self.owners = set(adapter.config.owner.principals)

    # --- who ----------------------------------------------------------------------------------

    def user_allowed(self, principal: str, user: str) -> bool:
        allowed = set(self.cfg.allowed_users)
        return principal in self.owners or user in allowed or principal in allowed

    def channel_allowed(self, channel: str) -> bool:
        allowed = set(self.cfg.allowed_channels)
        return "*" in allowed or channel in allowed

    async def _mark(self, key: str) -> bool:
        """Set a marker in wm_done; False if it was already there."""
        if await self.bus.kv_get(self.subjects.kv_done, key) is not None:
            return False
        await self.bus.kv_put(self.subjects.kv_done, key, b"1")
        return True

    async def _notice(self, sink: Sink, text: str, nid: str) -> None:
        notice = Notice(id=nid, sink=sink, text=text, source="slack")
        await self.bus.send(notice)

    async def _refuse(self, who: str, sink: Sink, text: str, about: str) -> None:
        """At most one short refusal per stranger (or channel) and nothing else of theirs."""
        await self.actor.audit_decision("sender.denied", "refused", text, about=about, principal=who,
                               refs={"chat": sink.chat})
        if await self._mark(f"slack.refused.{short_hash(who, 32)}"):
            await self._notice(sink, text, f"{who}:refusal")
        log.info("refused slack input from %s", who)

    # --- messages -----------------------------------------------------------------------------

    async def on_message(self, body: dict[str, Any], event: dict[str, Any], bot_user: str) -> None:
        """A direct message (message.im): the sender's own context."""
        if event.get("channel_type") != "im" or not self._from_person(event):
            return  # channel messages are answered only when the app is mentioned
        await self._on_text(body, event, bot_user, group=False)

    async def on_mention(self, body: dict[str, Any], event: dict[str, Any], bot_user: str) -> None:
        """An @mention in a channel: that channel's group context, answered in the thread."""
        if not self._from_person(event):
            return
        await self._on_text(body, event, bot_user, group=True)

    @staticmethod
    def _from_person(event: dict[str, Any]) -> bool:
        return (event.get("subtype") in IGNORED_SUBTYPES and not event.get("bot_id")
                and bool(event.get("user")))

    async def _on_text(self, body: dict[str, Any], event: dict[str, Any], bot_user: str,
                       group: bool) -> None:
        team = body.get("team_id") or event.get("team") or "T"
        user, channel, ts = event["user"], event["channel"], event["ts"]
        input_id = f"slack:{team}:{channel}:{ts}"  # one message, however many events name it
        done = f"slack.in.{short_hash(input_id, 32)}"
        if await self.bus.kv_get(self.subjects.kv_done, done) is not None:
            log.info("slack message %s already handled; a retry is ignored", input_id)
            return
        principal = f"slack:{team}:{user}"
        if group:
            thread = event.get("thread_ts") or ts
            sink = Sink(channel="slack", chat=channel, thread=thread)
            session = (f"slack:{team}:{channel}:{thread}" if self.cfg.thread_sessions
                       else f"slack:{team}:{channel}")
        else:
            sink = Sink(channel="slack", chat=channel, thread=event.get("thread_ts", ""))
            session = principal
        if group and not self.channel_allowed(channel):
            await self._refuse(f"slack:{team}:channel:{channel}", sink,
                               REFUSE_CHANNEL.format(channel=channel), input_id)
        elif not self.user_allowed(principal, user):
            await self._refuse(principal, sink, REFUSE_USER.format(user=user), input_id)
        else:
            await self._accept(input_id, principal, session, sink, group,
                               self._text(event, bot_user))
        await self.bus.kv_put(self.subjects.kv_done, done, b"1")

    @staticmethod
    def _text(event: dict[str, Any], bot_user: str) -> str:
        text = event.get("text") or ""
        if bot_user:
            text = re.sub(rf"<@{re.escape(bot_user)}(\|[^>]*)?>", " ", text)
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
        files = event.get("files") or []
        if files:
            names = ", ".join(str(f.get("name", "file")) for f in files)
            text += f"\n[The user attached {len(files)} file(s) ({names}); the Slack channel does " \
                    "not download attachments yet.]"
        return text.strip()

    async def _accept(self, input_id: str, principal: str, session: str, sink: Sink, group: bool,
                      text: str) -> None:
        is_owner = principal in self.owners
        ctx = CommandContext(principal, is_owner, session, input_id, reply_to=sink)
        answer = await handle_command(self.actor, ctx, text)
        if answer is not None:
            await self._notice(sink, answer, f"{input_id}:command")
            return
        guard = credential_guard(text)
        if guard.action == "block":
            await self._notice(sink, guard.text, f"{input_id}:guard")
            return
        if guard.action == "redact":
            log.warning("redacted %s in slack message %s", ", ".join(guard.found), input_id)
        body = guard.text
        if group:  # several people share a thread; the model needs to know who speaks
            body = f"[{principal.rsplit(':', 1)[-1]}] {body}"
        limited = self.actor.rate.check(principal, is_owner)
        if limited is not None:
            if limited:
                await self._notice(sink, limited, f"{input_id}:slow-down")
            return
        turn = TurnRequest(id=input_id, session=session, principal=principal, text=body,
                           reply_to=sink, is_owner=is_owner,
                           principal_kind="owner" if is_owner else "third_party",
                           taint=taint.CLEAN if is_owner else taint.RAW)
        try:
            await self.bus.send(turn)
        except StoreFull:  # tell them without the store; Slack redelivers the unacked envelope
            await self.actor.store_full(sink)
            raise

    # --- buttons and slash commands ---------------------------------------------------------

    async def on_approval_click(self, body: dict[str, Any], action: dict[str, Any]) -> bool:
        """An Approve/Deny button; True when the click came from the owner."""
        user = body["user"]["id"]
        team = (body.get("team") or {}).get("id") or body["user"].get("team_id") or "T"
        principal = f"slack:{team}:{user}"
        is_owner = principal in self.owners
        if not self.user_allowed(principal, user):
            log.warning("approval click from unknown slack user %s ignored", principal)
            return False
        channel = (body.get("channel") or {}).get("id", "")
        thread = str((body.get("message") or {}).get("thread_ts", "") or "")
        decision = ApprovalDecision(
            id=f"slack:{team}:{channel}:{action.get('action_ts', '')}:{user}:decision",
            approval_id=str(action.get("value", "")), approved=action["action_id"] == "wm_approve",
            principal=principal, is_owner=is_owner,
            reply_to=Sink(channel="slack", chat=channel, thread=thread) if channel else None,
        )
        await self.bus.send(decision)
        return is_owner

    async def on_slash(self, body: dict[str, Any]) -> str:
        """`/wintermute <command>`: the answer, shown only to the person who typed it."""
        team, user, channel = body.get("team_id", "T"), body["user_id"], body["channel_id"]
        principal = f"slack:{team}:{user}"
        if not self.user_allowed(principal, user):
            await self.actor.audit_decision("sender.denied", "refused", REFUSE_USER.format(user=user),
                                   about=f"slack:{team}:slash:{body.get('trigger_id', '')}",
                                   principal=principal, refs={"chat": channel})
            first = await self._mark(f"slack.refused.{short_hash(principal, 32)}")
            return REFUSE_USER.format(user=user) if first else ""
        session = principal if channel.startswith("D") else f"slack:{team}:{channel}"
        words = (body.get("text") or "").strip().lstrip("/")
        ctx = CommandContext(principal, principal in self.owners, session,
                             f"slack:{team}:slash:{body.get('trigger_id', '')}",
                             reply_to=Sink(channel="slack", chat=channel))
        answer = await handle_command(self.actor, ctx, "/" + (words or "help"))
        return answer or "I don't know that command. " + (
            await handle_command(self.actor, ctx, "/help") or "")
