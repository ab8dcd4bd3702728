"""Agent-created tools: create_tool, the scripts/ registry with hot reload, _meta, git revert."""

from actors.executor.dynamic.create import CreateTool
from actors.executor.dynamic.git import Reverted, revert_last
from actors.executor.dynamic.registry import ScriptRegistry
from actors.executor.dynamic.run import DynamicTool

__all__ = ["CreateTool", "DynamicTool", "Reverted", "ScriptRegistry", "revert_last"]
