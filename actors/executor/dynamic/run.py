"""An agent-created tool: `python3 scripts/<name>.py` in the sandbox, JSON in, JSON out."""

from __future__ import annotations

import json
import secrets
import shlex
from pathlib import Path

from actors.executor.base import Tool, ToolContext, ToolOutput
from actors.executor.dynamic.spec import ScriptSpec
from contracts import ToolRequest, ToolSpec

STDERR_TAIL = 2000  # bytes of stderr kept for a failure


def wrapper(script: Path, marker: str) -> str:
    """Bash that runs the script with stdout apart from stderr (sandboxes merge the two).

    stdout comes first, then a line with the marker and the exit code, then the tail of
    stderr. The marker is random per call, so a script cannot forge the exit code. The script
    is named relative to the workspace (the command's cwd), which every sandbox layout keeps
    next to scripts/ (host paths in direct mode, /workspace and /scripts in containers).
    """
    path = shlex.quote(f"../scripts/{script.name}")
    return (
        'err=$(mktemp) || exit 97\n'
        f'python3 {path} 2>"$err"\n'
        'rc=$?\n'
        f'printf "\\n{marker} %s\\n" "$rc"\n'
        f'tail -c {STDERR_TAIL} "$err"\n'
        'rm -f "$err"\n'
    )


def split_output(output: str, marker: str) -> tuple[str, int | None, str]:
    """(stdout, exit code, stderr tail) from the wrapper's output; code None if it never ended."""
    at = output.rfind(f"\n{marker} ")
    if at < 0:
        return output, None, ""
    stdout = output[:at]
    rest = output[at + len(marker) + 2:]
    code_text, _, stderr = rest.partition("\n")
    try:
        code: int | None = int(code_text.strip())
    except ValueError:
        code = None
    return stdout, code, stderr


class DynamicTool(Tool):
    """A tool the agent wrote with create_tool (or a person put in scripts/)."""

    core = False
    owner_only = True  # it runs code like execute_command does
    side_effects = True

    def __init__(self, spec: ScriptSpec, script: Path, version: int = 1) -> None:
        self.script_spec = spec
        self.script = script
        self.version = version
        self.spec = ToolSpec(name=spec.name, description=spec.description,
                             parameters=spec.parameters)

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        marker = "__wm_exit_" + secrets.token_hex(8)
        payload = json.dumps(req.arguments, ensure_ascii=False).encode()
        limit = ctx.config.executor.output_limit
        timeout = float(self.script_spec.timeout_secs)
        res = await ctx.sandbox.run(
            wrapper(self.script, marker), cwd=ctx.workspace, timeout=timeout,
            output_limit=limit, env=ctx.env, stdin=payload or b"{}",
            read_only_scripts=True,  # a tool reads its code; it never rewrites itself or others
        )
        stdout, code, stderr = split_output(res.output, marker)
        name = self.name
        if res.timed_out:
            return ToolOutput(ok=False, timed_out=True, output=(
                f"The tool {name} timed out after {timeout:g}s and was killed."
                + _section("output so far", stdout)))
        if code is None:
            return ToolOutput(ok=False, output=(
                f"The tool {name} ended without reporting an exit code (was it killed?)."
                + _section("output", res.output)))
        if code != 0:
            return ToolOutput(ok=False, output=(
                f"The tool {name} failed with exit code {code}."
                + _section("stderr (tail)", stderr) + _section("stdout", stdout)))
        text = stdout.strip()
        try:
            value = json.loads(text)
        except ValueError:
            cut = " Its output was also cut at the output limit; return less." if res.truncated \
                else ""
            return ToolOutput(ok=False, output=(
                f"The tool {name} broke its contract: stdout must be one JSON value, but it "
                f"was not valid JSON.{cut} Write diagnostics to stderr, not stdout."
                + _section("stdout", text[:1000]) + _section("stderr (tail)", stderr)))
        # A tool may say what its data is ({"label": "public", ...}); the executor joins the
        # claim with the owner's ceiling for the tool, so a lower claim changes nothing.
        claim = value.get("label") if isinstance(value, dict) else None
        return ToolOutput(ok=True, output=text, label=claim if isinstance(claim, str) else "")


def _section(title: str, text: str) -> str:
    text = text.strip()
    return f"\n{title}:\n{text}" if text else ""
