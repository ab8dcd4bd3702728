"""Core tool definitions offered to the model (agent-created tools arrive with the executor issue)."""

from __future__ import annotations

from contracts import ToolSpec

EXECUTE_COMMAND = ToolSpec(
    name="execute_command",
    description=(
        "Run a shell command (bash) in the workspace directory and return its output and exit "
        "code. Risky commands wait for the owner's approval."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
            "timeout_secs": {"type": "number", "description": "Give up after this many seconds."},
        },
        "required": ["command"],
    },
)

MEMORY_SAVE = ToolSpec(
    name="memory_save",
    description="Remember something for later sessions (a fact, procedure or note).",
    parameters={
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "What to remember, in one sentence."},
            "kind": {"type": "string", "enum": ["fact", "procedure", "episode", "skill", "note"]},
        },
        "required": ["content"],
    },
)

MEMORY_SEARCH = ToolSpec(
    name="memory_search",
    description="Search saved memories by keywords.",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
        "required": ["query"],
    },
)

CORE_TOOLS = [EXECUTE_COMMAND, MEMORY_SAVE, MEMORY_SEARCH]
