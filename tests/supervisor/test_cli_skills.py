"""`wintermute skills` without a running instance: the folder read with the same parser."""

from __future__ import annotations

from pathlib import Path

from contracts.config import load_settings
from supervisor.cli.skills import gather_skills, render_skills


async def test_skills_offline_lists_shipped_examples_and_reports_a_bad_skill_md(
    home: Path,
) -> None:
    (home / "skills" / "bad").mkdir()
    (home / "skills" / "bad" / "SKILL.md").write_text("---\nname: bad\ndescription: x\n")
    data = await gather_skills(load_settings(home, {}))
    assert {r["name"] for r in data["skills"]} == {"word-count", "meeting-notes"}
    assert "not running" in data["source"]
    text = render_skills(data)
    assert "skills/bad/SKILL.md cannot be used: the front matter is not closed" in text
