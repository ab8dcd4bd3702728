"""The approval actor: pending approvals with short ids, expiry, single use, owner only."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import Literal

import msgspec

from actors.base import Actor
from bus import tracing
from contracts import (
    ApprovalDecision,
    ApprovalPrompt,
    ApprovalRequest,
    ApprovalResolved,
    Notice,
    Sink,
)
from contracts.records import PendingApproval as Pending

log = logging.getLogger(__name__)

ApprovalInbox = ApprovalRequest | ApprovalDecision
EXPIRY_SECS = 300.0
#: How a pending approval ends (each is also its audit outcome).
Resolution = Literal["approved", "denied", "expired"]
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def short_id(seed: str) -> str:
    """An 8-character base62 id, derived from the request id so redelivery reuses it."""
    n = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big")
    out = []
    for _ in range(8):
        n, r = divmod(n, 62)
        out.append(ALPHABET[r])
    return "".join(out)


def _refs(req: ApprovalRequest, approval_id: str) -> dict[str, str]:
    refs = {"approval_id": approval_id, "request": req.id}
    if req.call is not None:
        refs["tool"] = req.call.name
    return refs


class ApprovalActor(Actor):
    name = "approval"
    inbox = ApprovalInbox

    async def on_start(self) -> None:
        self.bucket = self.subjects.kv_approvals
        self.spawn(self._expire_loop(), "expiry")

    async def handle(self, msg: ApprovalInbox) -> None:
        match msg:
            case ApprovalRequest():
                await self._on_request(msg)
            case ApprovalDecision():
                await self._on_decision(msg)

    def _owner_sink(self, msg: ApprovalRequest) -> Sink:
        return msg.sink or Sink.parse(self.config.owner.sink)

    async def _on_request(self, msg: ApprovalRequest) -> None:
        aid = short_id(msg.id)
        pending = Pending(approval_id=aid, request=msg, expires_at=time.time() + EXPIRY_SECS)
        if not await self.bus.kv_create(self.bucket, aid, pending):
            log.info("approval %s already recorded", aid)
        sink = self._owner_sink(msg)
        prompt = ApprovalPrompt(
            id=f"{msg.id}:prompt", approval_id=aid, sink=sink,
            summary=f"{msg.summary}\nWhy: {msg.reason}", expires_at=pending.expires_at,
        )
        await self.send(prompt)
        await self.audit_decision("approval.asked", "asked", msg.reason, about=msg.id,
                         session=msg.session, refs=_refs(msg, aid))

    async def _on_decision(self, msg: ApprovalDecision) -> None:
        owner = msg.is_owner and msg.principal in self.config.owner.principals
        try:
            pending, revision = await self.bus.kv_get_rev(self.bucket, msg.approval_id, Pending)
        except Exception:  # noqa: BLE001 - an id NATS refuses as a key is unknown too
            pending, revision = None, 0
        if pending is None:
            await self._tell(f"Approval {msg.approval_id} is unknown, already used or expired.",
                             msg.id, msg.reply_to)
            return
        if not owner:
            log.warning("approval %s answered by non-owner %s", msg.approval_id, msg.principal)
            await self.audit_decision("approval.decided", "refused",
                             "An answer from someone other than the owner was ignored.",
                             about=msg.id, principal=msg.principal,
                             session=pending.request.session,
                             refs=_refs(pending.request, msg.approval_id))
            await self._tell(
                f"Approval {msg.approval_id}: an answer from {msg.principal} was ignored; only "
                "the owner can decide.", msg.id, msg.reply_to,
            )
            return
        if pending.status != "pending" or pending.expires_at < time.time():
            await self._tell(f"Approval {msg.approval_id} has expired or was already used.", msg.id,
                             msg.reply_to)
            return
        status: Resolution = "approved" if msg.approved else "denied"
        await self._resolve(pending, status, revision, msg.principal)

    async def _resolve(self, pending: Pending, status: Resolution, revision: int,
                       decider: str = "") -> None:
        """Single use: the compare-and-set on the KV revision lets only one answer win."""
        decided = msgspec.structs.replace(pending, status=status)
        if not await self.bus.kv_swap(self.bucket, pending.approval_id, decided, revision):
            log.info("approval %s was decided concurrently", pending.approval_id)
            return
        req = pending.request
        resolved = ApprovalResolved(
            id=f"{req.id}:resolved", approval_id=pending.approval_id, session=req.session,
            status=status, call=req.call, sink=req.call.reply_to if req.call else req.sink,
        )
        # The continuation belongs to the turn that asked (its trace), linked to the decision.
        with tracing.resume(req.traceparent, "approval resolved", **{
                "wintermute.approval_id": pending.approval_id, "wintermute.outcome": status}):
            await self.send(resolved)
        why = (f"The owner {status} it." if decider
               else f"Nobody answered within {EXPIRY_SECS:.0f} seconds.")
        await self.audit_decision("approval.decided", status, why, about=resolved.id, principal=decider,
                         session=req.session, refs=_refs(req, pending.approval_id))
        await self.bus.kv_delete(self.bucket, pending.approval_id)

    async def _tell(self, text: str, ref: str, sink: Sink | None = None) -> None:
        """Why a decision did not happen, to whoever decided (else the owner sink)."""
        sink = sink or Sink.parse(self.config.owner.sink)
        await self.send(Notice(id=f"{ref}:notice", sink=sink, text=text, source="approval"))

    async def _expire_loop(self) -> None:
        while True:
            self.alive("expiry", every=5)
            try:
                for key in await self.bus.kv_keys(self.bucket):
                    # Resolved and deleted keys are listed until they age out: None here.
                    pending, revision = await self.bus.kv_get_rev(self.bucket, key, Pending)
                    if pending is None:
                        continue
                    if pending.status == "pending" and pending.expires_at < time.time():
                        await self._resolve(pending, "expired", revision)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - NATS restarting: the next sweep retries
                log.warning("expiry sweep failed: %s", exc)
            await asyncio.sleep(5)
