"""Versions of gated files: a host-side git repository over a few named files of a folder.

The git directory lives in `data/` (out of every sandbox's reach; `data/home.git` for the
home's AGENTS.md and USER.md), the folder is its work tree, and only the named files are ever
added: everything else in the folder (config, .env, the store) is excluded and never read.
Every git call goes through kit/safegit (no inherited environment, hooks and filters off).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.safegit import TIMEOUT_SECS, GitError, git, git_argv, git_env

#: A version as the owner types it: an abbreviated or full commit id, never an option.
VERSION_RE = re.compile(r"[0-9a-f]{4,40}")
TRACK_MESSAGE = "track the files as they were"


@dataclass(frozen=True)
class Version:
    """One commit: its short id, date and message, and which gated files it changed."""

    sha: str
    date: str
    subject: str


class Versions:
    """Commit, list and read back the named files of `root` (git directory `gdir`)."""

    def __init__(self, root: Path, gdir: Path, files: tuple[str, ...]) -> None:
        self.root, self.gdir, self.files = root, gdir, files
        self._ready = False
        self._init = asyncio.Lock()  # a history and an apply may both be first

    async def _git(self, *args: str, check: bool = True) -> tuple[int, str]:
        return await git(self.root, *args, check=check, gdir=self.gdir)

    async def ensure(self) -> None:
        """Create the repository (tracking the files as they are) unless it exists."""
        if self._ready:
            return
        async with self._init:
            if not self._ready:
                await self._create()
                self._ready = True

    async def _create(self) -> None:
        if not (self.gdir / "HEAD").is_file():
            self.gdir.parent.mkdir(parents=True, exist_ok=True)
            await self._git("init", "-q")
        # Nothing but the named files, so no git command ever walks the whole folder (written
        # again when missing: a repository restored from a backup has none).
        exclude = self.gdir / "info" / "exclude"
        rules = "/*\n" + "".join(f"!/{name}\n" for name in self.files)
        if not exclude.is_file() or exclude.read_text() != rules:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text(rules)
        # No commit yet (new, or a crash right after init): track the files as they are.
        if (await self._git("rev-parse", "--verify", "-q", "HEAD", check=False))[0] != 0:
            present = [f for f in self.files if (self.root / f).is_file()]
            if present:
                await self._git("add", "--", *present)
            await self._git("commit", "-q", "--allow-empty", "-m", TRACK_MESSAGE)

    async def commit(self, message: str, *paths: str) -> str:
        """Commit `paths` as they are now; the short id of the commit that holds them (the last
        one that touched them, when there was nothing new: a redelivered apply finds its
        commit)."""
        await self.ensure()
        await self._git("add", "--", *paths)
        code, _ = await self._git("diff", "--cached", "--quiet", "--", *paths, check=False)
        if code != 0:
            await self._git("commit", "-q", "-m", message, "--", *paths)
        return (await self._git("log", "-1", "--format=%h", "--", *paths))[1]

    async def history(self, limit: int = 20) -> list[Version]:
        """The newest changes first (the initial tracking commit included)."""
        await self.ensure()
        _, out = await self._git("log", f"-{limit}", "--date=format:%Y-%m-%d %H:%M",
                                 "--format=%h%x09%ad%x09%s", "--", *self.files)
        rows = [line.split("\t", 2) for line in out.splitlines() if line.count("\t") >= 2]
        return [Version(sha, date, subject) for sha, date, subject in rows]

    async def resolve(self, version: str) -> str:
        """The full commit id of `version` (a gated change), or GitError saying why not."""
        await self.ensure()
        if not VERSION_RE.fullmatch(version):
            raise GitError(f"{version!r} is not a version; use an id from the history")
        code, out = await self._git("rev-parse", "--verify", "-q", f"{version}^{{commit}}",
                                    check=False)
        if code != 0:
            raise GitError(f"there is no version {version}; see the history")
        return out.strip()

    async def changed(self, sha: str) -> list[str]:
        """The gated files a commit changed."""
        _, out = await self._git("diff-tree", "--no-commit-id", "--name-only", "-r", sha)
        return [f for f in out.splitlines() if f in self.files]

    async def is_root(self, sha: str) -> bool:
        code, _ = await self._git("rev-parse", "--verify", "-q", f"{sha}^", check=False)
        return code != 0

    async def text_at(self, sha: str, path: str) -> str:
        """The file's text in that version, byte for byte ("" when it did not exist there)."""
        code, raw = await asyncio.to_thread(self._blob, sha, path)
        return raw if code == 0 else ""

    def _blob(self, sha: str, path: str) -> tuple[int, str]:
        # Not kit.safegit.git: that strips its output, and a file's last newline matters here.
        proc = subprocess.run(git_argv("cat-file", "-p", f"{sha}:{path}"), cwd=self.root,
                              env=git_env(self.root, self.gdir), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=TIMEOUT_SECS, check=False)
        return proc.returncode, proc.stdout.decode(errors="replace")
