"""Link-safe host-side file writes into folders the sandbox can write (workspace/, scripts/).

Code in the sandbox can plant symbolic links there at any moment. A host-side write that
follows one overwrites whatever the link names (config.toml, .env). So every such write walks
from the shared folder one component at a time with O_NOFOLLOW, refuses a link anywhere on
the way, creates its temporary file with O_EXCL in the final folder (held open as a directory
fd), checks the opened file is the one in the folder, and renames it into place within that
folder: a link at the target is replaced, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

_LINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)  # what O_NOFOLLOW / O_DIRECTORY refuse with
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(ValueError):
    """A path that cannot be written safely; the message is a sentence saying why."""


def relative_parts(rel: str | PurePosixPath) -> list[str]:
    """The components of a path relative to a shared folder; UnsafePath for '..', absolute
    paths or empty names."""
    text = str(rel)
    if not text or text.startswith(("/", "~")):
        raise UnsafePath(f"{text!r} must be a path relative to the folder, like 'downloads/x'.")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise UnsafePath(f"{text!r} must stay inside the folder (no '..').")
    return parts


def _open_root(root: Path) -> int:
    # The shared folder itself is the host's choice (the owner may link it elsewhere) and a
    # mount point inside the sandbox, which cannot replace it: only what is below is walked.
    try:
        return os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        raise UnsafePath(f"{root} is not a plain folder ({exc.strerror}).") from exc


def open_dir(root: Path, parts: list[str], *, create: bool) -> int:
    """A directory fd for root/parts, never following a link; missing folders are created
    when create is set. The caller closes the fd."""
    fd = _open_root(root)
    try:
        for i, part in enumerate(parts):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in _LINK_ERRORS:
                    raise
                where = "/".join(parts[: i + 1])
                raise UnsafePath(
                    f"{where} is a symbolic link or not a folder, and files are never written "
                    "through links; remove it or choose another path.") from exc
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def atomic_writer(root: Path, rel: str | PurePosixPath, mode: int = 0o644) -> Iterator[BinaryIO]:
    """Write root/rel as a new file: a temporary file in the same folder, renamed into place
    when the block ends without an error (removed otherwise). UnsafePath if any component of
    the folder is a link or the target is a folder."""
    *folders, name = relative_parts(rel)
    dfd = open_dir(root, folders, create=True)
    tmp = f".{name[:64]}.{secrets.token_hex(6)}.part"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dfd)
        try:
            _same_file(fd, tmp, dfd)
            with os.fdopen(fd, "wb", closefd=False) as fh:
                yield fh
                fh.flush()
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        try:
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except IsADirectoryError as exc:
            raise UnsafePath(f"{rel} is a folder; choose a file name.") from exc
        tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        os.close(dfd)


def _same_file(fd: int, name: str, dfd: int) -> None:
    """The file we opened is the regular file now at that name (nothing swapped in between)."""
    opened = os.fstat(fd)
    there = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            there.st_dev, there.st_ino):
        raise UnsafePath(f"{name} changed while it was being created; nothing was written.")


def write_bytes(root: Path, rel: str | PurePosixPath, data: bytes, mode: int = 0o644) -> Path:
    """Replace root/rel with data, link-safely and atomically; returns the path written."""
    with atomic_writer(root, rel, mode) as fh:
        fh.write(data)
    return root.joinpath(*relative_parts(rel))


def make_dirs(root: Path, rel: str | PurePosixPath) -> Path:
    """Create root/rel (and parents) without following links; returns the path."""
    parts = relative_parts(rel)
    os.close(open_dir(root, parts, create=True))
    return root.joinpath(*parts)


def read_bytes(root: Path, rel: str | PurePosixPath, limit: int = -1) -> bytes:
    """Read root/rel without following a link anywhere on the way (UnsafePath if one is)."""
    *folders, name = relative_parts(rel)
    dfd = open_dir(root, folders, create=False)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            if exc.errno not in _LINK_ERRORS:
                raise
            raise UnsafePath(f"{rel} is a symbolic link; links are not read.") from exc
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise UnsafePath(f"{rel} is not a regular file.")
        return fh.read(limit)
