"""`wintermute approve`/`deny` report what happened and exit non-zero when it did not."""

from __future__ import annotations

from typing import Any

import pytest

from actors.approval.actor import short_id
from bus import Bus
from contracts import ApprovalRequest, Sink
from supervisor.cli.approve import decide
from tests.actors.harness import actors


async def ask_owner(bus: Bus, request_id: str) -> str:
    req = ApprovalRequest(id=request_id, session="terminal:owner", summary="rm -rf ./x",
                          reason="risky", sink=Sink(channel="terminal", chat="owner"))
    await bus.publish(bus.subjects.cmd("approval", "request"), req)
    return short_id(request_id)


async def test_approve_then_again_then_unknown(
    settings_for: Any, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for()
    async with actors(settings, "approval", "channel"):
        aid = await ask_owner(bus, "req-1")
        assert await decide(settings, aid, True, "owner") == 0
        assert f"Approved {aid}." in capsys.readouterr().out

        assert await decide(settings, aid, False, "owner") == 1  # single use
        err = capsys.readouterr().err
        assert aid in err and "unknown, already used or expired" in err

        assert await decide(settings, "NoSuchId", True, "owner") == 1
        assert "Approval NoSuchId is unknown" in capsys.readouterr().err

        denied = await ask_owner(bus, "req-2")
        assert await decide(settings, denied, False, "owner") == 0
        assert f"Denied {denied}." in capsys.readouterr().out


async def test_a_terminal_chat_that_is_not_the_owner_is_told_so(
    settings_for: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await decide(settings_for(), "abcdefgh", True, "guest") == 1
    err = capsys.readouterr().err
    assert "terminal:guest is not in owner.principals" in err


async def test_no_approval_actor_means_a_bounded_wait_and_a_reason(
    settings_for: Any, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = settings_for()
    async with actors(settings, "channel"):
        assert await decide(settings, "abcdefgh", True, "owner", timeout=3) == 1
    assert "No answer about approval abcdefgh within 3 s" in capsys.readouterr().err
