"""The llm actor: the only process holding model keys. Routes, falls back, counts tokens."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import msgspec

from actors.base import Actor
from actors.llm.routing import acknowledged, route
from bus import tracing
from contracts import LlmPreview, LlmRequest, LlmResponse, templates
from contracts.audit import AuditOutcome
from kit.secrets import load_dotenv
from state import budget

if TYPE_CHECKING:
    from actors.llm.breaker import Transition
    from actors.llm.providers import OnText

log = logging.getLogger(__name__)

NO_MODEL = (
    "No language model is configured, so I can't answer yet. Set [models] default = "
    '"openai/gpt-4o-mini" (or anthropic/…, ollama/…) in {home}/config.toml or '
    "WM__MODELS__DEFAULT, put the provider's key (e.g. OPENAI_API_KEY) in {home}/.env, "
    "and restart `wintermute up`. For a local OpenAI-compatible server (llama.cpp, vLLM, "
    "LM Studio) set OPENAI_BASE_URL=http://127.0.0.1:8080/v1 in .env instead of a key, "
    'with default = "openai/<the model name it serves>"; for Ollama set OLLAMA_HOST.'
)

#: Preview cadence for a request that asks for a preview without saying how often.
DEFAULT_PREVIEW_INTERVAL = 1.5

PROVIDER_VARS = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
    "OPENAI_BASE_URL", "OLLAMA_HOST", "OLLAMA_API_KEY",
)


class LlmActor(Actor):
    name = "llm"
    inbox = LlmRequest

    async def on_start(self) -> None:
        # Keys live in .env; only this process reads the provider ones into its environment.
        for key, value in load_dotenv(self.home / ".env").items():
            if key in PROVIDER_VARS and key not in os.environ:
                os.environ[key] = value
        self.calls = 0
        from actors.llm.breaker import Breakers

        b = self.config.models.breaker
        self.breakers = Breakers(b.failure_threshold, b.window_secs, b.cooldown_secs)
        # The SDKs (35-65 MB, 0.3-1 s each) load on the first call; with models.preload_sdks
        # soon after this actor reported healthy (start-up is not kept waiting either way).
        if self.config.models.preload_sdks:
            self._warm = asyncio.create_task(self._import_sdks(), name="import-sdks")

    async def _import_sdks(self, after: float = 1.0) -> None:
        from actors.llm.providers import load_sdk

        await asyncio.sleep(after)  # the first health report goes out meanwhile
        for spec in self.chain("default"):
            try:
                await load_sdk(spec.split("/", 1)[0])
            except ImportError as exc:  # said again, to the user, by the first call
                log.warning("cannot import the SDK of %s: %s", spec, exc)

    def chain(self, role: str) -> list[str]:
        """Models to try, in order: role (or skill) override or default, then the fallbacks."""
        from actors.llm.providers import model_from_env

        models = self.config.models
        first = models.skills.get(role) or models.roles.get(role) or models.default
        first = first or model_from_env()
        chain = [first] if first else []
        chain += [m for m in models.fallback if m and m not in chain]
        return chain

    def health_info(self) -> dict[str, Any]:
        breakers = getattr(self, "breakers", None)
        return {"models": self.chain("default"), "calls": getattr(self, "calls", 0),
                "breakers": breakers.snapshot(self._providers()) if breakers else {}}

    def _providers(self) -> list[str]:
        """Every provider a request may reach: the default chain's and the local model's."""
        specs = [*self.chain("default"), self.config.models.local]
        return [m.partition("/")[0] for m in specs if m]

    async def handle(self, req: LlmRequest) -> None:
        from actors.llm import _retry

        async with _retry.working(self, req):
            response, transient, charge = await self._respond(req)
        if transient:
            delay = _retry.schedule(self, req, response.error)
            if delay is not None:
                await _retry.retry_later(self, req, response.error, delay)
            response = msgspec.structs.replace(response, outage=True)
        if req.for_call is not None:  # escalate: the answer is that tool call's result
            from actors.llm._escalate import answer_call

            await asyncio.gather(answer_call(self, req.for_call, response), *charge)
            return
        # The budget is charged while the answer travels: a crash before both are done leaves
        # the request unacked, and its redelivery makes the call (and the charge) again.
        await asyncio.gather(self.send(response), *charge)

    async def _respond(self, req: LlmRequest) -> tuple[LlmResponse, bool, list[Awaitable[None]]]:
        """The answer, whether it is an error worth retrying (every model failed
        transiently), and the budget charge still to await (with the answer's publish)."""
        base: dict[str, Any] = {"id": f"{req.id}:response", "session": req.session,
                                "turn_id": req.turn_id, "step": req.step, "request_id": req.id}
        chain = self.chain(req.role)
        if not chain:
            return LlmResponse(**base, error=NO_MODEL.format(home=self.home)), False, []
        privacy = self.config.privacy
        by_template = bool(req.template) and templates.get(
            req.template, privacy.templates).owner_acknowledged_cloud_risk
        routed = route(req.label, chain, self.config.models.local,
                       self.config.models.local_providers,
                       by_template or acknowledged(req.principal,
                                                   privacy.owner_acknowledged_cloud_risk))
        if routed.acknowledged:
            where = (f"task template {req.template}" if by_template
                     else "privacy.owner_acknowledged_cloud_risk")
            await self.audit_decision("routing.cloud_acknowledged", "allowed",
                                      f"Data labelled {req.label} of {req.principal} may go to "
                                      f"cloud models: the owner acknowledged the risk ({where}).",
                                      about=req.id, principal=req.principal, session=req.session,
                                      refs={"label": req.label, "request": req.id,
                                            "template": req.template})
        if routed.refusal:
            await self.audit_decision("routing.refused", "refused", routed.refusal,
                                      about=req.id, session=req.session,
                                      refs={"label": req.label, "request": req.id})
            return LlmResponse(**base, error=routed.refusal), False, []
        if routed.local_only:
            await self.audit_decision("routing.local", "allowed",
                                      f"Data labelled {req.label} goes only to local models: "
                                      f"{', '.join(routed.chain)}.", about=req.id,
                                      session=req.session,
                                      refs={"label": req.label, "request": req.id})
        chain = routed.chain
        cfg = self.config.budget
        payer = req.budget_session or req.session  # a delegated sub-task's parent pays
        stop = await budget.check(self.bus, cfg, payer, req.purpose)
        if stop is not None:
            if req.purpose in budget.SESSION_PURPOSES:
                await budget.pause(self.bus, payer, stop.kind)
            log.info("%s call for %s not made: %s budget spent", req.purpose, req.session,
                     stop.kind)
            return LlmResponse(**base, error=stop.message, budget=stop.kind), False, []
        from actors.llm.providers import ProviderError, complete, default_max_tokens

        failures: list[str] = []
        transient = True
        on_text = self._previewer(req)
        limits = self.config.models.limits_for(req.role)
        for spec in chain:
            provider = spec.partition("/")[0]
            allowed, moved = self.breakers.allow(provider)
            await self._breaker_moved(moved, req)
            if not allowed:
                when = time.strftime("%H:%M:%S", time.localtime(self.breakers.retry_at(provider)))
                failures.append(f"{spec}: skipped, the {provider} provider kept failing "
                                f"(circuit open until {when}).")
                continue
            # The request may ask for less than the role's limit, never for more.
            cap = limits.max_tokens or default_max_tokens(spec)
            try:
                self.calls += 1
                done = await complete(
                    spec, req.messages, req.tools, max_tokens=min(req.max_tokens or cap, cap),
                    timeout=limits.timeout_secs, on_text=on_text, retries=limits.max_retries,
                )
            except ProviderError as exc:
                log.warning("model %s failed: %s", spec, exc.message)
                failures.append(f"{spec}: {exc.message}")
                transient = transient and exc.retryable
                if exc.retryable:  # an outage, not a configuration error: counts
                    await self._breaker_moved(self.breakers.failure(provider, exc.message), req)
                else:
                    self.breakers.release(provider)
                continue
            except BaseException:
                self.breakers.release(provider)
                raise
            await self._breaker_moved(self.breakers.success(provider), req)
            tracing.annotate({  # GenAI semantic conventions on the handling span
                "gen_ai.operation.name": "chat", "gen_ai.system": spec.split("/", 1)[0],
                "gen_ai.request.model": spec.split("/", 1)[-1],
                "gen_ai.usage.input_tokens": done.usage.input_tokens,
                "gen_ai.usage.output_tokens": done.usage.output_tokens})
            charge = budget.charge(self.bus, cfg, payer, req.purpose, spec, done.usage)
            return LlmResponse(
                **base, content=done.content, tool_calls=done.tool_calls, model=spec,
                usage=done.usage,
            ), False, [charge]
        detail = " ".join(failures)
        return LlmResponse(
            **base,
            error=f"I couldn't reach any configured model, so this message went unanswered. "
            f"{detail} Check the model server and [models] in config.toml, then ask again.",
        ), transient, []

    async def _breaker_moved(self, moved: Transition | None, req: LlmRequest) -> None:
        """Audit a breaker's change of state (opened, half-open probe, closed)."""
        if moved is None:
            return
        log.warning("circuit breaker of %s: %s (%s)", moved.provider, moved.state, moved.reason)
        decision = {"open": "breaker.opened", "half_open": "breaker.probe",
                    "closed": "breaker.closed"}[moved.state]
        outcome: AuditOutcome = "opened" if moved.state == "open" else (
            "half_open" if moved.state == "half_open" else "closed")
        await self.audit_decision(decision, outcome, moved.reason,
                         about=f"breaker:{moved.provider}:{moved.since:.3f}",
                         session=req.session, refs={"provider": moved.provider,
                                                    "request": req.id})

    def _previewer(self, req: LlmRequest) -> OnText | None:
        """For a request that asks for a preview: publish the text so far at a bounded rate.

        The first preview comes one interval after the call started (a quick answer shows no
        preview at all), later ones at least one interval apart and only when the text grew.
        A preview that cannot be published is skipped: it is only a preview.
        """
        sink = req.preview_to
        if sink is None:
            return None
        # The channel's cadence travels on the request; an older planner's request has none.
        every = req.preview_interval or DEFAULT_PREVIEW_INTERVAL
        last_at, last_len, seq = time.monotonic(), 0, 0

        async def on_text(text: str) -> None:
            nonlocal last_at, last_len, seq
            now = time.monotonic()
            if now - last_at < every or len(text) <= last_len:
                return
            last_at, last_len, seq = now, len(text), seq + 1
            preview = LlmPreview(
                id=f"{req.id}:preview:{seq}", session=req.session, turn_id=req.turn_id,
                step=req.step, request_id=req.id, seq=seq, text=text, sink=sink,
            )
            try:
                await self.send(preview)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a lost preview changes nothing
                log.warning("preview %s not published: %s", preview.id, exc)

        return on_text
