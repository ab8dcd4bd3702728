"""The tool registry: core tools plus (later) agent-created tools from scripts/."""

from __future__ import annotations

from actors.executor.base import Tool
from contracts import ToolSpec


class ToolRegistry:
    """Name -> Tool; what is offered to the model is published to KV by the executor."""

    def __init__(self, tools: list[Tool]) -> None:
        self._tools = {t.name: t for t in tools}

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)
