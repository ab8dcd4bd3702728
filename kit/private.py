"""Files that hold conversations or credentials: 0600, in folders only their owner may enter."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any


def private_dir(path: Path) -> Path:
    """Make a folder (and its missing parents) 0700; an existing one is narrowed to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def open_private(path: Path, mode: str = "a") -> IO[Any]:
    """Open a file for appending or writing ("a", "ab", "w", "wb"), created 0600; an existing
    one is narrowed to 0600 (it may come from a version that made it readable by others)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
    flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC
    fd = os.open(path, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, text: str) -> None:
    """Replace a file atomically with `text`, readable only by its owner."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open_private(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
