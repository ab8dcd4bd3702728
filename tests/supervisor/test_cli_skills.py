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


async def test_skills_say_which_model_a_loaded_skill_switches_to(home: Path) -> None:
    for name, role in (("translate", "translator"), ("odd", "nobody")):
        (home / "skills" / name).mkdir()
        (home / "skills" / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: d\nmodel_role: {role}\n---\nbody\n")
    env = {"WM__MODELS__ROLES": '{"translator": "openai/small"}',
           "WM__MODELS__SKILLS": '{"meeting-notes": "openai/notes"}'}
    text = render_skills(await gather_skills(load_settings(home, env)))
    assert "translate: once loaded, model openai/small (model_role translator)" in text
    assert "meeting-notes: once loaded, model openai/notes (models.skills)" in text
    assert "odd: model_role nobody is not in [models.roles]" in text
    assert "word-count: once" not in text
