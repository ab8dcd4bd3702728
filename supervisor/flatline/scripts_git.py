"""Read-only questions to the scripts/ git repository: when did a tool's files last change?

The executor owns scripts/ and makes every change; the supervisor only reads the log of
data/scripts.git through kit.safegit (minimal environment, no hooks, no config from scripts/),
since the sandbox can write everything in scripts/.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kit.safegit import GitError, git, has_repo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Commit:
    """The last commit that touched a tool's files."""

    sha: str
    ts: float
    subject: str
    is_head: bool  # it is the repository's last commit, so "revert the last commit" undoes it


async def _git(repo: Path, *args: str) -> str | None:
    try:
        code, out = await git(repo, *args, check=False, timeout=10)
    except GitError as exc:
        log.debug("git %s failed: %s", args[0], exc)
        return None
    return out if code == 0 else None


async def head(repo: Path) -> str | None:
    """The full sha of HEAD, or None without a usable repository."""
    if not has_repo(repo):
        return None
    return await _git(repo, "rev-parse", "HEAD")


async def last_commit(repo: Path, tool: str) -> Commit | None:
    """The last commit touching scripts/<tool>.py or <tool>.json; None for core tools."""
    if not has_repo(repo):
        return None
    out = await _git(repo, "log", "-1", "--format=%H%x09%ct%x09%s", "--",
                     f"{tool}.py", f"{tool}.json")
    if not out:
        return None
    sha, ts, subject = (out.split("\t", 2) + ["", ""])[:3]
    return Commit(sha=sha, ts=float(ts or 0), subject=subject, is_head=sha == await head(repo))
