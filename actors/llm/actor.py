"""The llm actor: the only process holding model keys. Routes, falls back, counts tokens."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from actors.base import Actor
from bus import tracing
from contracts import LlmPreview, LlmRequest, LlmResponse
from kit.secrets import load_dotenv
from state import budget

if TYPE_CHECKING:
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
        # Import the SDKs of the configured chain now, not during the first user's turn.
        sdks = {"anthropic": "anthropic", "openai": "openai", "ollama": "ollama"}
        for spec in self.chain("default"):
            module = sdks.get(spec.split("/", 1)[0])
            if module:
                await asyncio.to_thread(importlib.import_module, module)

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
        return {"models": self.chain("default"), "calls": getattr(self, "calls", 0)}

    async def handle(self, req: LlmRequest) -> None:
        response = await self._respond(req)
        if req.for_call is not None:  # escalate: the answer is that tool call's result
            from actors.llm._escalate import answer_call

            await answer_call(self, req.for_call, response)
            return
        await self.send(response)

    async def _respond(self, req: LlmRequest) -> LlmResponse:
        base: dict[str, Any] = {"id": f"{req.id}:response", "session": req.session, "turn_id": req.turn_id,
                "step": req.step, "request_id": req.id}
        chain = self.chain(req.role)
        if not chain:
            return LlmResponse(**base, error=NO_MODEL.format(home=self.home))
        over = await budget.exhausted(self.bus, self.config.budget, req.session)
        if over:
            return LlmResponse(**base, error=over)
        from actors.llm.providers import ProviderError, complete, default_max_tokens

        failures: list[str] = []
        on_text = self._previewer(req)
        limits = self.config.models.limits_for(req.role)
        for spec in chain:
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
                continue
            tokens = done.usage.input_tokens + done.usage.output_tokens
            tracing.annotate({  # GenAI semantic conventions on the handling span
                "gen_ai.operation.name": "chat", "gen_ai.system": spec.split("/", 1)[0],
                "gen_ai.request.model": spec.split("/", 1)[-1],
                "gen_ai.usage.input_tokens": done.usage.input_tokens,
                "gen_ai.usage.output_tokens": done.usage.output_tokens})
            await budget.add(self.bus, budget.day_key(), tokens)
            await budget.add(self.bus, budget.session_key(req.session), tokens)
            return LlmResponse(
                **base, content=done.content, tool_calls=done.tool_calls, model=spec,
                usage=done.usage,
            )
        detail = " ".join(failures)
        return LlmResponse(
            **base,
            error=f"I couldn't reach any configured model, so this message went unanswered. "
            f"{detail} Check the model server and [models] in config.toml, then ask again.",
        )

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
