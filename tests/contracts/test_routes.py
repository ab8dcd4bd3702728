"""The route table: every message routed once, every durable reading something routed, subjects
derived from messages, and the README's tables rendered from the table."""

from __future__ import annotations

import typing
from pathlib import Path

import msgspec
import pytest

from contracts import (
    ALL_MESSAGES,
    DeadLetter,
    Intervention,
    Reply,
    ScriptsReverted,
    Sink,
    ToolOutcome,
    TurnRequest,
)
from contracts.routes import (
    ACTORS,
    CLI,
    DURABLES,
    ROUTES,
    STOP_ORDER,
    STREAMS,
    SUPERVISOR,
    Route,
    UnroutedError,
    overlaps,
    publishes,
    route_of,
    subject_for,
    subject_of,
    tokens,
)
from contracts.routes_doc import BEGIN, END, render

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
ROLES = {*ACTORS, SUPERVISOR, CLI}


def test_every_message_type_has_exactly_one_route() -> None:
    routed = [r.type for r in ROUTES]
    assert len(routed) == len(set(routed))
    assert set(routed) == set(ALL_MESSAGES)


def test_an_unrouted_type_is_a_clear_error() -> None:
    class Stray(msgspec.Struct, frozen=True, kw_only=True, tag="stray"):
        id: str

    with pytest.raises(UnroutedError, match="declare it in contracts/routes.py"):
        route_of(Stray)  # type: ignore[arg-type]


def test_subjects_start_with_a_stream_and_producers_are_known_roles() -> None:
    for r in ROUTES:
        assert tokens(r.subject)[0] in STREAMS, r.subject
        assert r.producers and set(r.producers) <= ROLES, r.type
        assert set(r.narrow) <= set(r.producers), r.type
        for role, narrowed in r.narrow.items():  # narrowing only ever restricts
            assert all(overlaps(n, r.pattern) for n in narrowed), (r.type, role)


def _field_type(kind: object, path: str) -> object:
    for name in path.split("."):
        hints = typing.get_type_hints(kind)
        assert name in hints, f"{kind} has no field {name}"
        kind = hints[name]
    return kind


@pytest.mark.parametrize("route", [r for r in ROUTES if r.keys is None], ids=lambda r: r.tag)
def test_every_placeholder_names_a_field_of_the_message(route: Route) -> None:
    for token in tokens(route.subject):
        if token.startswith("{"):
            assert _field_type(route.type, token[1:-1]) is str


def test_subjects_are_derived_from_the_message() -> None:
    sink = Sink(channel="telegram", chat="-100.5")
    reply = Reply(id="r", session="s", turn_id="t", sink=sink, text="hi")
    assert subject_of(reply) == "out.telegram.-100_5"
    turn = TurnRequest(id="t", session="owner", principal="owner", text="x", reply_to=sink)
    assert subject_of(turn) == "in.telegram.-100_5"
    scheduled = TurnRequest(id="task:brief:1", session="task:daily brief", principal="heartbeat",
                            text="x", reply_to=sink, origin="schedule")
    assert subject_of(scheduled) == "in.schedule.daily_brief"
    done = ScriptsReverted(id="rev:reverted", request_id="rev", ok=True, text="ok")
    assert subject_of(done) == "evt.scripts.reverted.rev"
    assert subject_of(ToolOutcome(id="o", tool="web_fetch", ok=True,
                                  duration_ms=1)) == "evt.tool.outcome.web_fetch"
    iv = Intervention(id="i", kind="release", target="my.tool", action="a", reason="r")
    assert subject_of(iv) == "evt.flatline.release.my_tool"
    letter = DeadLetter(id="d", actor="memory", reason="r", subject="s", stream="S",
                        stream_seq=1, deliveries=1, payload="")
    assert subject_of(letter) == "dlq.memory"
    assert subject_for(Reply, channel="telegram", chat="-100.5") == subject_of(reply)
    assert subject_for(ScriptsReverted, request_id="rev") == subject_of(done)


def test_every_durable_reads_routed_subjects_from_its_own_stream() -> None:
    names = [d.name for d in DURABLES]
    assert len(names) == len(set(names))
    for d in DURABLES:
        assert d.stream in STREAMS and d.actor in ROLES, d.name
        if d.raw:
            continue
        for f in d.filters:
            assert tokens(f)[0] == d.stream, (d.name, f)
            assert any(overlaps(f, r.subject) for r in ROUTES), (d.name, f)
        assert d.types(), d.name


def test_every_routed_actor_message_has_a_consumer() -> None:
    # Recorded-only facts (idle sessions, interventions, chat deliveries, memory audit events)
    # and answers the CLI awaits live (memory.answer, home.answer) have none by design.
    recorded = {"session.idle", "flatline.intervention", "channel.delivered", "memory.changed",
                "memory.answer", "home.answer", "audit.event"}
    for r in ROUTES:
        readers = [d for d in DURABLES if not d.raw
                   and any(overlaps(f, r.subject) for f in d.filters)]
        assert readers or r.tag in recorded, r.tag


def test_publish_grants_come_from_the_routes() -> None:
    assert "in.telegram.*" in publishes("channel")
    assert "in.schedule.*" not in publishes("channel")
    assert set(publishes("heartbeat")) == {"in.schedule.*", "out.*.*", "dlq.heartbeat",
                                           "cmd.approval.request",  # the tool review
                                           "cmd.memory.dream"}  # nightly dreaming
    assert "cmd.executor.run" in publishes("planner")
    assert "cmd.executor.run" not in publishes("channel")


def test_conditional_durables_follow_the_config() -> None:
    class Telegram:
        pairing = False

    class Channels:
        telegram = Telegram()

    class Config:
        channels = Channels()

    pairing = next(d for d in DURABLES if d.name == "channel-telegram-pairing")
    assert not pairing.enabled(Config())
    Telegram.pairing = True
    assert pairing.enabled(Config())


def test_actor_names_and_stop_order_agree() -> None:
    assert sorted(ACTORS) == sorted(STOP_ORDER)
    assert STOP_ORDER[0] == "channel"  # intake first


def test_the_readme_tables_are_rendered_from_the_table() -> None:
    start, end = README.index(BEGIN), README.index(END) + len(END)
    assert README[start:end] == render(), (
        "README's subject tables are stale: paste the output of `python -m contracts.routes_doc`")


def test_overlaps() -> None:
    assert overlaps("evt.llm.response.>", "evt.llm.response.{session}")
    assert overlaps("cmd.memory.*", "cmd.memory.save")
    assert not overlaps("cmd.memory.*", "cmd.llm.complete")
    assert not overlaps("evt.approval.resolved.flatline", "evt.llm.response.{session}")
    assert overlaps("evt.approval.resolved.flatline", "evt.approval.resolved.{session}")
    assert not overlaps("cmd.planner.*", "cmd.planner")


def test_every_conditional_durable_names_a_real_config_key(tmp_path: Path) -> None:
    from contracts.config import load_settings

    config = load_settings(tmp_path, {}).config
    for d in DURABLES:
        if d.when:
            assert isinstance(d.enabled(config), bool), d.name  # AttributeError if misspelt
