"""The scripts/ git repository: commits for tool changes, and undoing the last one.

git runs on the host, as the executor, never inside the sandbox. Because a sandbox can write
scripts/.git, hooks and fsmonitor are switched off for every call, and a repository whose
local config names commands (filters, merge or diff drivers, includes) is not touched.
"""

from __future__ import annotations

import asyncio
import os
import re
import weakref
from pathlib import Path

import msgspec

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Wintermute", "GIT_AUTHOR_EMAIL": "wintermute@localhost",
    "GIT_COMMITTER_NAME": "Wintermute", "GIT_COMMITTER_EMAIL": "wintermute@localhost",
}
SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
        "-c", "commit.gpgsign=false")

#: Local config keys that make git run a command of the repository's choosing.
COMMAND_KEYS = re.compile(r"^(filter|merge|diff|include|includeif)\.", re.IGNORECASE)

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


class GitError(Exception):
    """A git command failed; the message carries git's own words."""


class Reverted(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of undoing the last scripts commit."""

    ok: bool
    text: str
    commit: str = ""
    files: list[str] = msgspec.field(default_factory=list)


async def git(repo: Path, *args: str, check: bool = True) -> tuple[int, str]:
    """Run git in repo; (exit code, stdout + stderr). Raises GitError if check and it failed."""
    env = {**os.environ, **GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0"}
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", *SAFE, *args, cwd=repo, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:  # git missing, or scripts/ gone
        raise GitError(f"git could not run in {repo}: {exc}") from exc
    out, _ = await proc.communicate()
    text = out.decode(errors="replace").strip()
    code = proc.returncode if proc.returncode is not None else -1
    if check and code != 0:
        raise GitError(text or f"git {args[0]} exited with {code}")
    return code, text


async def check_config(repo: Path) -> None:
    """Raise GitError if scripts/.git/config would have git run commands on the host."""
    _, out = await git(repo, "config", "--local", "--name-only", "--list", check=False)
    risky = sorted({k for k in out.splitlines() if COMMAND_KEYS.match(k)})
    if risky:
        raise GitError(
            f"scripts/.git/config sets {', '.join(risky)}, which would make git run commands "
            "on the host; the owner should remove those settings before tools can be saved or "
            "reverted")


async def tracked(repo: Path, path: str) -> bool:
    """Whether path is in the last commit."""
    code, _ = await git(repo, "cat-file", "-e", f"HEAD:{path}", check=False)
    return code == 0


async def commit_paths(repo: Path, paths: list[str], message: str) -> str | None:
    """Commit exactly these paths (other changes stay as they are); the short hash, or None
    when they did not change."""
    await check_config(repo)
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
    async with git_lock():
        code, count = await git(repo, "rev-list", "--count", "HEAD", check=False)
        if code != 0:
            return Reverted(ok=False, text=f"scripts/ is not a usable git repository ({count}).")
        try:
            await check_config(repo)
        except GitError as exc:
            return Reverted(ok=False, text=f"Not reverted: {exc}.")
        if int(count or 0) <= 1:
            return Reverted(ok=False, text="Nothing to revert: scripts/ has only its initial "
                                           "commit.")
        staged, _ = await git(repo, "diff", "--cached", "--quiet", check=False)
        if staged != 0:
            return Reverted(ok=False, text="scripts/ has staged changes that are not committed; "
                                           "commit or unstage them first, then revert.")
        _, head = await git(repo, "rev-parse", "HEAD")
        if expect_head and not head.startswith(expect_head.lower()):
            return Reverted(ok=False, text=(
                f"Not reverted: the last commit in scripts/ is now {head[:8]}, not "
                f"{expect_head[:8]}; something changed since the revert was asked for."))
        _, subject = await git(repo, "log", "-1", "--format=%s")
        _, files = await git(repo, "diff", "--name-only", "HEAD~1", "HEAD")
        code, out = await git(repo, "revert", "--no-commit", "HEAD", check=False)
        if code != 0:
            await git(repo, "revert", "--abort", check=False)
            return Reverted(ok=False, text=(
                f"Could not revert “{subject}”: {out.splitlines()[-1] if out else 'git failed'}. "
                "Commit or discard the uncommitted changes in scripts/ and try again."))
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
