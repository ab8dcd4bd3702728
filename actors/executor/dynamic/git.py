"""The scripts/ git repository: commits for tool changes, and undoing the last one.

git runs on the host, as the executor, never inside the sandbox, through kit.safegit: the git
directory is data/scripts.git (out of the sandbox's reach) and git gets a minimal environment
with hooks, fsmonitor, external diff and textconv off, so nothing the sandbox writes in scripts/
is read as configuration or code.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path

import msgspec

from kit.safegit import GitError, ensure_repo, git

__all__ = ["GitError", "Reverted", "commit_paths", "ensure_repo", "git", "git_lock",
           "revert_last", "tracked"]

_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def git_lock() -> asyncio.Lock:
    """One git operation at a time (create_tool, revert, dependency commits) per event loop."""
    loop = asyncio.get_running_loop()
    lock = _locks.get(loop)
    if lock is None:
        lock = _locks[loop] = asyncio.Lock()
    return lock


class Reverted(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of undoing the last scripts commit."""

    ok: bool
    text: str
    commit: str = ""
    files: list[str] = msgspec.field(default_factory=list)


async def tracked(repo: Path, path: str) -> bool:
    """Whether path is in the last commit."""
    code, _ = await git(repo, "cat-file", "-e", f"HEAD:{path}", check=False)
    return code == 0


async def commit_paths(repo: Path, paths: list[str], message: str) -> str | None:
    """Commit exactly these paths (other changes stay as they are); the short hash, or None
    when they did not change."""
    await git(repo, "add", "--", *paths)
    code, _ = await git(repo, "diff", "--cached", "--quiet", "--", *paths, check=False)
    if code == 0:
        return None
    await git(repo, "commit", "-q", "-m", message, "--", *paths)
    return (await git(repo, "rev-parse", "--short", "HEAD"))[1]


async def revert_last(repo: Path, expect_head: str = "") -> Reverted:
    """Undo the last commit with a new commit (history is kept, so the undo can be undone).

    With expect_head, nothing is done unless the last commit is still that one.
    """
    where = f"{repo.name}/"  # scripts/ or skills/
    async with git_lock():
        code, count = await git(repo, "rev-list", "--count", "HEAD", check=False)
        if code != 0:
            return Reverted(ok=False, text=f"{where} is not a usable git repository ({count}).")
        if int(count or 0) <= 1:
            return Reverted(ok=False, text=f"Nothing to revert: {where} has only its initial "
                                           "commit.")
        staged, _ = await git(repo, "diff", "--cached", "--quiet", check=False)
        if staged != 0:
            return Reverted(ok=False, text=f"{where} has staged changes that are not committed; "
                                           "commit or unstage them first, then revert.")
        _, head = await git(repo, "rev-parse", "HEAD")
        if expect_head and not head.startswith(expect_head.lower()):
            return Reverted(ok=False, text=(
                f"Not reverted: the last commit in {where} is now {head[:8]}, not "
                f"{expect_head[:8]}; something changed since the revert was asked for."))
        _, subject = await git(repo, "log", "-1", "--format=%s")
        _, files = await git(repo, "diff", "--no-ext-diff", "--no-textconv", "--name-only",
                             "HEAD~1", "HEAD")
        code, out = await git(repo, "revert", "--no-commit", "HEAD", check=False)
        if code != 0:
            await git(repo, "revert", "--abort", check=False)
            return Reverted(ok=False, text=(
                f"Could not revert “{subject}”: {out.splitlines()[-1] if out else 'git failed'}. "
                f"Commit or discard the uncommitted changes in {where} and try again."))
        try:
            await git(repo, "commit", "-q", "-m", f"revert: {subject}",
                      "-m", f"This reverts commit {head}.")
        except GitError as exc:
            await git(repo, "revert", "--abort", check=False)
            return Reverted(ok=False, text=f"Could not commit the revert of “{subject}”: {exc}.")
        _, short = await git(repo, "rev-parse", "--short", "HEAD")
        changed = [f for f in files.splitlines() if f]
        what = ", ".join(changed) or "no files"
        if subject.startswith("revert: "):  # undoing an undo puts the change back
            text = (f"Undid “{subject}” (new commit {short}): “{subject[8:]}” is back "
                    f"({what}).")
        else:
            text = (f"Reverted “{subject}” (new commit {short}); {what} restored to the "
                    "version before it.")
        return Reverted(ok=True, commit=short, files=changed, text=text)
