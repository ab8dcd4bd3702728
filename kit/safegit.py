"""Host-side git for scripts/, which the sandbox can write: nothing it writes is read as config.

The repository's git directory lives at `data/scripts.git`, outside every sandbox mount, and
scripts/ is only its work tree. Every git call gets an explicit minimal environment (no system
or global config, an empty HOME, a short PATH, none of the process's keys or tokens) and
switches off hooks, fsmonitor, external diff and textconv, so neither a planted
`scripts/.git` nor `.gitattributes` nor anything in the caller's environment can make the host
run a program. A `scripts/.git` left by an older version (which the sandbox could have written)
is moved aside once and its files re-imported, never its config.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Wintermute", "GIT_AUTHOR_EMAIL": "wintermute@localhost",
    "GIT_COMMITTER_NAME": "Wintermute", "GIT_COMMITTER_EMAIL": "wintermute@localhost",
}
#: Settings that would run programs; forced off whatever any config says.
SAFE_ARGS = (
    "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
    "-c", "core.attributesFile=/dev/null", "-c", "commit.gpgsign=false",
    "-c", "tag.gpgsign=false", "-c", "core.pager=cat",
    "-c", "core.sshCommand=false", "-c", "protocol.allow=never",
)
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
INIT_MESSAGE = "init scripts repository"
TIMEOUT_SECS = 30.0

class GitError(Exception):
    """A git command failed; the message carries git's own words."""


def git_dir(work_tree: Path) -> Path:
    """Where the git directory of WINTERMUTE_HOME/<folder> lives: WINTERMUTE_HOME/data/<folder>.git
    (scripts/ -> data/scripts.git, skills/ -> data/skills.git)."""
    work_tree = work_tree.resolve()
    return work_tree.parent / "data" / f"{work_tree.name}.git"


def _empty_home(gdir: Path) -> str:
    """data/git-home, an empty folder for HOME, so no ~/.gitconfig or ~/.config/git is read
    (next to the git directory: out of the sandbox's reach, one per installation)."""
    home = gdir.parent / "git-home"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(home)


def git_env(work_tree: Path, gdir: Path | None = None) -> dict[str, str]:
    """The whole environment git gets: nothing inherited from the process. `gdir` overrides
    `git_dir(work_tree)` (the home's prompt files: data/home.git, the home being the tree)."""
    gdir = gdir or git_dir(work_tree)
    return {
        **GIT_IDENTITY,
        "GIT_DIR": str(gdir), "GIT_WORK_TREE": str(work_tree.resolve()),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_OPTIONAL_LOCKS": "0",
        "HOME": _empty_home(gdir), "PATH": SAFE_PATH, "LC_ALL": "C",
    }


def git_argv(*args: str) -> list[str]:
    """The git command line with the safety switches in front of args."""
    return [shutil.which("git", path=SAFE_PATH) or "git", *SAFE_ARGS, *args]


def _result(args: tuple[str, ...], code: int, out: bytes, check: bool) -> tuple[int, str]:
    text = out.decode(errors="replace").strip()
    if check and code != 0:
        raise GitError(text or f"git {args[0]} exited with {code}")
    return code, text


def run_git(work_tree: Path, *args: str, check: bool = True,
            gdir: Path | None = None) -> tuple[int, str]:
    """Run git synchronously; (exit code, stdout + stderr). GitError if check and it failed."""
    try:
        proc = subprocess.run(
            git_argv(*args), cwd=work_tree, env=git_env(work_tree, gdir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_SECS, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git could not run in {work_tree}: {exc}") from exc
    return _result(args, proc.returncode, proc.stdout, check)


async def git(work_tree: Path, *args: str, check: bool = True,
              timeout: float = TIMEOUT_SECS,  # noqa: ASYNC109
              gdir: Path | None = None) -> tuple[int, str]:
    """Run git without blocking the loop; (exit code, stdout + stderr)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *git_argv(*args), cwd=work_tree, env=git_env(work_tree, gdir),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:  # git missing, or scripts/ gone
        raise GitError(f"git could not run in {work_tree}: {exc}") from exc
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise GitError(f"git {args[0]} did not finish within {timeout:g}s") from exc
    return _result(args, proc.returncode if proc.returncode is not None else -1, out, check)


def has_repo(work_tree: Path) -> bool:
    """Whether the host-side git directory exists."""
    return (git_dir(work_tree) / "HEAD").is_file()


def ensure_repo(work_tree: Path) -> list[str]:
    """Create data/scripts.git (importing an old scripts/.git's files, not its config) unless it
    exists; returns what was done, for `wintermute init`'s report."""
    if has_repo(work_tree):
        return []
    work_tree.mkdir(parents=True, exist_ok=True)
    gdir = git_dir(work_tree)
    gdir.parent.mkdir(parents=True, exist_ok=True)
    done: list[str] = []
    old = work_tree / ".git"
    if os.path.lexists(old):
        # Written where the sandbox could reach it: its hooks, config and attributes are not
        # trusted, so it is kept for the owner to look at but never opened by git again.
        aside = gdir.parent / f"scripts.git.untrusted-{time.strftime('%Y%m%d%H%M%S')}"
        shutil.move(str(old), str(aside))
        done.append(f"moved scripts/.git to {aside.relative_to(gdir.parent.parent)}")
    elif not any(work_tree.iterdir()):
        (work_tree / "README.md").write_text(
            "Agent-created tools live here, one commit a change.\n")
    run_git(work_tree, "init", "-q")
    run_git(work_tree, "add", "-A")
    message = (INIT_MESSAGE.replace("scripts", work_tree.name) if not done else
               "import scripts/ (the old scripts/.git was moved aside unread)")
    run_git(work_tree, "commit", "-q", "--allow-empty", "-m", message)
    done.append("data/scripts.git")
    return done


def clone_bundle(work_tree: Path, bundle: Path) -> None:
    """Restore scripts/ and data/scripts.git from a bundle of our own (`wintermute restore`);
    both must not exist yet. GitError if git fails."""
    gdir = git_dir(work_tree)
    env = {k: v for k, v in git_env(work_tree).items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
    try:
        proc = subprocess.run(
            git_argv("-c", "protocol.file.allow=always",  # reading the bundle, nothing else
                     "clone", "-q", f"--separate-git-dir={gdir}", str(bundle), str(work_tree)),
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=TIMEOUT_SECS * 4, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git clone of {bundle} could not run: {exc}") from exc
    _result(("clone",), proc.returncode, proc.stdout, True)
    # clone leaves a `gitdir:` file in scripts/; the host never reads scripts/.git, so drop it
    with contextlib.suppress(FileNotFoundError):
        (work_tree / ".git").unlink()
    run_git(work_tree, "remote", "remove", "origin", check=False)  # the bundle was temporary
