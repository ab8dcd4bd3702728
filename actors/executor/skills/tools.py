"""The skill tools: load_skill (progressive disclosure), run_skill_script (sandboxed, under the
skill's limits) and write_skill (the agent's own skills, with the owner's approval, in git)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.executor.base import Tool, ToolContext, ToolOutput, arg_str
from contracts import ToolRequest, ToolSpec
from contracts.records import SkillRow
from kit import safefs, skillmd

if TYPE_CHECKING:
    from actors.executor.skills.service import SkillsService

MAX_FILE_CHARS = 32_000  # one reference file per load_skill call
MAX_FILES = 20
WRITABLE = ("scripts/", "references/", "assets/")
LOAD_INTRO = (
    "Load a skill: step-by-step instructions (and scripts) for a kind of task. Call it with a "
    "skill's name before doing a task that matches its description, then follow what it says; "
    "with `path`, read one of its files. Skills:"
)


def _index(rows: list[SkillRow]) -> str:
    """One line per skill: what the model sees until it loads one (progressive disclosure)."""
    if not rows:
        return " (none installed)"
    lines = []
    for row in rows:
        note = "" if row.available else f" [unavailable: {row.problem}]"
        when = f" Use when: {row.when_to_use}" if row.when_to_use else ""
        lines.append(f"\n- {row.name}: {row.description}{when}{note}")
    return "".join(lines)


class LoadSkill(Tool):
    """Returns a skill's body (or one of its files) into this turn's context."""

    side_effects = False

    def __init__(self, service: SkillsService) -> None:
        self.service = service
        self.describe([])

    def describe(self, rows: list[SkillRow]) -> None:
        """Rebuild the spec: the skill index lives in this tool's description."""
        self.spec = ToolSpec(
            name="load_skill", description=LOAD_INTRO + _index(rows),
            parameters={"type": "object", "properties": {
                "name": {"type": "string", **({"enum": [r.name for r in rows]} if rows else {})},
                "path": {"type": "string", "description": "A file of the skill, e.g. "
                         "references/guide.md (optional)"}},
                "required": ["name"]})

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        name = arg_str(req, "name")
        skill = self.service.skills.get(name)
        if skill is None:
            return ToolOutput(ok=False, output=self.service.unknown(name))
        path = arg_str(req, "path").strip()
        if path:
            return await self._file(skill, path)
        await self.service.used(name)
        parts = [f"# Skill {skill.name}\n{skill.body}"]
        if skill.scripts:
            lim = self.service.runner.capped(skill.limits)
            parts.append(
                f"Scripts (run with run_skill_script, skill={skill.name!r}; no network, "
                f"{lim.timeout_secs}s, {lim.memory_mb} MB): " + ", ".join(skill.scripts))
        if skill.files:
            parts.append("Files (load_skill with path): " + ", ".join(skill.files))
        missing = self.service.missing_tools(skill)
        if missing:
            parts.append(f"Note: this skill needs {', '.join(missing)}, which is not available "
                         "here; tell the user what cannot be done.")
        return ToolOutput(ok=True, output="\n\n".join(parts))

    async def _file(self, skill: skillmd.Skill, path: str) -> ToolOutput:
        if path not in skill.files and path not in skill.scripts:
            return ToolOutput(ok=False, output=(
                f"The skill {skill.name} has no file {path!r}; its files: "
                f"{', '.join(skill.files + skill.scripts) or 'none'}."))
        try:
            data = safefs.read_bytes(self.service.root / skill.name, path, MAX_FILE_CHARS + 1)
        except (OSError, safefs.UnsafePath) as exc:
            return ToolOutput(ok=False, output=f"{path} of {skill.name} cannot be read: {exc}")
        text = data.decode(errors="replace")
        if len(text) > MAX_FILE_CHARS:
            text = text[:MAX_FILE_CHARS] + f"\n[... cut at {MAX_FILE_CHARS} characters]"
        await self.service.used(skill.name)
        return ToolOutput(ok=True, output=text)


