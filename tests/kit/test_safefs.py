"""Link-safe writes into shared folders (kit/safefs.py): planted links are never followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit import safefs


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, Path]:
    """(a shared folder, a precious file outside it that a link points at)."""
    root = tmp_path / "workspace"
    root.mkdir()
    precious = tmp_path / "config.toml"
    precious.write_text("[owner]\nprincipals = ['terminal:owner']\n")
    return root, precious


def test_writes_new_files_and_folders_atomically(shared: tuple[Path, Path]) -> None:
    root, _ = shared
    path = safefs.write_bytes(root, "dl/sub/x.bin", b"data", 0o640)
    assert path == root / "dl" / "sub" / "x.bin" and path.read_bytes() == b"data"
    assert path.stat().st_mode & 0o777 == 0o640
    safefs.write_bytes(root, "dl/sub/x.bin", b"new")
    assert path.read_bytes() == b"new" and os.listdir(root / "dl" / "sub") == ["x.bin"]


def test_a_failed_write_leaves_nothing(shared: tuple[Path, Path]) -> None:
    root, _ = shared
    with pytest.raises(RuntimeError), safefs.atomic_writer(root, "half.txt") as fh:
        fh.write(b"partial")
        raise RuntimeError("download broke")
    assert os.listdir(root) == []


def test_a_link_at_the_target_is_replaced_not_followed(shared: tuple[Path, Path]) -> None:
    root, precious = shared
    before = precious.read_text()
    (root / "out.txt").symlink_to(precious)
    safefs.write_bytes(root, "out.txt", b"attacker bytes")
    assert precious.read_text() == before
    assert not (root / "out.txt").is_symlink() and (root / "out.txt").read_bytes() == b"attacker bytes"


def test_a_linked_folder_on_the_way_is_refused(shared: tuple[Path, Path]) -> None:
    root, precious = shared
    (root / "inbox").symlink_to(precious.parent)  # a link to a folder outside
    with pytest.raises(safefs.UnsafePath, match="symbolic link"):
        safefs.write_bytes(root, "inbox/config.toml", b"owner = stranger")
    with pytest.raises(safefs.UnsafePath):
        safefs.make_dirs(root, "inbox/more")
    with pytest.raises(safefs.UnsafePath):
        safefs.read_bytes(root, "inbox/config.toml")
    assert "stranger" not in precious.read_text()
    assert sorted(os.listdir(precious.parent)) == ["config.toml", "workspace"]


def test_dotdot_absolute_and_folder_targets_are_refused(shared: tuple[Path, Path]) -> None:
    root, _ = shared
    for bad in ("../config.toml", "/etc/passwd", "", "a/../../x", "~/x"):
        with pytest.raises(safefs.UnsafePath):
            safefs.write_bytes(root, bad, b"x")
    (root / "d").mkdir()
    with pytest.raises(safefs.UnsafePath, match="is a folder"):
        safefs.write_bytes(root, "d", b"x")
    assert os.listdir(root / "d") == []


def test_reads_refuse_a_linked_file(shared: tuple[Path, Path]) -> None:
    root, precious = shared
    (root / "secret.txt").symlink_to(precious)
    with pytest.raises(safefs.UnsafePath):
        safefs.read_bytes(root, "secret.txt")
    safefs.write_bytes(root, "ok.txt", b"fine")
    assert safefs.read_bytes(root, "ok.txt") == b"fine"


def test_the_shared_folder_itself_may_be_a_link_the_owner_made(tmp_path: Path) -> None:
    real = tmp_path / "big-disk" / "workspace"
    real.mkdir(parents=True)
    (tmp_path / "workspace").symlink_to(real)
    safefs.write_bytes(tmp_path / "workspace", "x.txt", b"ok")
    assert (real / "x.txt").read_bytes() == b"ok"
