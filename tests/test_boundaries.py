"""The layering rules, checked on the parsed code (Python's `ast`, not text search).

- Only bus/ talks to NATS: no `nats` import, and no reach into the client through a Bus
  (`.js`, `.nc`, `.kv(`) anywhere else.
- Shared KV values are typed records (contracts/records.py) decoded by the bus: no
  `json.loads` in actors/, supervisor/, state/ or kit/ but for the non-KV uses listed below.
- supervisor/ (and the CLI in it) imports nothing from actors/.
- actors/common is gone (its parts live in kit/ and state/).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("actors", "bus", "contracts", "kit", "state", "supervisor", "benchmarks")

#: json.loads that never parse a KV value, each with why.
JSON_LOADS_ALLOWED = {
    "actors/channel/_telegram_webhook.py": "the body of Telegram's webhook HTTP request",
    "actors/llm/_convert.py": "tool-call arguments a model returned as JSON text",
    "actors/executor/dynamic/spec.py": "scripts/<name>.json files the agent writes",
    "actors/executor/dynamic/run.py": "checking that a tool script printed JSON",
    "supervisor/process/up.py": "data/runtime.json, a local file",
    "supervisor/process/status.py": "data/runtime.json, a local file",
    "supervisor/process/home.py": "data/seeded.json, a local file",
    "supervisor/process/natsserver.py": "the users' server config, merged into the run config",
    "supervisor/process/storage.py": "data/nats/server.run.json (the storage limit), a local file",
    "supervisor/process/backup.py": "the backup archive's own files (raw KV bytes restored as is)",
    "kit/redact.py": "NATS credential files, read to redact their values",
}

#: supervisor/ modules that still import actors/.
ACTOR_IMPORTS_ALLOWED: dict[str, str] = {
    # (none left: replay drives a planner process through the bus)
}


@functools.cache
def _parsed(package: str) -> tuple[tuple[str, ast.Module], ...]:
    """Each package is parsed once per session: the rules only read the trees, and parsing
    the whole tree again for every rule cost ~10 s a test on a loaded CI machine."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        found.append((rel, ast.parse(path.read_text(), filename=rel)))
    return tuple(found)


def modules(*packages: str) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        yield from _parsed(package)


def imported(tree: ast.Module) -> tuple[tuple[int, str], ...]:
    """(line, module) of every import, also those inside functions."""
    return _imported(tree)


@functools.cache  # keyed by the (cached, never mutated) tree: walked once per session
def _imported(tree: ast.Module) -> tuple[tuple[int, str], ...]:
    return tuple(_imports(tree))


def _imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def outside_bus() -> Iterator[tuple[str, ast.Module]]:
    return modules(*(p for p in PACKAGES if p != "bus"))


# The one exception: the memory floor of a process with nats.py and none of our code.
MEASURES_NATS_ALONE = {"benchmarks/_floor.py"}


def test_nothing_outside_bus_imports_nats() -> None:
    found = [f"{rel}:{line} imports {name}" for rel, tree in outside_bus()
             for line, name in imported(tree)
             if (name == "nats" or name.startswith("nats.")) and rel not in MEASURES_NATS_ALONE]
    assert not found, "Only bus/ talks to NATS; use the Bus API:\n" + "\n".join(found)


def test_nothing_outside_bus_reaches_into_the_nats_client() -> None:
    found = []
    for rel, tree in outside_bus():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("js", "nc"):
                found.append(f"{rel}:{node.lineno} .{node.attr}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "kv"):
                found.append(f"{rel}:{node.lineno} .kv(...)")
    assert not found, "Use the Bus helpers (kv_get_as, kv_update, subscribe, ...):\n" + \
        "\n".join(found)


def _json_loads_calls(tree: ast.Module) -> Iterator[int]:
    names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             and n.module == "json" for a in n.names if a.name == "loads"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == "loads" and isinstance(f.value, ast.Name)
                and f.value.id == "json") or (isinstance(f, ast.Name) and f.id in names):
            yield node.lineno


def test_no_json_loads_of_shared_state() -> None:
    found, used = [], set()
    for rel, tree in modules("actors", "supervisor", "state", "kit"):
        for line in _json_loads_calls(tree):
            if rel in JSON_LOADS_ALLOWED:
                used.add(rel)
            else:
                found.append(f"{rel}:{line}")
    assert not found, ("Decode KV values into contracts/records.py types with "
                       "Bus.kv_get_as; json.loads at:\n" + "\n".join(found))
    assert used == set(JSON_LOADS_ALLOWED), f"stale allowlist: {set(JSON_LOADS_ALLOWED) - used}"


def test_the_supervisor_imports_nothing_from_actors() -> None:
    found, used = [], set()
    for rel, tree in modules("supervisor"):
        for line, name in imported(tree):
            if name == "actors" or name.startswith("actors."):
                if rel in ACTOR_IMPORTS_ALLOWED:
                    used.add(rel)
                else:
                    found.append(f"{rel}:{line} imports {name}")
    assert not found, "supervisor/ must not import actors/:\n" + "\n".join(found)
    assert used == set(ACTOR_IMPORTS_ALLOWED), \
        f"remove from the allowlist: {set(ACTOR_IMPORTS_ALLOWED) - used}"


def test_actors_common_is_gone() -> None:
    assert not (ROOT / "actors" / "common").exists()
    found = [f"{rel}:{line}" for rel, tree in modules(*PACKAGES, "tests")
             for line, name in imported(tree) if name.startswith("actors.common")]
    assert not found, "actors.common was split into kit/ and state/:\n" + "\n".join(found)


@pytest.mark.parametrize("rule", [test_nothing_outside_bus_imports_nats,
                                  test_no_json_loads_of_shared_state])
def test_the_rules_catch_a_violation(rule: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rule fails on a module that breaks it (so none of them passes vacuously)."""
    bad = ast.parse("import json\nimport nats\nx = json.loads(b'{}')\n")
    monkeypatch.setattr(f"{__name__}.modules", lambda *p: iter([("actors/bad.py", bad)]))
    with pytest.raises(AssertionError, match=r"actors/bad\.py:[23]\b"):
        rule()  # type: ignore[operator]
