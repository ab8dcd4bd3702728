"""Undoing a version of gated files, and the history the owner picks versions from."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kit.safegit import GitError

if TYPE_CHECKING:
    from actors.executor.gate.core import WriteGate


async def history(gate: WriteGate, limit: int = 20) -> str:
    """The versions, newest first, one a line."""
    versions = await gate.versions.history(limit)
    if len(versions) <= 1:
        return f"No changes to {' or '.join(gate.files)} yet."
    lines = [f"{v.sha}  {v.date}  {v.subject}" for v in versions]
    return (f"Versions of {', '.join(gate.files)}, newest first (`/memory revert ID` or "
            "`wintermute memory revert ID` undoes one):\n" + "\n".join(lines))


async def revert(gate: WriteGate, version: str, by: str) -> tuple[bool, str, str]:
    """Undo `version` (empty: the newest); (ok, a sentence, the new commit). A file changed
    again since that version is not touched: the newer versions are reverted first."""
    v = gate.versions
    async with gate.lock:
        try:
            if not version:
                newest = await v.history(2)
                if len(newest) < 2:
                    return False, f"Nothing to revert: {' and '.join(gate.files)} never changed.", ""
                version = newest[0].sha
            sha = await v.resolve(version)
            short = sha[:7]
            if await v.is_root(sha):
                return False, (f"Version {short} is where the history starts; there is nothing "
                               "before it to go back to."), ""
            files = await v.changed(sha)
            plan: list[tuple[str, str]] = []
            for path in files:
                after = await v.text_at(sha, path)
                if gate.read(path) != after:
                    return False, (f"{path} changed after version {short}; revert the newer "
                                   "versions first, newest first (see the history)."), ""
                plan.append((path, await v.text_at(f"{sha}^", path)))
            if not plan:
                return False, f"Version {short} changed none of {', '.join(gate.files)}.", ""
            subject = (await v.history(50))
            title = next((h.subject for h in subject if sha.startswith(h.sha)), short)
            for path, before in plan:
                await asyncio.to_thread(gate.write, path, before)
            commit = await v.commit(f"revert {short}: {title}", *[p for p, _ in plan])
        except (OSError, GitError) as exc:
            return False, f"Could not revert {version}: {exc}.", ""
    names = ", ".join(p for p, _ in plan)
    await gate.host.audit_decision(
        "gate.reverted", "allowed", f"{by} reverted version {short} of {names}.",
        about=f"{gate.session_prefix}revert:{commit}", refs={"version": short, "commit": commit,
                                                             "paths": names})
    return True, (f"Reverted version {short} ({title}) of {names}: now version {commit}; "
                  f"`/memory revert {commit}` undoes the revert."), commit
