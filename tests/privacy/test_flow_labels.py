"""Labels beyond turns (seed 003 §4.3): memories keep the label of the turn that saved them and
recall respects the lattice; web pages are labelled; the owner's `owner_acknowledged_cloud_risk`
lets sensitive (never regulated) data reach a cloud model, audited.

Every actor in-process against the real nats-server; the "cloud" is the scripted OpenAI-protocol
server, the local model the scripted Ollama one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest

from actors.llm.routing import acknowledged, route
from actors.memory._labels import visible
from bus import Bus
from contracts import MemoryHit
from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM
from tests.privacy.helpers import audited
from tests.privacy.test_labels import CALENDAR
from tests.privacy.test_webhook import SECRET, endpoint, hook_settings, post

SettingsFor = Callable[..., Settings]


def test_recall_reads_no_label_above_the_turn_and_none_its_chat_may_not_see(
    settings_for: SettingsFor,
) -> None:
    config = settings_for().config  # owner.sink terminal:owner, no sink rules
    hits = [MemoryHit(id=str(i), kind="fact", content=label, label=label)
            for i, label in enumerate(("public", "internal", "sensitive", "regulated:health"))]
    assert [h.label for h in visible(hits, "internal", "terminal:owner", config, 9)] == [
        "public", "internal"]
    assert [h.label for h in visible(hits, "regulated:health", "terminal:owner", config, 9)] == [
        "public", "internal", "sensitive", "regulated:health"]
    assert [h.label for h in visible(hits, "regulated:health", "slack:C1", config, 9)] == [
        "public", "internal"]  # no write down to a sink not cleared
    assert [h.label for h in visible(hits, "nonsense", "", config, 9)] == ["public"]
    assert len(visible(hits, "", "", config, 9)) == 4  # an older producer: no limits asked


def test_the_cloud_risk_acknowledgement_covers_sensitive_only() -> None:
    chain = ["openai/gpt-4o"]
    assert acknowledged("webhook:mail", ["webhook:*"]) and not acknowledged("", ["*"])
    ok = route("sensitive", chain, "", ["ollama"], cloud_ok=True)
    assert ok.chain == chain and ok.acknowledged
    assert route("regulated:health", chain, "", ["ollama"], cloud_ok=True).refusal
    assert route("secret", chain, "", ["ollama"], cloud_ok=True).refusal


@pytest.fixture
async def ollama() -> AsyncIterator[FakeLLM]:
    server = FakeLLM()
    await server.start("ollama")
    yield server
    await server.stop()


async def test_a_sensitive_memory_is_not_recalled_into_an_internal_turn(
    fake: FakeLLM, ollama: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A memory saved in a sensitive conversation (after the owner's calendar tool, ceiling
    sensitive) is labelled sensitive: found while the conversation is sensitive (on the local
    model), but after /reset the owner's ordinary turn neither recalls it nor finds it with
    memory_search, so it never reaches the cloud model."""
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__MODELS__LOCAL="ollama/test-model",
                            WM__EXECUTOR__TOOL_LABELS='{"calendar": "sensitive"}')
    scripts = settings.home / "scripts"
    (scripts / "calendar.py").write_text(CALENDAR)
    (scripts / "calendar.json").write_text(json.dumps(
        {"name": "calendar", "description": "today's events", "parameters": {"type": "object"}}))
    async with actors(settings, *ALL), chat(settings) as owner:
        assert "dentist" in await owner.ask("tool:calendar {}", timeout=90)
        assert "Saved as memory" in await owner.ask("remember: root canal at the dentist Friday",
                                                    timeout=90)
        assert "root canal" in await owner.ask("recall: root canal", timeout=90)
        assert "afresh" in await owner.ask("/reset", timeout=60)
        after = await owner.ask("recall: root canal", timeout=90)
    assert "No memories match" in after
    # the cloud model never saw the memory (only the owner's own words "recall: root canal")
    assert "dentist Friday" not in json.dumps(fake.requests)
    assert "dentist Friday" in json.dumps(ollama.requests)


async def test_17_04_the_owner_acknowledged_cloud_risk_for_a_source(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed #4's other half (sensitive data goes to a cloud model only when the template
    says `owner_acknowledged_cloud_risk`): the task template of the webhook source `mail`
    says so; its sensitive delivery is answered by the cloud model, audited as
    routing.cloud_acknowledged; another source under the default template stays refused.
    (`privacy.owner_acknowledged_cloud_risk`, the same per principal, is unit-tested above.)"""
    monkeypatch.setenv("WINTERMUTE_WEBHOOK_SECRET", SECRET)
    mail = {"mail": {"principals": ["webhook:mail"],
                     "plan_then_execute": True, "description": "An e-mail arrived.",
                     "data_ceiling": "sensitive", "owner_acknowledged_cloud_risk": True}}
    settings = hook_settings(settings_for, WM__CHANNELS__WEBHOOK__LABEL="sensitive",
                             WM__PRIVACY__TEMPLATES=json.dumps(mail))
    async with actors(settings, *ALL) as running, chat(settings) as terminal:
        assert (await post((await endpoint(running)) + "/mail", {"text": "Q3 budget draft"}))[0] == 202
        reply = await terminal.next(timeout=60)
        # one per model call of the turn (plan-then-execute: the plan and the answer)
        events = await audited(bus, lambda e: e.decision == "routing.cloud_acknowledged")
        assert (await post((await endpoint(running)) + "/other", {"text": "Q4 plans"}))[0] == 202
        refused = await terminal.next(timeout=60)
    assert "Q3 budget draft" in reply.text
    assert all(e.principal == "webhook:mail" and e.refs["label"] == "sensitive"
               and e.refs["template"] == "mail" for e in events)
    assert "labelled sensitive" in refused.text and "Q4 plans" not in json.dumps(fake.requests)
