"""Workflow DAGs of delegated sub-tasks, as pure functions over the `Workflow` record.

A `delegate` call's arguments become nodes (`parse`); a cycle, an unknown dependency or role
is refused with a sentence. `advance` starts every node whose dependencies are done (fan-in)
and cancels, transitively, every node behind a failed one; `settle` records how a running
node ended. A node past its deadline hands what it found so far to a continuation (up to
`delegation.continuations` times), then ends `timed_out` with those partial results, which its
dependents still receive: a timeout loses nothing. These functions are applied inside a
compare-and-set, so they are pure: same record in, same record out.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from contracts import labels
from contracts.config_delegation import DelegationConfig
from contracts.records import NODE_FINAL, Workflow, WorkflowNode

_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
#: Dependencies whose result a dependent can build on (a timed-out one hands over its partial).
USABLE = ("done", "timed_out")
RESULT_CHARS = 4000  # of one node's result kept in the record and passed on


class DagError(ValueError):
    """A `delegate` call that cannot run, with the sentence the model reads."""


def parse(args: dict[str, Any], cfg: DelegationConfig) -> list[WorkflowNode]:
    """The nodes of a `delegate` call: `tasks: [...]`, or one task given by `role` and `task`."""
    raw = args.get("tasks")
    if raw is None:
        raw = [{"id": "task", **{k: v for k, v in args.items() if k != "tasks"}}]
    if not isinstance(raw, list) or not raw:
        raise DagError("`tasks` must be a non-empty list of {id, role, task, depends_on}.")
    if len(raw) > cfg.max_tasks:
        raise DagError(f"{len(raw)} tasks is more than delegation.max_tasks ({cfg.max_tasks}); "
                       "split the work or combine tasks.")
    nodes = [_node(item, i, cfg) for i, item in enumerate(raw)]
    ids = [n.id for n in nodes]
    if len(set(ids)) != len(ids):
        raise DagError(f"task ids must be unique; got {', '.join(ids)}.")
    for n in nodes:
        unknown = [d for d in n.depends_on if d not in ids]
        if unknown:
            raise DagError(f"task {n.id} depends on {', '.join(unknown)}, which is not a task "
                           f"of this call (the tasks are {', '.join(ids)}).")
    cycle = find_cycle(nodes)
    if cycle:
        raise DagError(f"the tasks' depends_on form a cycle ({' -> '.join(cycle)}), so none of "
                       "them could ever start. Remove one of these dependencies.")
    return nodes


def _node(item: Any, i: int, cfg: DelegationConfig) -> WorkflowNode:
    if not isinstance(item, dict):
        raise DagError(f"task {i + 1} must be an object with role and task.")
    node_id = str(item.get("id") or f"t{i + 1}")
    if not _ID.match(node_id):
        raise DagError(f"task id {node_id!r} may use only letters, digits, - and _.")
    role = str(item.get("role") or "worker")
    if role not in cfg.roles:
        raise DagError(f"task {node_id} names the role {role!r}; the roles are "
                       f"{', '.join(sorted(cfg.roles))} (delegation.roles in config.toml).")
    task = item.get("task")
    if not isinstance(task, str) or not task.strip():
        raise DagError(f"task {node_id} needs a `task`: what the sub-agent should do.")
    deps = item.get("depends_on") or []
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise DagError(f"depends_on of task {node_id} must be a list of task ids.")
    try:
        budget = int(item.get("budget_tokens") or cfg.budget_tokens)
        deadline = float(item.get("deadline_secs") or cfg.deadline_secs)
    except (TypeError, ValueError):
        raise DagError(f"budget_tokens and deadline_secs of task {node_id} must be numbers.") \
            from None
    if not math.isfinite(deadline):  # NaN would not even survive the JSON of the record
        deadline = cfg.deadline_secs
    # The model may ask for less than the configured slice, never for more.
    budget = min(budget, cfg.budget_tokens) if cfg.budget_tokens else budget
    return WorkflowNode(id=node_id, role=role, task=task.strip(),
                        context=str(item.get("context") or "").strip(),
                        depends_on=list(dict.fromkeys(deps)), budget_tokens=max(budget, 0),
                        deadline_secs=min(max(deadline, 1.0), cfg.deadline_secs))


def find_cycle(nodes: list[WorkflowNode]) -> list[str]:
    """One dependency cycle as a path of ids (first id repeated at the end), or []."""
    deps = {n.id: n.depends_on for n in nodes}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        path.append(n)
        for d in deps.get(n, []):
            if state.get(d) == 1:
                return [*path[path.index(d):], d]
            if d not in state and (found := visit(d)):
                return found
        path.pop()
        state[n] = 2
        return []

    for n in deps:
        if n not in state and (found := visit(n)):
            return found
    return []


def advance(wf: Workflow, now: float) -> Workflow:
    """Start the nodes whose dependencies are usable; cancel those behind a failed one."""
    nodes = {n.id: n for n in wf.nodes}
    changed = True
    while changed:
        changed = False
        for n in list(nodes.values()):
            if n.status != "waiting":
                continue
            deps = [nodes[d] for d in n.depends_on]
            broken = [d for d in deps if d.status in ("failed", "cancelled")]
            if broken:
                d = broken[0]
                why = d.reason if d.status == "cancelled" else f"it failed: {d.reason}"
                nodes[n.id] = msgspec.structs.replace(
                    n, status="cancelled", reason=f"its dependency {d.id} did not complete "
                    f"({why[:300]})")
                changed = True
            elif all(d.status in USABLE for d in deps):
                nodes[n.id] = msgspec.structs.replace(n, status="running", started=now)
                changed = True
    out = msgspec.structs.replace(wf, nodes=[nodes[n.id] for n in wf.nodes])
    if finished(out) and not out.finished:  # when it ended, for collecting it later
        out = msgspec.structs.replace(out, finished=now)
    return out


def settle(wf: Workflow, node_id: str, hops: int, status: str, result: str, reason: str,
           now: float, continuations: int, label: str = "internal") -> Workflow | None:
    """Record how run `hops` of a running node ended; None when that was already recorded."""
    node = next((n for n in wf.nodes if n.id == node_id), None)
    if node is None or node.status != "running" or node.hops != hops:
        return None
    result = result.strip()[-RESULT_CHARS:]
    node = msgspec.structs.replace(node, label=labels.join(node.label, label))
    wf = msgspec.structs.replace(wf, label=labels.join(wf.label, label))
    if status == "timed_out" and node.hops < continuations:
        # The continuation starts now with what this run found (never lost, never redone).
        found = _joined(node.result, result)
        new = msgspec.structs.replace(node, result=found, hops=node.hops + 1, started=now)
    else:
        if status == "timed_out":
            result = _joined(node.result, result)
        new = msgspec.structs.replace(node, status=status, result=result, reason=reason[:500])
    nodes = [new if n.id == node_id else n for n in wf.nodes]
    return advance(msgspec.structs.replace(wf, nodes=nodes), now)


def finished(wf: Workflow) -> bool:
    return all(n.status in NODE_FINAL for n in wf.nodes)


def task_text(wf: Workflow, node: WorkflowNode) -> str:
    """What a node's sub-agent is asked: its context, its dependencies' results, what an
    earlier run found, and its task last (the instruction after the data)."""
    parts = []
    if node.context:
        parts.append(f"# Context\n{node.context}")
    nodes = {n.id: n for n in wf.nodes}
    for d in node.depends_on:
        dep = nodes[d]
        note = " (partial: it ran out of time)" if dep.status == "timed_out" else ""
        parts.append(f"# Result of {d}{note}\n{dep.result or '(no answer)'}")
    if node.hops:
        parts.append("# Your earlier attempt ran out of time; continue from what it found\n"
                     f"{node.result or '(nothing yet)'}")
    if not parts:
        return node.task
    return "\n\n".join([*parts, f"# Your task\n{node.task}"])


def _joined(before: str, after: str) -> str:
    """Two runs' findings within RESULT_CHARS: the start of the first, the end of the second."""
    text = "\n\n".join(p for p in (before, after) if p)
    if len(text) <= RESULT_CHARS:
        return text
    half = RESULT_CHARS // 2
    return f"{before[:half]}\n[...]\n{after[-half:]}" if before else after[-RESULT_CHARS:]


def report(wf: Workflow) -> tuple[bool, str]:
    """Whether every node completed, and the fan-in of all results for the parent's model."""
    counts: dict[str, int] = {}
    for n in wf.nodes:
        counts[n.status] = counts.get(n.status, 0) + 1
    head = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())
    lines = [f"Delegated tasks finished ({head})."]
    for n in wf.nodes:
        why = f": {n.reason}" if n.reason else ""
        lines.append(f"## {n.id} ({n.role}) {n.status.replace('_', ' ')}{why}")
        if n.result:
            lines.append(n.result)
    ok = all(n.status == "done" for n in wf.nodes)
    return ok, "\n".join(lines)