class RunSkillScript(Tool):
    spec = ToolSpec(
        name="run_skill_script",
        description=(
            "Run one of a loaded skill's scripts in a sandbox with no network, under the "
            "skill's time and memory limits. The workspace is its working directory."),
        parameters={"type": "object", "properties": {
            "skill": {"type": "string"},
            "script": {"type": "string", "description": "e.g. scripts/count.py"},
            "args": {"type": "array", "items": {"type": "string"}},
            "stdin": {"type": "string"}},
            "required": ["skill", "script"]},
    )
    owner_only = True  # it writes the workspace, like execute_command

    def __init__(self, service: SkillsService) -> None:
        self.service = service

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        name, script = arg_str(req, "skill"), arg_str(req, "script").strip()
        skill = self.service.skills.get(name)
        if skill is None:
            return ToolOutput(ok=False, output=self.service.unknown(name))
        if script not in skill.scripts and f"scripts/{script}" in skill.scripts:
            script = f"scripts/{script}"
        if script not in skill.scripts:
            return ToolOutput(ok=False, output=(
                f"The skill {name} has no script {script!r}; its scripts: "
                f"{', '.join(skill.scripts) or 'none'}."))
        args = req.arguments.get("args") or []
        if not isinstance(args, list):
            return ToolOutput(ok=False, output="args must be a list of strings.")
        res = await self.service.runner.run(
            self.service.root / name, script, [str(a) for a in args], skill.limits,
            env=ctx.env, stdin=arg_str(req, "stdin").encode(),
            output_limit=ctx.config.executor.output_limit)
        ok = res.exit_code == 0 and not res.timed_out
        if res.exit_code != 126 or res.duration_ms:  # a refusal is not a use
            await self.service.used(name, run=True, ok=ok)
        if res.timed_out:
            return ToolOutput(ok=False, timed_out=True, output=(
                f"{script} ran past the skill's limit of {skill.limits.timeout_secs}s and was "
                f"killed.\n{res.output}"))
        return ToolOutput(ok=ok, output=f"exit code {res.exit_code}\n{res.output}")


class WriteSkill(Tool):
    spec = ToolSpec(
        name="write_skill",
        description=(
            "Create or update one of your skills: skills/<name>/SKILL.md (front matter with "
            "name, description, when_to_use, tools, limits; then the instructions) plus optional "
            "files under scripts/, references/ or assets/. The owner approves every write; it "
            "is committed to git and can be reverted."),
        parameters={"type": "object", "properties": {
            "name": {"type": "string"},
            "skill_md": {"type": "string", "description": "The whole SKILL.md."},
            "files": {"type": "object", "additionalProperties": {"type": "string"},
                      "description": "relative path -> text, e.g. scripts/run.py"}},
            "required": ["name", "skill_md"]},
    )
    owner_only = True

    def __init__(self, service: SkillsService) -> None:
        self.service = service

    def _check(self, req: ToolRequest) -> tuple[str, dict[str, str]]:
        """("", files) when the skill can be written, else (what is wrong, {})."""
        name, text = arg_str(req, "name"), arg_str(req, "skill_md")
        try:
            skillmd.parse(text, name)
        except skillmd.SkillError as exc:
            return f"The SKILL.md is not usable: {exc}.", {}
        files: Any = req.arguments.get("files") or {}
        if not isinstance(files, dict) or len(files) > MAX_FILES:
            return f"files must be an object of at most {MAX_FILES} path -> text pairs.", {}
        for path, body in files.items():
            if not isinstance(body, str) or not path.startswith(WRITABLE) or ".." in path:
                return (f"{path!r}: files go under {', '.join(WRITABLE)} and hold text.", {})
            if len(body) > 200_000:
                return f"{path} is over 200000 characters.", {}
        return "", {"SKILL.md": text, **files}

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        problem, files = self._check(req)
        if problem:
            return ""  # run() says what is wrong; nothing to approve
        verb = "change" if arg_str(req, "name") in self.service.skills else "add"
        return (f"the agent wants to {verb} the skill {arg_str(req, 'name')} "
                f"({', '.join(files)}); skills shape what it does in later turns")

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        problem, files = self._check(req)
        if problem:
            return ToolOutput(ok=False, output=problem + " Nothing was written.")
        name = arg_str(req, "name")
        verb = "update" if (self.service.root / name).exists() else "create"
        try:
            for path, body in files.items():
                mode = 0o755 if path.startswith("scripts/") else 0o644
                safefs.write_bytes(self.service.root, f"{name}/{path}", body.encode(), mode)
            commit = await self.service.commit([name], f"{verb} skill: {name}")
        except Exception as exc:  # noqa: BLE001 - OSError, UnsafePath, GitError: said, not raised
            return ToolOutput(ok=False, output=f"Writing the skill {name} failed: {exc}")
        await self.service.refresh(force=True)
        if name in self.service.problems:
            return ToolOutput(ok=False, output=f"{name} was written but cannot be loaded: "
                                               f"{self.service.problems[name]}")
        where = f"commit {commit} in data/skills.git" if commit else "unchanged"
        return ToolOutput(ok=True, output=(
            f"{'Created' if verb == 'create' else 'Updated'} the skill {name} ({where}). It is "
            "listed from the next step on; `wintermute skills revert` undoes it."))


def skill_tools(service: SkillsService) -> list[Tool]:
    return [LoadSkill(service), RunSkillScript(service), WriteSkill(service)]
