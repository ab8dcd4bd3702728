"""Typed KV records: every one in `wintermute schema`, and values written before the records
existed (plain JSON dicts from the previous release) still decode."""

from __future__ import annotations

import json

import msgspec
import pytest
from click.testing import CliRunner

from bus import decode_record
from contracts.records import (
    ALL_RECORDS,
    ExecutorFacts,
    PairingRequest,
    SupervisorStatus,
    TaskHold,
    TelegramPreview,
    ToolHold,
)
from supervisor.cli.main import main


def test_every_record_is_in_the_schema_command() -> None:
    out = CliRunner().invoke(main, ["schema"])
    assert out.exit_code == 0, out.output
    defs = json.loads(out.output)["$defs"]
    for record in ALL_RECORDS:
        assert record.__name__ in defs
    assert sorted(defs["ToolHold"]["properties"]["status"]["enum"]) == ["active", "quarantined"]
    assert "restarting" in defs["ActorStatus"]["properties"]["state"]["enum"]


def test_values_of_the_previous_release_decode() -> None:
    # Exactly what the previous release wrote with json.dumps.
    hold = decode_record(json.dumps({
        "status": "quarantined", "reason": "it failed 5 times in a row", "rule": "consecutive",
        "since": 1.5, "by": "flatline", "evidence": {"consecutive_failures": 5}}).encode(),
        ToolHold)
    assert hold is not None and hold.rule == "consecutive" and hold.released_at == 0.0
    task = decode_record(b'{"task": "t", "status": "disabled", "failures": 3, "seen": ["a"]}',
                         TaskHold)
    assert task == TaskHold(task="t", status="disabled", failures=3, seen=["a"])
    status = decode_record(json.dumps({
        "updated": 2.0, "mode": "spawn", "nats": {"url": "nats://x", "pid": 7, "embedded": True},
        "actors": [{"name": "llm", "pid": 9, "healthy": True, "state": "running",
                    "policy": "permanent", "restarts": 0, "last_exit": "", "last_crash": None,
                    "uptime_secs": 3.0, "handled": 1, "info": {}}],
        "failed": [], "quarantined": {}, "disabled_tasks": {}, "interventions": [
            {"ts": 1.0, "kind": "restart", "target": "llm", "action": "a", "reason": "r",
             "outcome": "done", "undo": "", "proposed": False}],
        "dead_letters_seen": 0, "a_field_from_a_newer_release": 1}).encode(), SupervisorStatus)
    assert status is not None and status.actors[0].name == "llm" and status.nats.pid == 7
    assert decode_record(b'{"m": 5, "final": false}', TelegramPreview) == TelegramPreview(m=5)
    assert decode_record(b'{"chat": "42"}', PairingRequest) == PairingRequest(chat="42")
    facts = decode_record(b'{"mode": "bwrap", "note": "", "sandboxed": true, "network": "none",'
                          b' "reason": "", "tools": ["a"], "agent_tools": []}', ExecutorFacts)
    assert facts is not None and facts.tools == ["a"]


@pytest.mark.parametrize("raw", [b"garbage", b"[]", b'{"status": "paused"}', b'{"m": "x"}'])
def test_an_unreadable_value_is_absent_not_a_crash(raw: bytes) -> None:
    assert decode_record(raw, ToolHold) is None  # a status outside the Literal included


def test_records_round_trip() -> None:
    hold = ToolHold(status="active", released_at=3.0, released_by="owner")
    assert msgspec.json.decode(msgspec.json.encode(hold), type=ToolHold) == hold
