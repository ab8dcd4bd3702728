"""SKILL.md: a skill's front matter (name, description, when to use, tools, model role, limits)
and body, parsed and checked without touching the bus, for the executor and `wintermute skills`.

A skill is a folder `skills/<name>/` holding SKILL.md and optional `scripts/`, `references/`
and other files (the Agent Skills layout). The front matter is YAML between `---` lines.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Literal

import msgspec

MAX_SKILL_MD = 64_000  # a body is meant to fit in one tool result (seed 002: < 5000 tokens)
MAX_DESCRIPTION = 200
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
SCRIPT_DIR = "scripts"
MAX_TIMEOUT_SECS = 600
EXAMPLES = Path(__file__).parent / "skill_examples"  # shipped skills, copied into skills/
SHIPPED_MARKER = ".shipped"  # names of examples already copied (a deleted one stays deleted)
FIELDS = {"name", "description", "when_to_use", "tools", "model_role", "limits", "license",
          "metadata", "allowed-tools", "when-to-use"}


class SkillError(Exception):
    """A SKILL.md that cannot be used; the message says what to fix."""


class SkillLimits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a skill's scripts may use (seed 004): no network, capped time and memory."""

    timeout_secs: int = 30
    memory_mb: int = 256
    pids: int = 64
    network: Literal["none"] = "none"  # the only mode built: scripts never reach the network


class Skill(msgspec.Struct, frozen=True, kw_only=True):
    """One parsed skill."""

    name: str
    description: str
    when_to_use: str = ""
    tools: list[str] = msgspec.field(default_factory=list)  # tools the skill needs
    model_role: str = ""
    limits: SkillLimits = SkillLimits()
    scripts: list[str] = msgspec.field(default_factory=list)  # under scripts/, relative
    files: list[str] = msgspec.field(default_factory=list)  # every other file, relative
    body: str = ""


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a SKILL.md; SkillError when the front matter is missing or bad."""
    import yaml  # only where SKILL.md files are read (not in the channel or `status`)

    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillError("SKILL.md must start with a `---` line, then the front matter "
                         "(name, description, ...), then `---`")
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        raise SkillError("the front matter is not closed by a `---` line") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise SkillError(f"the front matter is not valid YAML{line}: "
                         f"{getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(meta, dict):
        raise SkillError("the front matter must be `key: value` lines")
    return meta, "\n".join(lines[end + 1:]).strip()


def _text(meta: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise SkillError(f"`{key}` must be text")
        return " ".join(value.split())
    return ""


def _tools(meta: dict[str, Any]) -> list[str]:
    value = meta.get("tools", meta.get("allowed-tools", []))
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SkillError("`tools` must be a list of tool names")
    return list(value)


def _limits(meta: dict[str, Any]) -> SkillLimits:
    try:
        limits = msgspec.convert(meta.get("limits") or {}, SkillLimits)
    except msgspec.ValidationError as exc:
        raise SkillError(f"`limits`: {exc} (known: timeout_secs, memory_mb, pids, "
                         "network: none)") from None
    if not 1 <= limits.timeout_secs <= MAX_TIMEOUT_SECS:
        raise SkillError(f"`limits.timeout_secs` must be between 1 and {MAX_TIMEOUT_SECS}")
    if not 16 <= limits.memory_mb <= 65_536:
        raise SkillError("`limits.memory_mb` must be between 16 and 65536")
    if not 1 <= limits.pids <= 4096:
        raise SkillError("`limits.pids` must be between 1 and 4096")
    return limits


def parse(text: str, folder: str) -> Skill:
    """A Skill from SKILL.md's text; the folder name must be the skill's name."""
    if len(text) > MAX_SKILL_MD:
        raise SkillError(f"SKILL.md is over {MAX_SKILL_MD} characters; move detail into "
                         "references/ files")
    meta, body = split_front_matter(text)
    unknown = sorted(set(meta) - FIELDS)
    if unknown:
        raise SkillError(f"unknown front matter keys: {', '.join(map(str, unknown))} (known: "
                         "name, description, when_to_use, tools, model_role, limits)")
    name = _text(meta, "name")
    if not name:
        raise SkillError("`name` is missing")
    if not NAME.match(name):
        raise SkillError(f"`name` {name!r} must be lowercase letters, digits, - and _ "
                         "(at most 48)")
    if name != folder:
        raise SkillError(f"`name` is {name!r} but the folder is {folder!r}; they must match")
    description = _text(meta, "description")
    if not description:
        raise SkillError("`description` is missing: one line saying what the skill does")
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(f"`description` is over {MAX_DESCRIPTION} characters; keep it to one "
                         "line and put the rest in the body")
    if not body:
        raise SkillError("the body after the front matter is empty: write the instructions")
    return Skill(name=name, description=description,
                 when_to_use=_text(meta, "when_to_use", "when-to-use"), tools=_tools(meta),
                 model_role=_text(meta, "model_role"), limits=_limits(meta), body=body)


def load(folder: Path) -> Skill:
    """The skill in folder (its SKILL.md and the files next to it); SkillError if unusable."""
    path = folder / "SKILL.md"
    if path.is_symlink() or not path.is_file():
        raise SkillError("SKILL.md is missing (or not a regular file)")
    try:
        text = path.read_bytes()[: MAX_SKILL_MD + 1].decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"SKILL.md cannot be read: {exc}") from None
    skill = parse(text, folder.name)
    scripts: list[str] = []
    files: list[str] = []
    for item in sorted(folder.rglob("*")):
        if item.is_symlink() or not item.is_file() or item.name == "SKILL.md":
            continue
        rel = item.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        (scripts if rel.startswith(SCRIPT_DIR + "/") else files).append(rel)
    return msgspec.structs.replace(skill, scripts=scripts, files=files)


def scan(root: Path) -> tuple[list[Skill], dict[str, str]]:
    """Every skill under root, and {folder: what is wrong} for the ones that cannot be used."""
    skills: list[Skill] = []
    problems: dict[str, str] = {}
    if not root.is_dir():
        return skills, problems
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            skills.append(load(folder))
        except SkillError as exc:
            problems[folder.name] = f"{exc}."
        except Exception as exc:  # noqa: BLE001 - one odd folder must not hide the others
            problems[folder.name] = f"it cannot be read ({exc!r})."
    return skills, problems


def ship_examples(root: Path) -> list[str]:
    """Copy the shipped example skills into root (skills/) once each; the names copied now.
    Called by `wintermute init`/`up` and by the executor at start."""
    root.mkdir(parents=True, exist_ok=True)
    marker = root / SHIPPED_MARKER
    done = set(marker.read_text().split()) if marker.is_file() else set()
    copied = []
    for example in sorted(EXAMPLES.iterdir()) if EXAMPLES.is_dir() else []:
        if not (example / "SKILL.md").is_file() or example.name in done:
            continue
        if not (root / example.name).exists():
            shutil.copytree(example, root / example.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
            copied.append(example.name)
        done.add(example.name)
    marker.write_text("\n".join(sorted(done)) + "\n")
    return copied


def problem_line(folder: str, why: str) -> str:
    """How `wintermute skills`, status and /skills word one entry of the problems: a folder's
    unusable SKILL.md, or (folder ".") skills/ itself."""
    if folder == ".":
        return f"skills/: {why}"
    return f"skills/{folder}/SKILL.md cannot be used: {why}"
