"""create_tool: the agent writes (or rewrites) one of its own tools, and git records it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from actors.executor.base import Tool, ToolContext, ToolOutput
from actors.executor.dynamic.git import GitError, commit_paths, git_lock, tracked
from actors.executor.dynamic.spec import (
    DEFAULT_TIMEOUT,
    MAX_DESCRIPTION,
    MAX_TIMEOUT,
    SpecError,
    build_spec,
    render_spec_file,
)
from contracts import ToolRequest, ToolSpec
from kit import safefs

SYNTAX_CHECK = "python3 -c 'import ast, sys; ast.parse(sys.stdin.buffer.read(), sys.argv[1])' "
MAX_SOURCE = 200_000


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace path in one step, so the registry never loads a half-written file, and never
    through a link the sandbox planted in scripts/ (kit.safefs)."""
    safefs.write_bytes(path.parent, path.name, data, mode)


class CreateTool(Tool):
    spec = ToolSpec(
        name="create_tool",
        description=(
            "Create or update one of your own tools: a Python script saved as "
            "scripts/<name>.py with its schema in scripts/<name>.json, committed to git. It "
            "reads its arguments as one JSON object on stdin and must print one JSON value on "
            "stdout (diagnostics go to stderr; exit non-zero on failure). It is offered from "
            "your next step on. Test the code with execute_command first."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Tool name: lowercase letters, digits, "
                         "underscores. Becomes the file name."},
                "description": {"type": "string", "maxLength": MAX_DESCRIPTION,
                                "description": "What the tool does, shown in the tool list."},
                "parameters_schema": {"type": "object",
                                      "description": "JSON Schema of the tool's arguments."},
                "implementation": {"type": "string", "description": "The Python script: read "
                                   "JSON from stdin, write JSON to stdout."},
                "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT,
                                 "default": DEFAULT_TIMEOUT},
            },
            "required": ["name", "description", "parameters_schema", "implementation"],
        },
    )
    owner_only = True

    def __init__(self, reserved: Callable[[], Iterable[str]] = tuple) -> None:
        self.reserved = reserved  # names of core tools, which a script may not take

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        args = req.arguments
        try:
            spec = build_spec(args.get("name"), args.get("description"),
                              args.get("parameters_schema", {}), args.get("timeout_secs"))
        except SpecError as exc:
            return ToolOutput(ok=False, output=f"{exc} Nothing was saved.")
        if spec.name in set(self.reserved()):
            return ToolOutput(ok=False, output=(
                f"{spec.name} is a core tool; choose another name. Nothing was saved."))
        source = args.get("implementation")
        if not isinstance(source, str) or not source.strip():
            return ToolOutput(ok=False, output="implementation must be the Python script's "
                                               "source code. Nothing was saved.")
        if len(source) > MAX_SOURCE:
            return ToolOutput(ok=False, output=f"implementation is over {MAX_SOURCE} characters;"
                                               " split it up. Nothing was saved.")
        problem = await self._syntax_problem(spec.name, source, ctx)
        if problem:
            return ToolOutput(ok=False, output=(
                f"The implementation of {spec.name} does not parse, so nothing was saved:\n"
                f"{problem}"))
        return await self._save(spec.name, render_spec_file(spec), source, ctx.scripts)

    async def _syntax_problem(self, name: str, source: str, ctx: ToolContext) -> str:
        """The parser's complaint, from the python3 the tool will run with, or ""."""
        res = await ctx.sandbox.run(
            SYNTAX_CHECK + f"{name}.py", cwd=ctx.workspace, timeout=30,
            output_limit=4000, env=ctx.env, stdin=source.encode(),
        )
        if res.exit_code == 0:
            return ""
        lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
        return "\n".join(lines[-4:]) or f"python3 exited with {res.exit_code}"

    async def _save(self, name: str, spec_file: bytes, source: str, scripts: Path) -> ToolOutput:
        py, js = f"{name}.py", f"{name}.json"
        async with git_lock():
            try:
                verb = "update" if await tracked(scripts, js) else "create"
                write_atomic(scripts / py, source.encode(), 0o755)
                write_atomic(scripts / js, spec_file, 0o644)
                commit = await commit_paths(scripts, [py, js], f"{verb} tool: {name}")
            except (OSError, GitError, safefs.UnsafePath) as exc:
                return ToolOutput(ok=False, output=f"Saving {name} failed: {exc}")
        if commit is None:
            return ToolOutput(ok=True, output=(
                f"{name} is unchanged: the code and schema match the last commit. It is "
                "available as a tool."))
        return ToolOutput(ok=True, output=(
            f"{'Created' if verb == 'create' else 'Updated'} tool {name} (commit {commit} in "
            f"scripts/). It is offered to you from the next step on: call {name} with its "
            "arguments."))
