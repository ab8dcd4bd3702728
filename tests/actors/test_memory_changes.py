"""The change log behind `/memory undo` (actors/memory/_changes.py): batches by cause, within
scopes, and an undo that ran once is recognised when it is delivered again."""

from __future__ import annotations

from pathlib import Path

from actors.memory._changes import ChangeLog


def test_the_newest_batch_of_an_audience_is_undone_once(tmp_path: Path) -> None:
    log = ChangeLog(tmp_path)
    log.add("save:1", "m1", "user:owner", "", "active")
    log.add("learn:2", "m2", "user:owner", "", "active")
    log.add("learn:2", "m1", "user:owner", "active", "archived")  # m2 superseded m1
    log.add("learn:2", "m1", "user:owner", "active", "archived")  # a redelivery: no new row
    log.add("save:3", "f1", "user:friend", "", "active")

    batch = log.last(["user:owner"])
    assert [(c.cause, c.memory_id, c.after) for c in batch] == [
        ("learn:2", "m1", "archived"), ("learn:2", "m2", "active")]  # newest first
    assert log.undo_done("undo:9") == ""
    log.mark_undone("undo:9", batch)
    assert log.undo_done("undo:9") == "learn:2"  # the same undo again reverts nothing more
    assert [c.cause for c in log.last(["user:owner"])] == ["save:1"]
    assert [c.cause for c in log.last(["user:friend"])] == ["save:3"]
    assert [c.cause for c in log.last(None)] == ["save:3"]  # the owner's CLI: every scope


def test_a_pass_marker_is_seen_and_never_undone(tmp_path: Path) -> None:
    log = ChangeLog(tmp_path)
    log.add("dream:1", "m1", "user:owner", "active", "archived")
    log.add("dream:1", "", "", "", "dreamed", "dreaming")
    assert log.seen("dream:1") and not log.seen("dream:2")
    assert [c.memory_id for c in log.last(None)] == ["m1"]
