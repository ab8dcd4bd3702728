"""Re-driving recorded turns through a real planner process on the scratch prefix.

`replay --rerun` provisions `<prefix>_replay` (streams, buckets, the planner's durables),
spawns the planner process (`python -m actors planner`) on it (as the `cli` NATS user, which
owns that prefix) with a private home holding the live config, agent.toml, AGENTS.md and
USER.md and the IDENTITY.md the recording saw, publishes each recorded turn, and answers the
planner's memory, model and tool requests from the recording, comparing each request with the
recorded one. With a live
model (`--model`), a real llm actor runs on the scratch prefix too and answers instead.
Nothing is published on the instance's own prefix; the scratch prefix is deleted afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path

import msgspec

from bus import Bus, Delivery, ensure_consumer
from bus.codec import decode
from bus.permissions import scratch_prefix
from contracts import (
    LlmRequest,
    LlmResponse,
    Recall,
    Recalled,
    Reply,
    ToolCall,
    ToolRequest,
    ToolResult,
)
from contracts.config import Settings
from contracts.replay import SessionSeed
from supervisor.cli.replay.compare import call_text, compare_answers, compare_requests, identity_of
from supervisor.cli.replay.record import Turn
from supervisor.cli.replay.results import RerunBusy, Step, TurnResult, session_key
from supervisor.process.procs import actor_command, actor_env, pdeathsig

#: What the owner edits and a re-run therefore reads live (IDENTITY.md comes from the recording).
LIVE_FILES = ("config.toml", "agent.toml", "AGENTS.md", "USER.md")


async def drop_prefix(bus: Bus) -> None:
    """Delete every stream and bucket of the scratch prefix that exists (never call this with
    an instance's own prefix)."""
    for spec in bus.subjects.streams():
        await bus.delete_stream(spec.name)
    for bucket in bus.subjects.buckets():
        await bus.delete_bucket(bucket.name)


class Scratch:
    """A planner (and with a live model, an llm actor) on the scratch prefix, for re-runs."""

    def __init__(self, settings: Settings, url: str, login: dict[str, str], *,
                 model: str = "", timeout: float = 30.0, spent_today: int = 0) -> None:
        self.settings, self.url, self.login = settings, url, login
        self.model, self.timeout = model, timeout
        self.spent_today = spent_today  # the instance's tokens today: a live model's limit
        self.prefix = scratch_prefix(settings.config.nats.prefix)
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.home = Path(tempfile.mkdtemp(prefix="wintermute-replay-"))
        self._turn: Turn | None = None
        self._result: TurnResult | None = None
        self._done = asyncio.Event()

    async def __aenter__(self) -> Scratch:
        self.bus = await Bus(self.url, self.prefix, name="wintermute-replay").connect(
            timeout=5, **self.login)
        try:
            await self._check_alone()
        except BaseException:
            await self.bus.close()  # and leave the other re-run's prefix alone
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        await drop_prefix(self.bus)  # leftovers of an interrupted re-run
        await self.bus.provision()
        await self._provision_durables()
        if self.spent_today:
            from state.budget import add, day_key

            await add(self.bus, day_key(tz=self.settings.config.budget.timezone),
                      self.spent_today, "replay")
        for name in LIVE_FILES:
            if (self.settings.home / name).is_file():
                shutil.copy2(self.settings.home / name, self.home / name)
        self._tap = await self.bus.subscribe(f"{self.prefix}.>", self._on_msg)
        await self._spawn("planner", str(self.home))
        if self.model:
            await self._spawn("llm", str(self.settings.home), WM__MODELS__DEFAULT=self.model,
                              WM__MODELS__FALLBACK="[]")
        await self._ready()

    async def _ready(self, deadline: float = 120.0) -> None:
        """Wait until every spawned actor reports health, so a slow start (a loaded machine,
        the llm's SDK imports) is not counted against the first turn's timeout."""
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline
        waiting = set(self.procs)
        while waiting:
            if exited := self._exited():
                raise RerunBusy(f"The re-run could not start: {exited}")
            for name in list(waiting):
                with contextlib.suppress(Exception):
                    if await self.bus.kv_get(self.bus.subjects.kv_health, name):
                        waiting.discard(name)
            if waiting and loop.time() > until:
                tail = self._log_tail()
                raise RerunBusy(f"The re-run's {', '.join(sorted(waiting))} did not start within "
                                f"{deadline:.0f}s (the planner's log: {tail}).")
            if waiting:
                await asyncio.sleep(0.2)

    async def __aexit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        with contextlib.suppress(Exception):
            await self._tap.stop()
        with contextlib.suppress(Exception):
            await drop_prefix(self.bus)
        await self.bus.close()
        shutil.rmtree(self.home, ignore_errors=True)

    async def _check_alone(self) -> None:
        """Refuse while another re-run's planner reports health on the (single) scratch prefix."""
        from contracts import Health

        try:
            health = await self.bus.kv_get_as(self.bus.subjects.kv_health, "planner", Health)
        except Exception:  # noqa: BLE001 - no health bucket: nothing is running there
            return
        if health is not None and time.time() - health.ts < 10:
            raise RerunBusy(
                f"Another `wintermute replay --rerun` is using {self.prefix} right now; "
                "wait for it to finish (one re-run at a time per instance).")

    async def _provision_durables(self) -> None:
        # The supervisor's table of durables, computed for the scratch prefix.
        from supervisor.process.provision import actor_subscriptions

        nats = msgspec.structs.replace(self.settings.config.nats, prefix=self.prefix)
        cfg = msgspec.structs.replace(self.settings.config, nats=nats)
        subs = actor_subscriptions(msgspec.structs.replace(self.settings, config=cfg))
        for name in ("planner", "llm") if self.model else ("planner",):
            for sub in subs.get(name, []):
                await ensure_consumer(self.bus, sub)

    async def _spawn(self, name: str, home: str, **extra: str) -> None:
        env = actor_env(name, self.url, home, self.login or None)  # as the cli user
        env.update(WM__NATS__PREFIX=self.prefix, **extra)
        log = (self.home / f"{name}.log").open("wb")
        self.procs[name] = await asyncio.create_subprocess_exec(
            *actor_command(name), env=env, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL,
            preexec_fn=pdeathsig)
        log.close()

    def _exited(self) -> str:
        for name, proc in self.procs.items():
            if proc.returncode is not None:
                tail = (self.home / f"{name}.log").read_text(errors="replace")[-800:]
                return f"the {name} process exited with code {proc.returncode}: {tail.strip()}"
        return ""

    # -- one turn ----------------------------------------------------------------------------

    async def run_turn(self, turn: Turn, seed: bool) -> TurnResult:
        """Publish the recorded turn to the scratch planner and compare until it replies."""
        result = TurnResult(turn.id, turn.session, turn.kind, turn.text)
        first = turn.llm_requests.get(0)
        if first is None:
            result.steps.append(Step("run", "SKIPPED", detail=[
                "the recording has no model call for this turn (WM_CMD keeps 7 days); "
                "not re-run"]))
            return result
        identity = identity_of(first)
        if identity is None:
            (self.home / "IDENTITY.md").unlink(missing_ok=True)
        else:
            (self.home / "IDENTITY.md").write_text(identity + "\n")
        s = self.bus.subjects
        await self.bus.kv_put(s.kv_state, "tools", msgspec.json.encode(first.tools))
        if seed:
            history = SessionSeed(session=turn.session, history=first.messages[1:-1])
            await self.bus.kv_put(s.kv_sessions, session_key(turn.session), history)
        self._turn, self._result = turn, result
        self._done.clear()
        await self.bus.send(turn.start.msg)  # in.<channel>.<chat>, in.schedule.*, evt.tool...
        await self._wait(result)
        self._turn = None
        if self._done.is_set():
            await self._saved(turn)
        return result

    async def _saved(self, turn: Turn, deadline: float = 15.0) -> None:
        """Wait until the planner saved the session after the reply (it publishes first), so
        the next turn's seed is not overwritten by that save."""
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline
        s = self.bus.subjects
        while loop.time() < until and not self._exited():
            state = await self.bus.kv_get_as(s.kv_sessions, session_key(turn.session),
                                             SessionSeed)
            if state is not None and turn.id in state.recent:
                return
            await asyncio.sleep(0.05)

    async def _wait(self, result: TurnResult) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while not self._done.is_set():
            if exited := self._exited():
                result.steps.append(Step("run", "STALLED", detail=[exited]))
                return
            if loop.time() > deadline:
                result.steps.append(Step("run", "STALLED", detail=[
                    f"no reply within {self.timeout:.0f}s (the planner's log: "
                    f"{self._log_tail()})"]))
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._done.wait(), 0.5)

    def _log_tail(self) -> str:
        path = self.home / "planner.log"
        return path.read_text(errors="replace")[-400:].strip() if path.exists() else "empty"

    # -- answering the planner ------------------------------------------------------------

    async def _on_msg(self, delivery: Delivery) -> None:
        turn, result = self._turn, self._result
        if turn is None or result is None or self._done.is_set():
            return
        try:
            msg = decode(delivery.data)
        except msgspec.DecodeError:
            return
        match msg:
            case Recall():
                recalled = turn.recalled or Recalled(
                    id=f"{msg.id}:recalled", session=msg.session, turn_id=msg.turn_id)
                await self.bus.send(recalled)
            case LlmRequest(for_call=None):
                await self._on_model_request(turn, result, msg)
            case LlmResponse() if self.model:
                old = turn.llm_responses.get(msg.step)
                diffs = compare_answers(old, msg)
                result.tokens += msg.usage.input_tokens + msg.usage.output_tokens
                result.steps.append(Step("model answer", "DIFFERENT" if diffs else "same",
                                         msg.step, diffs, live=True))
            case ToolRequest():
                await self._on_tool(turn, result, msg)
            case Reply():
                old_text = turn.reply.text if turn.reply else None
                same = old_text == msg.text
                result.steps.append(Step("reply", "same" if same else "DIFFERENT", detail=[] if
                                         same else [f"recorded: {old_text!r}",
                                                    f"rerun:    {msg.text!r}"],
                                         live=bool(self.model)))
                self._done.set()

    async def _on_model_request(self, turn: Turn, result: TurnResult, msg: LlmRequest) -> None:
        old = turn.llm_requests.get(msg.step)
        answer = turn.llm_responses.get(msg.step)
        if old is None:
            result.steps.append(Step("model request", "DIVERGED", msg.step, [
                "the recording has no model call at this step"]))
            if not self.model:
                self._done.set()
            return
        diffs = compare_requests(old, msg)
        result.steps.append(Step("model request", "DIFFERENT" if diffs else "same", msg.step,
                                 diffs))
        if self.model:
            return  # the live llm actor answers
        if answer is None:
            result.steps.append(Step("model answer", "DIVERGED", msg.step, [
                "the recording has no answer to this call"]))
            self._done.set()
            return
        await self.bus.send(answer)

    async def _on_tool(self, turn: Turn, result: TurnResult, msg: ToolRequest) -> None:
        old = turn.tool_requests.get(msg.id)
        recorded = turn.tool_results.get(msg.id)
        same_call = old is not None and (old.name, old.arguments) == (msg.name, msg.arguments)
        if same_call and recorded is not None:
            result.steps.append(Step(f"tool call {msg.name}", "answered", msg.step,
                                     live=bool(self.model)))
            # A live model names its calls itself: the recorded result answers this one.
            answer = msgspec.structs.replace(recorded, call_id=msg.call_id)
            await self.bus.send(answer)
            return
        was = f"recorded {old.name}({msgspec.json.encode(old.arguments).decode()})" if old else \
            "not in the recording"
        now = call_text(ToolCall(id=msg.call_id, name=msg.name, arguments=msg.arguments))
        if not self.model:
            result.steps.append(Step(f"tool call {msg.name}", "DIVERGED", msg.step,
                                     [f"{now}: {was}; stopping"]))
            self._done.set()
            return
        result.steps.append(Step(f"tool call {msg.name}", "DIFFERENT", msg.step,
                                 [f"{now}: {was}; not run (a replay never runs tools)"],
                                 live=True))
        await self.bus.send(ToolResult(
            id=f"{msg.id}:result", session=msg.session, turn_id=msg.turn_id, step=msg.step,
            call_id=msg.call_id, name=msg.name, ok=False,
            output="Not run: this is a replay, which never runs tools, and the recording has "
                   "no result for this call."))

