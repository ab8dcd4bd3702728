"""setup.sh and requirements.txt: the sandbox's dependencies, versioned in scripts/.

The agent installs what it needs with execute_command and records it in these two files so
a fresh sandbox can be rebuilt. The executor commits them whenever they change (so /revert and
the supervisor can undo a bad dependency). The Docker sandbox runs them in every fresh
container; in direct mode and under bubblewrap they are only a record: running them would
install packages on the owner's machine without asking.
"""

from __future__ import annotations

import logging
from pathlib import Path

from actors.executor.dynamic.git import GitError, commit_paths, git_lock

log = logging.getLogger(__name__)

PERSISTED = {"setup.sh": "update system setup", "requirements.txt": "update dependencies"}


def signature(scripts: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime, size) of the persistence files that exist."""
    out = []
    for name in PERSISTED:
        try:
            st = (scripts / name).stat()
        except OSError:
            continue
        out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


async def commit_dependencies(scripts: Path) -> list[str]:
    """Commit setup.sh / requirements.txt if they differ from the last commit; their names."""
    committed = []
    async with git_lock():
        for name, message in PERSISTED.items():
            if not (scripts / name).is_file():
                continue
            try:
                if await commit_paths(scripts, [name], f"{message}: {name}"):
                    committed.append(name)
            except GitError as exc:
                log.warning("could not commit %s: %s", name, exc)
    return committed

