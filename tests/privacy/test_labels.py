"""Security labels (seed 003 §4), label-based model routing (§11.1) and seed test #4.

The lattice and the routing rule are pure; the end-to-end tests run every actor in-process
against the real nats-server, a webhook delivery over real HTTP, and scripted model servers
speaking the OpenAI (the "cloud") and Ollama (the local model) protocols.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import msgspec
import pytest

from actors.llm.routing import route
from bus import Bus
from bus.codec import decode
from contracts import Sink, TurnRequest, labels
from contracts.config import ConfigError, Settings
from tests.actors.harness import ALL, actors, chat
from tests.capability import open_templates
from tests.fakes.llm_servers import FakeLLM
from tests.privacy.helpers import audited
from tests.privacy.test_webhook import SECRET, endpoint, hook_settings, post

SettingsFor = Callable[..., Settings]


def test_the_lattice_orders_labels_and_joins_to_the_higher() -> None:
    order = ["public", "internal", "sensitive", "regulated:health", "secret"]
    for low, high in zip(order, order[1:], strict=False):
        assert labels.join(low, high) == high and labels.dominates(high, low)
        assert not labels.dominates(low, high)
    assert labels.join("regulated:health", "regulated:finance") == "secret"
    assert labels.join("regulated:health", "regulated:health") == "regulated:health"
    assert [labels.local_only(x) for x in order] == [False, False, True, True, True]
    with pytest.raises(labels.LabelError, match="is not a security label"):
        labels.parse("top-secret")


def test_a_forged_label_on_the_bus_fails_validation() -> None:
    """A label outside the lattice in any turn fails to decode: the consumer dead-letters it
    (tests/bus/test_consumer.py covers that path) and no actor acts on it."""
    turn = TurnRequest(id="t", session="s", principal="p", text="x",
                       reply_to=Sink(channel="terminal", chat="owner"))
    raw = msgspec.to_builtins(turn)
    assert decode(json.dumps(raw).encode()) == turn  # the default label is internal
    assert turn.label == "internal"
    raw["label"] = "whatever-i-like"
    with pytest.raises(msgspec.ValidationError, match="label"):
        decode(json.dumps(raw).encode())


def test_routing_keeps_sensitive_data_on_local_models() -> None:
    chain = ["openai/gpt-4o", "ollama/llama3.2"]
    assert route("internal", chain, "", ["ollama"]).chain == chain
    local = route("sensitive", chain, "", ["ollama"])
    assert local.chain == ["ollama/llama3.2"] and local.local_only
    assert route("regulated:health", ["openai/x"], "ollama/m", ["ollama"]).chain == ["ollama/m"]
    refused = route("sensitive", ["openai/gpt-4o"], "", ["ollama"])
    assert refused.chain == [] and 'local = "ollama/llama3.2"' in refused.refusal
    assert "never sent" in route("secret", chain, "ollama/m", ["ollama"]).refusal


def test_the_webhook_label_must_be_a_label(settings_for: SettingsFor) -> None:
    with pytest.raises(ConfigError, match="channels.webhook.label"):
        settings_for(WM__CHANNELS__WEBHOOK__ENABLED="true",
                     WM__CHANNELS__WEBHOOK__SINK="terminal:owner",
                     WM__CHANNELS__WEBHOOK__LABEL="confidential")


@pytest.fixture
async def ollama() -> AsyncIterator[FakeLLM]:
    server = FakeLLM()
    await server.start("ollama")
    yield server
    await server.stop()


async def test_17_04_sensitive_data_is_refused_without_a_local_model(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed #4 (a sensitive email body is not sent to a cloud LLM): here a webhook source
    configured as `sensitive`; the only model is the cloud one, so the turn is refused with a
    sentence saying how to add a local model, audited, and the cloud model sees nothing."""
    monkeypatch.setenv("WINTERMUTE_WEBHOOK_SECRET", SECRET)
    settings = hook_settings(settings_for, WM__CHANNELS__WEBHOOK__LABEL="sensitive")
    async with actors(settings, *ALL) as running, chat(settings) as terminal:
        status, _ = await post((await endpoint(running)) + "/mail",
                               {"text": "Lab results: glucose 5.4 mmol/L"})
        assert status == 202
        reply = await terminal.next(timeout=60)
        [event] = await audited(bus, lambda e: e.decision == "routing.refused")
    assert "labelled sensitive" in reply.text and "local" in reply.text
    assert "glucose" not in json.dumps(fake.requests)
    assert event.actor == "llm" and event.refs["label"] == "sensitive"


