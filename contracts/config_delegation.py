"""The `[delegation]` section of config.toml: the roles a turn may delegate sub-tasks to.

Each role is a prompt, the llm role its model calls use (`models.roles.<model_role>`, else the
default model) and a tool profile (the tool names it is offered; empty: every tool). The three
shipped roles follow seed 002 (worker, researcher, coder); a `[delegation.roles.NAME]` table
replaces one or adds another.
"""

from __future__ import annotations

import msgspec

from contracts.config_base import _Section


class DelegateRole(_Section):
    prompt: str
    model_role: str = "default"
    tools: list[str] = msgspec.field(default_factory=list)


# The core tools (actors/executor): files are read and written with execute_command.
_READ = ["web_fetch", "memory_search"]
DEFAULT_ROLES: dict[str, DelegateRole] = {
    "worker": DelegateRole(
        prompt=("You are a worker sub-agent. Do the one task below with your tools, then answer "
                "with its result only: facts, paths, numbers. You cannot ask questions."),
        model_role="worker",
        tools=[*_READ, "execute_command", "web_request", "memory_save", "load_skill",
               "run_skill_script"],
    ),
    "researcher": DelegateRole(
        prompt=("You are a research sub-agent. Search and read sources for the task below and "
                "answer with a short synthesis that names its sources."),
        model_role="researcher",
        tools=[*_READ, "web_request", "load_skill"],
    ),
    "coder": DelegateRole(
        prompt=("You are a coding sub-agent. Read, write and run code in the workspace for the "
                "task below; answer with what you changed and how you checked it."),
        model_role="coder",
        tools=[*_READ, "execute_command", "create_tool", "load_skill", "run_skill_script"],
    ),
}


class DelegationConfig(_Section):
    """Sub-agents: limits of one `delegate` call and the roles it may name."""

    enabled: bool = True  # offer the `delegate` tool to the model
    roles: dict[str, DelegateRole] = msgspec.field(default_factory=lambda: dict(DEFAULT_ROLES))
    max_tasks: int = 8  # sub-tasks in one workflow
    budget_tokens: int = 50_000  # a sub-task's default budget slice (the model may ask less)
    deadline_secs: float = 600.0  # a sub-task's default deadline, from its start
    continuations: int = 1  # a sub-task past its deadline goes on this many times
    # A finished workflow's record and its sub-sessions' state leave wm_sessions this long
    # after it ended (0: at the next collection, hourly); their history stays in the streams.
    keep_finished_hours: float = 168.0

    def __post_init__(self) -> None:
        if self.max_tasks < 1 or self.budget_tokens < 0 or self.deadline_secs <= 0:
            raise ValueError("max_tasks must be >= 1, budget_tokens >= 0, deadline_secs > 0")
        if self.continuations < 0:
            raise ValueError("continuations must be >= 0")
        if self.keep_finished_hours < 0:
            raise ValueError("keep_finished_hours must be >= 0")
        # A table in config.toml adds roles to the shipped ones instead of dropping them.
        self.roles = {**DEFAULT_ROLES, **self.roles}
