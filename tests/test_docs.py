"""The README stays true: it names every stream, bucket and consumer, and CI runs its test command."""

from __future__ import annotations

from pathlib import Path

from bus.subjects import Subjects
from contracts.routes import DURABLES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_lists_every_stream_and_bucket() -> None:
    s = Subjects("wm")
    for spec in s.streams():
        assert f"`{spec.name}`" in README
    for bucket in s.buckets():
        assert f"`{bucket.name}`" in README


def test_readme_lists_every_durable_consumer() -> None:
    for d in DURABLES:
        assert f"`{d.name}`" in README, d.name


def test_ci_runs_the_readme_test_command() -> None:
    block = README.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line for line in block.splitlines() if line and not line.startswith(("#", "sh"))]
    test_command = commands[1]
    assert "pytest" in test_command
    assert test_command in (ROOT / ".ci" / "run").read_text()
