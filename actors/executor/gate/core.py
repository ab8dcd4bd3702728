"""The WriteGate: a change to a gated file is proposed, reviewed as a diff, applied only after
the owner approves it (the approval actor's prompt and buttons) or by policy, committed as a
version, and revertible.

`propose(pid, path, text, reason, by, is_owner)` records a `GateProposal` (wm_state
`gate.<gate>.<pid>`) and, by the file's policy, applies it (`auto`, and only for the owner or
the owner's own background jobs), asks the owner (`suggest`, or `auto` for anyone else) or
refuses it (`off`). `resolved(ApprovalResolved)` applies or drops it on the owner's answer;
`revert(version)` undoes one version. Each step is idempotent by the proposal id (a redelivery
after a crash finds the file already written and its commit), and each is an audit event.
Generic over the folder and its files: the home's AGENTS.md/USER.md are one gate (home.py);
agent-written skills can be another.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from actors.executor.gate.versions import Versions
from contracts import ApprovalRequest, ApprovalResolved, Msg, Notice, Sink
from contracts.audit import AuditOutcome
from contracts.records import GateProposal
from kit.safegit import GitError

if TYPE_CHECKING:
    from bus import Bus

log = logging.getLogger(__name__)

PID_RE = re.compile(r"[0-9a-f]{8}")  # a proposal id (derived: short_hash of its cause)
MAX_CHARS = 12_000  # what the planner reads of a prompt file (actors/planner/context.py)
DIFF_CHARS = 1_500  # of the diff shown in the approval prompt


class GateHost(Protocol):
    """What the gate needs from its actor: the bus, config, publishing and the audit log."""

    bus: Bus
    config: Any

    async def send(self, msg: Msg) -> bool: ...

    async def audit_decision(self, decision: str, outcome: AuditOutcome, reason: str, *,
                             about: str, principal: str = "", session: str = "",
                             refs: dict[str, str] | None = None) -> None: ...


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def diff(path: str, old: str, new: str) -> str:
    """The unified diff the owner reviews."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}")
    return "".join(lines) or "(no change)"


