"""The model diagnosis of a crash loop: only with models.roles.flatline, within its own daily
budget, redacted, and announced to the owner as advice."""

from __future__ import annotations

import json
from typing import Any

from bus import Bus
from contracts import LlmResponse, Usage
from state import budget
from supervisor.flatline.diagnosis import PREFIX, Diagnoser, day_key
from supervisor.flatline.policy import Flatline
from supervisor.process.announce import Announcer


async def cmd_payloads(bus: Bus) -> list[dict[str, Any]]:
    info = await bus.js.stream_info(bus.subjects.stream_cmd)
    if not info.state.messages:
        return []
    return [json.loads((await bus.js.get_msg(bus.subjects.stream_cmd, seq)).data or b"")
            for seq in range(info.state.first_seq, info.state.last_seq + 1)]


async def test_no_flatline_model_means_no_diagnosis(bus: Bus, settings_for: Any) -> None:
    settings = settings_for()
    why = await Diagnoser(settings, bus, Announcer(settings, bus)).ask("executor", "boom")
    assert "models.roles.flatline" in why
    assert await cmd_payloads(bus) == []


async def test_a_crash_loop_is_diagnosed_by_its_own_model_within_its_budget(
    bus: Bus, settings_for: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SOME_API_KEY", "sk-live-secretvalue123456")
    settings = settings_for(WM__MODELS__ROLES=json.dumps({"flatline": "openai/cheap"}),
                            WM__SUPERVISOR__FLATLINE__DIAGNOSIS_TOKENS_PER_DAY="1000")
    fl = Flatline(settings, bus, Announcer(settings, bus))
    log = "ImportError: no module named foo\nkey=sk-live-secretvalue123456\n"
    assert await fl.diagnoser.ask("executor", log) == ""
    [request] = [p for p in await cmd_payloads(bus) if p["type"] == "llm.request"]
    assert request["role"] == "flatline" and request["session"] == "flatline-diagnosis"
    assert "ImportError" in request["messages"][1]["content"]
    assert "sk-live-secretvalue123456" not in request["messages"][1]["content"]

    answer = LlmResponse(id="r", session="flatline-diagnosis", turn_id=request["turn_id"],
                         step=0, request_id=request["id"], model="openai/cheap",
                         content="The executor cannot import foo; reinstall it.",
                         usage=Usage(input_tokens=900, output_tokens=200))
    await fl.on_event(answer)
    out = await bus.js.stream_info(bus.subjects.stream_out)
    notice = json.loads((await bus.js.get_msg(bus.subjects.stream_out, out.state.last_seq)).data
                        or b"")
    assert notice["text"].startswith("Flatline's diagnosis of the executor actor")
    assert "cannot import foo" in notice["text"]
    assert await budget.used(bus, day_key()) == 1100
    assert "budget is spent" in await fl.diagnoser.ask("executor", log)
    assert request["turn_id"].startswith(PREFIX)
