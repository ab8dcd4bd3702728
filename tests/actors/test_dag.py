"""Workflow DAGs as pure functions (actors/planner/_dag.py) and the claim check
(actors/planner/_turing.py): refusals, fan-in, propagation, continuation, idempotence."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from actors.planner import _dag, _turing
from contracts import Sink
from contracts.config_delegation import DelegationConfig
from contracts.records import Workflow

CFG = DelegationConfig(continuations=1)


def workflow(*tasks: dict[str, Any]) -> Workflow:
    nodes = _dag.parse({"tasks": list(tasks)}, CFG)
    wf = Workflow(id="t:tool:0:0", parent_session="s", parent_turn="t", step=0, call_id="c",
                  reply_to=Sink(channel="terminal", chat="owner"), principal="terminal:owner",
                  nodes=nodes)
    return _dag.advance(wf, 100.0)


def states(wf: Workflow) -> dict[str, str]:
    return {n.id: n.status for n in wf.nodes}


@pytest.mark.parametrize(("args", "says"), [
    ({"tasks": []}, "non-empty list"),
    ({"tasks": [{"role": "pilot", "task": "x"}]}, "the roles are coder, researcher, worker"),
    ({"tasks": [{"id": "a", "task": "x"}, {"id": "a", "task": "y"}]}, "must be unique"),
    ({"tasks": [{"id": "a", "task": "x", "depends_on": ["zz"]}]}, "depends on zz"),
    ({"tasks": [{"id": "a", "task": ""}]}, "needs a `task`"),
    ({"tasks": [{"id": "a b", "task": "x"}]}, "letters, digits"),
    ({"tasks": [{"id": "a", "task": "x", "depends_on": ["c"]},
                {"id": "b", "task": "y", "depends_on": ["a"]},
                {"id": "c", "task": "z", "depends_on": ["b"]}]}, "cycle (a -> c -> b -> a)"),
    ({"tasks": [{"id": "a", "task": "x", "depends_on": ["a"]}]}, "cycle (a -> a)"),
    ({"tasks": [{"task": str(i)} for i in range(9)]}, "delegation.max_tasks (8)"),
])
def test_bad_calls_are_refused_with_a_sentence(args: dict[str, Any], says: str) -> None:
    with pytest.raises(_dag.DagError, match="") as err:
        _dag.parse(args, CFG)
    assert says in str(err.value)


def test_one_task_without_a_list_and_the_budget_slice_is_capped() -> None:
    (node,) = _dag.parse({"role": "coder", "task": "fix it", "budget_tokens": 10**9,
                          "deadline_secs": float("nan")}, CFG)
    assert (node.id, node.role, node.budget_tokens) == ("task", "coder", CFG.budget_tokens)
    assert node.deadline_secs == CFG.deadline_secs


def test_fan_in_waits_for_every_dependency() -> None:
    wf = workflow({"id": "a", "task": "x"}, {"id": "b", "task": "y"},
                  {"id": "c", "task": "z", "depends_on": ["a", "b"]})
    assert states(wf) == {"a": "running", "b": "running", "c": "waiting"}
    wf = _dag.settle(wf, "a", 0, "done", "A!", "", 101.0, 1) or wf
    assert states(wf)["c"] == "waiting"
    wf = _dag.settle(wf, "b", 0, "done", "B!", "", 102.0, 1) or wf
    assert states(wf)["c"] == "running"
    text = _dag.task_text(wf, wf.nodes[2])
    assert "# Result of a\nA!" in text and "# Result of b\nB!" in text


def test_settling_twice_changes_nothing() -> None:
    wf = workflow({"id": "a", "task": "x"})
    done = _dag.settle(wf, "a", 0, "done", "A", "", 101.0, 1)
    assert done is not None and _dag.finished(done)
    assert _dag.settle(done, "a", 0, "failed", "", "late", 102.0, 1) is None


def test_a_failure_cancels_every_dependent_transitively() -> None:
    wf = workflow({"id": "a", "task": "x"}, {"id": "b", "task": "y", "depends_on": ["a"]},
                  {"id": "c", "task": "z", "depends_on": ["b"]}, {"id": "d", "task": "w"})
    wf = _dag.settle(wf, "a", 0, "failed", "", "model refused", 101.0, 1) or wf
    assert states(wf) == {"a": "failed", "b": "cancelled", "c": "cancelled", "d": "running"}
    assert "its dependency a did not complete (it failed: model refused)" in wf.nodes[1].reason
    assert "its dependency b did not complete" in wf.nodes[2].reason
    ok, text = _dag.report(_dag.settle(wf, "d", 0, "done", "D", "", 102.0, 1) or wf)
    assert not ok and "1 failed, 2 cancelled, 1 done" in text


def test_a_timeout_continues_then_hands_its_partial_results_on() -> None:
    wf = workflow({"id": "a", "task": "x"}, {"id": "b", "task": "y", "depends_on": ["a"]})
    wf = _dag.settle(wf, "a", 0, "timed_out", "first half", "no answer", 110.0, 1) or wf
    a = wf.nodes[0]
    assert (a.status, a.hops, a.result, a.started) == ("running", 1, "first half", 110.0)
    assert "continue from what it found\nfirst half" in _dag.task_text(wf, a)
    assert _dag.settle(wf, "a", 0, "done", "late answer of the first run", "", 111.0, 1) is None
    wf = _dag.settle(wf, "a", 1, "timed_out", "second half", "no answer", 120.0, 1) or wf
    assert states(wf) == {"a": "timed_out", "b": "running"}
    text = _dag.task_text(wf, wf.nodes[1])
    assert "# Result of a (partial: it ran out of time)\nfirst half\n\nsecond half" in text


@pytest.mark.parametrize(("answer", "tools", "claim"), [
    ("I've saved your notes.", set(), "saved or remembered something"),
    ("I’ve just stored that for you.", set(), "saved or remembered something"),
    ("Done, I sent the message to Ann.", {"memory_search"}, "sent a message"),
    ("I have now created the file report.md", set(), "created or wrote a file or tool"),
    ("I've saved it.", {"memory_save"}, ""),
    ("I sent it.", {"send_message"}, ""),
    ("I ran the tests.", {"execute_command"}, ""),
    ("I ran the tests.", {"my_script"}, ""),  # an agent-created tool could do anything
    ("You could save it with memory_save.", set(), ""),
    ("Nothing to do.", set(), ""),
])
def test_claims_without_a_matching_tool_call(answer: str, tools: set[str], claim: str) -> None:
    assert _turing.unbacked_claim(answer, tools) == claim


def test_the_readme_example_and_config_are_valid() -> None:
    import json
    import re
    import tomllib
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Delegation\n", 1)[1].split("\n## ", 1)[0]
    config = tomllib.loads(re.findall(r"```toml\n(.*?)```", section, re.S)[0])
    cfg = msgspec.convert(config["delegation"], DelegationConfig)
    assert set(cfg.roles) == {"worker", "researcher", "coder", "translator"}
    nodes = _dag.parse(json.loads(re.findall(r"```json\n(.*?)```", section, re.S)[0]), cfg)
    assert [n.depends_on for n in nodes] == [[], [], ["a", "b"]]
