"""`wintermute skills [--json]`: the skills in WINTERMUTE_HOME/skills with their use counts.

While `up` runs, the list is what the executor published (wm_state `tools.skills`: skills,
counts, folders it could not read). Without a running instance the folder is read here with
the same parser, so a malformed SKILL.md is reported either way; counts need the executor.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from contracts.config import Settings
from contracts.records import SkillRow, SkillsReport
from kit import skillmd
from supervisor.cli.client import connect
from supervisor.process.up import running_instance

REPORT_KEY = "tools.skills"


def _offline(settings: Settings) -> dict[str, Any]:
    skills, problems = skillmd.scan(settings.home / "skills")
    rows = [SkillRow(name=s.name, description=s.description, when_to_use=s.when_to_use,
                     tools=s.tools, model_role=s.model_role, scripts=s.scripts,
                     limits=msgspec.to_builtins(s.limits)) for s in skills]
    report = SkillsReport(skills=rows, problems=problems)
    out: dict[str, Any] = msgspec.to_builtins(report)
    out["source"] = "files (wintermute is not running: no use counts)"
    return out


def model_notes(settings: Settings, rows: list[dict[str, Any]]) -> list[str]:
    """Which model each skill switches its turn to once loaded (as actors/planner/_skills.py
    decides), and a model_role that [models.roles] does not configure."""
    models, notes = settings.config.models, []
    for r in rows:
        name, role = r["name"], r.get("model_role") or ""
        if name in models.skills:
            notes.append(f"{name}: once loaded, model {models.skills[name]} (models.skills)")
        elif role and role in models.roles:
            notes.append(f"{name}: once loaded, model {models.roles[role]} (model_role {role})")
        elif role:
            notes.append(f"{name}: model_role {role} is not in [models.roles] of config.toml; "
                         "add it there, or the turn keeps its model")
    return notes


async def gather_skills(settings: Settings) -> dict[str, Any]:
    """{"skills": [...], "problems": {folder: why}, "sandbox": ..., "source": ...,
    "models": [notes]}."""
    data = await _gather(settings)
    data["models"] = model_notes(settings, data.get("skills", []))
    return data


async def _gather(settings: Settings) -> dict[str, Any]:
    if running_instance(settings.home) is None and not settings.config.nats.url:
        return _offline(settings)
    bus = await connect(settings, "skills")
    try:
        report = await bus.kv_get_as(bus.subjects.kv_state, REPORT_KEY, SkillsReport)
    finally:
        await bus.close()
    if report is None:
        out = _offline(settings)
        out["source"] = "files (the executor has not reported its skills yet: no use counts)"
        return out
    data: dict[str, Any] = msgspec.to_builtins(report)
    data["source"] = "executor"
    return data


def render_skills(data: dict[str, Any]) -> str:
    """A table (name, loads, runs, failures, last use, description) and the problems."""
    table = [("NAME", "LOADS", "RUNS", "FAILED", "LAST USED", "DESCRIPTION")]
    notes = []
    for r in data.get("skills", []):
        last = r.get("last_used") or 0
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last)) if last else ""
        table.append((r["name"], str(r.get("loads", 0)), str(r.get("runs", 0)),
                      str(r.get("failures", 0)), when, r.get("description", "")[:70]))
        if not r.get("available", True):
            notes.append(f"{r['name']}: unavailable: {r.get('problem', '')}")
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in table]
    if not data.get("skills"):
        lines = ["No skills in skills/."]
    for folder, why in sorted((data.get("problems") or {}).items()):
        notes.append(skillmd.problem_line(folder, why))
    notes += data.get("models") or []
    if data.get("sandbox"):
        notes.append(f"scripts: {data['sandbox']}")
    notes.append(f"source: {data.get('source', '')}")
    return "\n".join(lines + [""] + notes)