async def test_sensitive_data_goes_to_the_local_model_and_the_owner_chat_to_the_cloud(
    fake: FakeLLM, ollama: FakeLLM, settings_for: SettingsFor, bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `models.local` set, the sensitive webhook turn is answered by the local model
    (audited as routing.local) while the owner's ordinary turn still goes to the configured
    cloud model: no new approvals or detours for the owner."""
    monkeypatch.setenv("WINTERMUTE_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    settings = hook_settings(settings_for, WM__CHANNELS__WEBHOOK__LABEL="sensitive",
                             WM__MODELS__LOCAL="ollama/test-model")
    async with actors(settings, *ALL) as running, chat(settings) as terminal:
        status, _ = await post((await endpoint(running)) + "/mail",
                               {"text": "Lab results: glucose 5.4 mmol/L"})
        assert status == 202
        reply = await terminal.next(timeout=60)
        assert "glucose" in reply.text
        owner = await terminal.ask("what's the weather like")
        await audited(bus, lambda e: e.decision == "routing.local")
    assert owner == "echo: what's the weather like"
    assert "glucose" in json.dumps(ollama.requests)
    assert "glucose" not in json.dumps(fake.requests)
    assert "weather" in json.dumps(fake.requests) and "weather" not in json.dumps(ollama.requests)


async def test_escalating_sensitive_data_stays_on_local_models(
    fake: FakeLLM, ollama: FakeLLM, settings_for: SettingsFor, bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The escalate tool hands the turn's data to the oracle model: the tool call carries the
    turn's label, so a sensitive turn's question goes to the local model even though the
    configured oracle is a cloud one. (The shipped webhook template offers no escalate and
    plans without the payload; this home's template lets the payload drive the call.)"""
    monkeypatch.setenv("WINTERMUTE_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    open_templates(settings_for().home, '[privacy.templates.webhook]\nkinds = ["webhook"]\n'
                   'tools = ["escalate"]\ndata_ceiling = "sensitive"\n')
    settings = hook_settings(settings_for, WM__CHANNELS__WEBHOOK__LABEL="sensitive",
                             WM__MODELS__LOCAL="ollama/test-model",
                             WM__MODELS__ROLES='{"oracle": "openai/test-model"}')
    ask = 'tool:escalate {"question": "is glucose 5.4 mmol/L normal?"}'
    async with actors(settings, *ALL) as running, chat(settings) as terminal:
        status, _ = await post((await endpoint(running)) + "/mail", {"text": ask})
        assert status == 202
        reply = await terminal.next(timeout=60)
        oracle = await audited(bus, lambda e: e.decision == "routing.local"
                               and e.refs["request"].endswith(":escalate"))
    assert "Tool said" in reply.text
    assert oracle and oracle[0].refs["label"] == "sensitive"
    assert "glucose" not in json.dumps(fake.requests)


CALENDAR = ("import json\n"
            "print(json.dumps({'label': 'public', 'events': ['dentist 09:00, root canal']}))\n")


async def test_17_05_a_tool_claiming_public_is_held_to_its_ceiling(
    fake: FakeLLM, settings_for: SettingsFor, bus: Bus,
) -> None:
    """Seed #5 (a tool returns `label: public` for calendar data; the kernel overrides with
    its ceiling `sensitive`): an agent-created `calendar` tool claims public; the owner's
    ceiling `executor.tool_labels.calendar = sensitive` wins (audited as label.override), the
    turn becomes sensitive, and with no local model its data never reaches the cloud model."""
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__EXECUTOR__TOOL_LABELS='{"calendar": "sensitive"}')
    scripts = settings.home / "scripts"
    (scripts / "calendar.py").write_text(CALENDAR)
    (scripts / "calendar.json").write_text(json.dumps(
        {"name": "calendar", "description": "today's events", "parameters": {"type": "object"}}))
    async with actors(settings, *ALL), chat(settings) as owner:
        reply = await owner.ask("tool:calendar {}", timeout=90)
        [override] = await audited(bus, lambda e: e.decision == "label.override")
        [refused] = await audited(bus, lambda e: e.decision == "routing.refused")
    assert "labelled sensitive" in reply
    assert (override.refs["claimed"], override.refs["label"]) == ("public", "sensitive")
    assert refused.refs["label"] == "sensitive"
    assert "dentist" not in json.dumps(fake.requests)


