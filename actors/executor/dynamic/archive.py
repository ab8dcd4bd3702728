"""archive_tools: take agent-created tools out of use by moving their files to scripts/archive/
(committed, so /revert brings them back). Always asks the owner first; the monthly tool review
proposes it as an approval request."""

from __future__ import annotations

import os

from actors.executor.base import Tool, ToolContext, ToolOutput
from actors.executor.dynamic.git import GitError, commit_paths, git_lock, tracked
from actors.executor.dynamic.spec import NAME_RE
from contracts import ToolRequest, ToolSpec

ARCHIVE = "archive"


class ArchiveTools(Tool):
    spec = ToolSpec(
        name="archive_tools",
        description=(
            "Archive some of your own tools (created with create_tool) that are unused or "
            "failing: their files move to scripts/archive/ and they are no longer offered. "
            "Needs the owner's approval; /revert undoes it."
        ),
        parameters={
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"},
                          "description": "Names of agent-created tools."},
                "reason": {"type": "string", "description": "Why, for the commit message."},
            },
            "required": ["names"],
        },
    )
    owner_only = True

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        return "archiving tools takes them away from the agent until they are restored"

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        names = req.arguments.get("names")
        if not isinstance(names, list) or not names or not all(
                isinstance(n, str) and NAME_RE.fullmatch(n) for n in names):
            return ToolOutput(ok=False, output="archive_tools needs 'names': a list of tool "
                                               "names (lowercase, digits, underscores).")
        scripts = ctx.scripts
        reason = str(req.arguments.get("reason") or "archived")[:200]
        moved: list[str] = []
        missing: list[str] = []
        async with git_lock():
            paths: list[str] = []
            try:
                (scripts / ARCHIVE).mkdir(exist_ok=True)
                for name in sorted(set(names)):
                    files = [f"{name}.py", f"{name}.json"]
                    if not all((scripts / f).is_file() for f in files):
                        missing.append(name)
                        continue
                    for f in files:
                        was_tracked = await tracked(scripts, f)
                        os.replace(scripts / f, scripts / ARCHIVE / f)
                        paths += [f, f"{ARCHIVE}/{f}"] if was_tracked else [f"{ARCHIVE}/{f}"]
                    moved.append(name)
                commit = (await commit_paths(scripts, paths, f"archive tools: "
                                             f"{', '.join(moved)} ({reason})")
                          if moved else None)
            except (OSError, GitError) as exc:
                return ToolOutput(ok=False, output=f"Archiving failed part-way ({exc}); moved so "
                                                   f"far: {', '.join(moved) or 'none'}.")
        if not moved:
            return ToolOutput(ok=False, output=f"No such agent-created tools: "
                                               f"{', '.join(missing)}. Nothing was archived.")
        text = f"Archived {', '.join(moved)} to scripts/archive/"
        text += f" (commit {commit}); /revert brings them back." if commit else "."
        if missing:
            text += f" Not found: {', '.join(missing)}."
        return ToolOutput(ok=True, output=text)
