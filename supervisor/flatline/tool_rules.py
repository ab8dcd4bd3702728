"""Flatline's tool rules: a window of recent outcomes per tool and the verdicts drawn from it.

Pure logic, no I/O: the supervisor loads a window from KV, adds an outcome, asks for a verdict
and saves it back, so a supervisor restart keeps every count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from contracts import ToolOutcome
from contracts.config import FlatlineConfig

MAX_CALLS = 200  # kept per tool, newest last
ERRORS_KEPT = 3


class Call(msgspec.Struct, array_like=True):
    """One tool call as the window remembers it."""

    ts: float
    ok: bool
    timed_out: bool
    id: str


class ToolWindow(msgspec.Struct, kw_only=True):
    """Recent calls of one tool, plus what must outlive the window."""

    tool: str
    calls: list[Call] = msgspec.field(default_factory=list)
    consecutive_failures: int = 0
    last_ok: float = 0.0  # time of the last success ever seen (0: never)
    last_errors: list[str] = msgspec.field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    """A rule fired: which, a sentence for the owner and the model, and the numbers behind it."""

    rule: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(ToolWindow)


def load_window(tool: str, raw: bytes | None) -> ToolWindow:
    if raw:
        try:
            return _dec.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    return ToolWindow(tool=tool)


def dump_window(window: ToolWindow) -> bytes:
    return _enc.encode(window)


def add(window: ToolWindow, outcome: ToolOutcome, now: float, cfg: FlatlineConfig,
        released_at: float = 0.0) -> bool:
    """Add one outcome; False when it was already counted or predates a release."""
    if outcome.ts < released_at or any(c.id == outcome.id for c in window.calls):
        return False
    window.calls.append(Call(ts=outcome.ts, ok=outcome.ok, timed_out=outcome.timed_out,
                             id=outcome.id))
    window.calls.sort(key=lambda c: c.ts)
    horizon = now - cfg.tool_window_secs
    window.calls = [c for c in window.calls if c.ts >= horizon][-MAX_CALLS:]
    if outcome.ok:
        window.consecutive_failures = 0
        window.last_ok = max(window.last_ok, outcome.ts)
    else:
        window.consecutive_failures += 1
        error = outcome.error.strip().splitlines()[-1][:200] if outcome.error.strip() else ""
        if outcome.timed_out and not error:
            error = "timed out"
        window.last_errors = [*window.last_errors, error][-ERRORS_KEPT:]
    return True


def _last_error(window: ToolWindow) -> str:
    last = next((e for e in reversed(window.last_errors) if e), "")
    return f"; last error: {last}" if last else ""


def verdict(window: ToolWindow, cfg: FlatlineConfig) -> Verdict | None:
    """The first rule the window breaks, or None."""
    calls = window.calls
    failed = [c for c in calls if not c.ok]
    timeouts = [c for c in calls if c.timed_out]
    minutes = cfg.tool_window_secs / 60
    numbers = {"calls_in_window": len(calls), "failed_in_window": len(failed),
               "timeouts_in_window": len(timeouts),
               "consecutive_failures": window.consecutive_failures,
               "last_errors": list(window.last_errors)}
    if window.consecutive_failures >= cfg.tool_consecutive_failures:
        return Verdict("consecutive_failures",
                       f"it failed {window.consecutive_failures} times in a row{_last_error(window)}",
                       numbers)
    if len(timeouts) >= cfg.tool_timeouts:
        return Verdict("timeouts",
                       f"it timed out {len(timeouts)} times in the last {minutes:g} minutes",
                       numbers)
    if len(calls) >= cfg.tool_window_min_calls and len(failed) / len(calls) >= cfg.tool_failure_rate:
        return Verdict("failure_rate",
                       f"{len(failed)} of its last {len(calls)} calls failed (in "
                       f"{minutes:g} minutes){_last_error(window)}", numbers)
    return None


def regression(window: ToolWindow, commit_ts: float, cfg: FlatlineConfig) -> bool:
    """It worked before the commit and every call since the commit failed (enough of them)."""
    if not window.last_ok or window.last_ok >= commit_ts:
        return False
    since = [c for c in window.calls if c.ts >= commit_ts]
    return len(since) >= cfg.tool_regression_failures and not any(c.ok for c in since)