def test_tool_label_ceilings_must_be_labels(settings_for: SettingsFor) -> None:
    with pytest.raises(ConfigError, match="executor.tool_labels.calendar"):
        settings_for(WM__EXECUTOR__TOOL_LABELS='{"calendar": "private"}')


def test_sinks_are_cleared_per_label() -> None:
    rules = {"regulated:health": ["telegram:111"], "sensitive": ["slack:*", "telegram:111"]}
    assert labels.cleared("internal", "slack:C1", {}, "telegram:111")
    assert labels.cleared("sensitive", "slack:C9", rules, "telegram:111")
    assert not labels.cleared("regulated:health", "slack:C9", rules, "telegram:111")
    assert labels.cleared("regulated:health", "telegram:111", rules, "terminal:owner")
    assert labels.cleared("regulated:finance", "terminal:owner", rules, "terminal:owner")
    assert not labels.cleared("regulated:finance", "telegram:111", rules, "terminal:owner")
    assert not labels.cleared("secret", "terminal:owner", {}, "terminal:owner")


async def test_17_07_regulated_data_reaches_only_cleared_sinks(
    fake: FakeLLM, ollama: FakeLLM, settings_for: SettingsFor, bus: Bus,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed #7 (regulated:health data cannot egress to WhatsApp or Slack, only to the owner's
    own sink): a webhook source labelled regulated:health whose replies are configured to go
    to a team chat; the answer is withheld there (audited as sink.denied) because only the
    owner's sink is cleared, and nothing of the data reaches the chat."""
    monkeypatch.setenv("WINTERMUTE_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    settings = hook_settings(settings_for, WM__CHANNELS__WEBHOOK__LABEL="regulated:health",
                             WM__CHANNELS__WEBHOOK__SINK="terminal:team",
                             WM__MODELS__LOCAL="ollama/test-model")
    async with actors(settings, *ALL) as running, chat(settings, "team") as team:
        status, _ = await post((await endpoint(running)) + "/lab",
                               {"text": "HbA1c 6.9% for patient 12"})
        assert status == 202
        reply = await team.next(timeout=60)
        [denied] = await audited(bus, lambda e: e.decision == "sink.denied")
    assert "withheld" in reply.text and "HbA1c" not in reply.text
    assert denied.actor == "planner" and denied.refs["sink"] == "terminal:team"
    assert denied.refs["label"] == "regulated:health"


async def test_a_sink_rule_clears_a_chat_for_a_label(
    fake: FakeLLM, ollama: FakeLLM, settings_for: SettingsFor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WINTERMUTE_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    settings = hook_settings(settings_for, WM__CHANNELS__WEBHOOK__LABEL="regulated:health",
                             WM__CHANNELS__WEBHOOK__SINK="terminal:team",
                             WM__MODELS__LOCAL="ollama/test-model",
                             WM__PRIVACY__SINK_RULES='{"regulated:*": ["terminal:team"]}')
    async with actors(settings, *ALL) as running, chat(settings, "team") as team:
        assert (await post((await endpoint(running)) + "/lab", {"text": "HbA1c 6.9%"}))[0] == 202
        reply = await team.next(timeout=60)
    assert "HbA1c" in reply.text