class WriteGate:
    """Proposals, approvals, versions and reverts for the `files` of `root`."""

    def __init__(self, host: GateHost, name: str, root: Path, gdir: Path, files: tuple[str, ...],
                 policy_of: Callable[[str], tuple[str, str]]) -> None:
        """`policy_of(path)` gives the file's policy (auto | suggest | off) and its config key."""
        self.host, self.name, self.root, self.files = host, name, root, files
        self.policy_of = policy_of
        self.versions = Versions(root, gdir, files)
        self.session_prefix = f"gate:{name}:"
        self.lock = asyncio.Lock()  # one writer: proposals, applies and reverts in turn

    # -- reading ---------------------------------------------------------------------------

    def read(self, path: str) -> str:
        try:
            return (self.root / path).read_text()
        except FileNotFoundError:
            return ""

    def _key(self, pid: str) -> str:
        return f"gate.{self.name}.{pid}"

    async def get(self, pid: str) -> GateProposal | None:
        bucket = self.host.bus.subjects.kv_state
        return await self.host.bus.kv_get_as(bucket, self._key(pid), GateProposal)

    async def _put(self, p: GateProposal) -> None:
        await self.host.bus.kv_put(self.host.bus.subjects.kv_state, self._key(p.id), p)

    async def pending(self) -> list[GateProposal]:
        bucket = self.host.bus.subjects.kv_state
        out = []
        for key in await self.host.bus.kv_keys(bucket):
            if key.startswith(f"gate.{self.name}."):
                p = await self.host.bus.kv_get_as(bucket, key, GateProposal)
                if p is not None and p.status == "pending":
                    out.append(p)
        return sorted(out, key=lambda p: p.created)

    # -- proposing -------------------------------------------------------------------------

    def check(self, path: str, text: str) -> str:
        """Why this change cannot be proposed ("" when it can)."""
        if path not in self.files:
            return f"{path!r} is not one of the files this gate writes ({', '.join(self.files)})"
        if not text.strip():
            return f"the new text of {path} is empty"
        if "\0" in text:
            return f"the new text of {path} holds a NUL character"
        if len(text) > MAX_CHARS:
            return f"the new text of {path} has {len(text)} characters; at most {MAX_CHARS}"
        return ""

    async def propose(self, pid: str, path: str, text: str, *, reason: str, by: str,
                      is_owner: bool, session: str = "") -> GateProposal:
        """Record the change and apply, ask or refuse it by policy. `pid` is 8 hex characters
        derived from what caused the change (a redelivery finds it). ValueError if malformed."""
        if not PID_RE.fullmatch(pid):
            raise ValueError(f"{pid!r} is not a change id (8 hex characters)")
        if why := self.check(path, text):
            raise ValueError(why)
        async with self.lock:
            current = self.read(path)
            policy, key = self.policy_of(path)
            p = await self.get(pid)
            if p is not None and p.status != "pending":
                return p  # redelivered: decided already
            if p is None:
                p = GateProposal(id=pid, path=path, text=text, base=digest(current),
                                 reason=reason[:300], by=by, created=time.time())
                if policy == "off":
                    p = msgspec.structs.replace(
                        p, status="refused", why=f"changes to {path} are off ({key} = \"off\")")
                    await self._put(p)
                    await self._audit(p, "proposed", "refused", p.why, session)
                    return p
                await self._put(p)
            # Still pending (new, or redelivered after a crash): apply or ask again; the
            # approval request's id is the same, so the owner is asked once.
            if policy == "auto" and is_owner:
                return await self._apply(p, by=f"policy ({key} = \"auto\")", session=session)
        await self._ask(p, current, key if policy == "suggest" else
                        f"{key} = \"auto\" applies only the owner's changes", session)
        return p

    async def _ask(self, p: GateProposal, current: str, why: str, session: str) -> None:
        change = diff(p.path, current, p.text)
        if len(change) > DIFF_CHARS:
            change = change[:DIFF_CHARS] + "\n… (the rest of the diff is cut)"
        request = ApprovalRequest(
            id=f"{self.session_prefix}{p.id}:approve", session=f"{self.session_prefix}{p.id}",
            summary=f"Change {p.path} ({p.reason or 'no reason given'}; by {p.by}; "
                    f"change {p.id})?\n{change}",
            reason=why, sink=Sink.parse(self.host.config.owner.sink),
        )
        await self.host.send(request)
        await self._audit(p, "proposed", "asked", f"{p.by} proposed a change to {p.path}: "
                          f"{p.reason or 'no reason given'}", session)

    # -- deciding --------------------------------------------------------------------------

    def ours(self, msg: ApprovalResolved) -> bool:
        return msg.call is None and msg.session.startswith(self.session_prefix)

    async def resolved(self, msg: ApprovalResolved) -> None:
        """The owner's answer: approved applies, denied drops; expired leaves it pending (the
        owner can still apply it: `/memory apply ID`)."""
        pid = msg.session.removeprefix(self.session_prefix)
        p = await self.get(pid) if PID_RE.fullmatch(pid) else None
        if p is None or p.status != "pending" or msg.status == "expired":
            return
        if msg.status == "approved":
            async with self.lock:
                await self._apply(p, by="the owner (approval)")
        else:
            await self.decide(p.id, approve=False, by="the owner (approval)")

    async def decide(self, pid: str, *, approve: bool, by: str) -> tuple[bool, str]:
        """Apply or drop a pending change on the owner's command; (ok, a sentence)."""
        async with self.lock:
            p = await self.get(pid) if PID_RE.fullmatch(pid) else None
            if p is None:
                return False, f"There is no proposed change {pid!r}; see the waiting changes."
            if p.status != "pending":
                return False, f"Change {pid} is already {p.status}."
            if approve:
                p = await self._apply(p, by=by)
                return p.status == "applied", self.describe(p)
            p = msgspec.structs.replace(p, status="denied")
            await self._put(p)
            await self._audit(p, "denied", "denied", f"{by} denied the change to {p.path}.")
            return True, f"Dropped change {pid} to {p.path}."

    async def _apply(self, p: GateProposal, *, by: str, session: str = "") -> GateProposal:
        """Write and commit (under the lock). The file changed since the proposal: refused."""
        current = self.read(p.path)
        try:
            if current != p.text:
                if digest(current) != p.base:
                    why = (f"{p.path} changed after change {p.id} was proposed, so it was not "
                           "applied; propose it again against the file as it is now")
                    p = msgspec.structs.replace(p, status="refused", why=why)
                    await self._put(p)
                    await self._audit(p, "applied", "refused", why, session)
                    await self._tell(p, self.describe(p))
                    return p
                # An edit made outside the gate becomes a version of its own: revertible too.
                await self.versions.commit(f"{p.path}: edited outside the gate", p.path)
                await asyncio.to_thread(self.write, p.path, p.text)
            commit = await self.versions.commit(
                f"{p.path}: {p.reason or 'change'} (change {p.id}, by {p.by})", p.path)
        except (OSError, GitError) as exc:
            # Left pending: a later approval or `/memory apply` tries again.
            log.warning("change %s to %s not applied: %s", p.id, p.path, exc)
            await self._tell(p, f"Change {p.id} to {p.path} could not be applied ({exc}); it "
                                f"is still pending: `/memory apply {p.id}` tries again.")
            return p
        p = msgspec.structs.replace(p, status="applied", commit=commit)
        await self._put(p)
        await self._audit(p, "applied", "approved" if "owner" in by else "allowed",
                          f"Applied to {p.path} as version {commit} ({by}).", session)
        await self._tell(p, self.describe(p) + f"\n{diff(p.path, current, p.text)[:DIFF_CHARS]}")
        return p

    def write(self, path: str, text: str) -> None:
        """Atomically: a temporary file in the same folder, then a rename."""
        target = self.root / path
        tmp = target.with_name(f".{target.name}.gate-tmp")
        tmp.write_text(text)
        os.replace(tmp, target)

    def describe(self, p: GateProposal) -> str:
        """One sentence about a proposal's state."""
        if p.status == "applied":
            return (f"Applied change {p.id} to {p.path} as version {p.commit}; "
                    f"`/memory revert {p.commit}` undoes it.")
        if p.status == "refused":
            return f"Change {p.id} to {p.path} was refused: {p.why}."
        if p.status == "denied":
            return f"Change {p.id} to {p.path} was denied by the owner."
        return f"Change {p.id} to {p.path} waits for the owner's approval."

    async def _tell(self, p: GateProposal, text: str) -> None:
        sink = Sink.parse(self.host.config.owner.sink)
        await self.host.send(Notice(id=f"{self.session_prefix}{p.id}:{p.status}:notice",
                                    sink=sink, text=text, source="executor"))

    async def _audit(self, p: GateProposal, step: str, outcome: AuditOutcome, reason: str,
                     session: str = "") -> None:
        await self.host.audit_decision(
            f"gate.{step}", outcome, reason, about=f"{self.session_prefix}{p.id}",
            session=session, refs={"change": p.id, "path": p.path, "by": p.by,
                                   **({"commit": p.commit} if p.commit else {})})
