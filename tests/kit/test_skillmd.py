"""SKILL.md parsing: what a good one gives, and a clear sentence for each kind of bad one."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.skillmd import SkillError, parse, scan

GOOD = """---
name: demo
description: Does the demo thing.
when_to_use: When asked for a demo.
tools: [run_skill_script, execute_command]
model_role: coder
limits:
  timeout_secs: 5
  memory_mb: 64
---
# Demo
Step one.
"""


def test_a_good_skill_md() -> None:
    skill = parse(GOOD, "demo")
    assert skill.name == "demo" and skill.description == "Does the demo thing."
    assert skill.tools == ["run_skill_script", "execute_command"] and skill.model_role == "coder"
    assert skill.limits.timeout_secs == 5 and skill.limits.memory_mb == 64
    assert skill.limits.network == "none" and skill.body.startswith("# Demo")


@pytest.mark.parametrize(("text", "folder", "says"), [
    ("# no front matter", "demo", "must start with a `---` line"),
    ("---\nname: demo\n", "demo", "not closed"),
    ("---\nname: [demo\n---\nbody", "demo", "not valid YAML (line 2)"),
    ("---\ndescription: x\n---\nbody", "demo", "`name` is missing"),
    ("---\nname: Demo!\ndescription: x\n---\nbody", "Demo!", "lowercase letters"),
    ("---\nname: other\ndescription: x\n---\nbody", "demo", "the folder is 'demo'"),
    ("---\nname: demo\n---\nbody", "demo", "`description` is missing"),
    ("---\nname: demo\ndescription: x\n---\n", "demo", "body after the front matter is empty"),
    ("---\nname: demo\ndescription: x\nlimits: {network: host}\n---\nb", "demo", "`limits`"),
    ("---\nname: demo\ndescription: x\nlimits: {timeout_secs: 0}\n---\nb", "demo", "between 1"),
    ("---\nname: demo\ndescription: x\ncolour: red\n---\nb", "demo", "unknown front matter"),
    ("---\nname: 123\ndescription: x\n---\nb", "demo", "`name` must be text"),
    ("---\nname: demo\ndescription: x\nlimits: 5\n---\nb", "demo", "`limits`"),
    ("---\n- a list\n---\nb", "demo", "must be `key: value` lines"),
    ("---\nname: demo\ndescription: x\ntools: {a: 1}\n---\nb", "demo", "list of tool names"),
])
def test_bad_skill_md_is_a_sentence(text: str, folder: str, says: str) -> None:
    with pytest.raises(SkillError) as err:
        parse(text, folder)
    assert says in str(err.value), str(err.value)


def test_scan_keeps_the_good_and_reports_the_bad(tmp_path: Path) -> None:
    (tmp_path / "demo" / "scripts").mkdir(parents=True)
    (tmp_path / "demo" / "SKILL.md").write_text(GOOD)
    (tmp_path / "demo" / "scripts" / "run.py").write_text("print(1)\n")
    (tmp_path / "demo" / "notes.md").write_text("x")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("---\nname: broken\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "binary").mkdir()
    (tmp_path / "binary" / "SKILL.md").write_bytes(b"\xff\xfe\x00garbage")
    skills, problems = scan(tmp_path)
    assert [s.name for s in skills] == ["demo"]
    assert "SKILL.md cannot be read" in problems.pop("binary")
    assert skills[0].scripts == ["scripts/run.py"] and skills[0].files == ["notes.md"]
    assert set(problems) == {"broken", "empty"} and "SKILL.md is missing" in problems["empty"]


def test_examples_are_shipped_once_and_a_deleted_one_stays_deleted(tmp_path: Path) -> None:
    from kit.skillmd import ship_examples

    root = tmp_path / "skills"
    assert ship_examples(root) == ["meeting-notes", "word-count"]
    skills, problems = scan(root)
    assert [s.name for s in skills] == ["meeting-notes", "word-count"] and not problems
    assert skills[1].scripts == ["scripts/count.py"]
    (root / "meeting-notes" / "SKILL.md").unlink()
    (root / "meeting-notes").rmdir()
    assert ship_examples(root) == [] and not (root / "meeting-notes").exists()
