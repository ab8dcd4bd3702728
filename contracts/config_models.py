"""Sections of config.toml about model calls: providers and roles, limits, circuit breakers,
the planner's turn limits and the token budgets."""

from __future__ import annotations

import msgspec

from contracts.config_base import _Section


class BreakerConfig(_Section):
    """Per-provider circuit breaker: this many outage-like failures within the window skip the
    provider for the cooldown (the fallback chain goes on), then one request probes it."""

    failure_threshold: int = 3
    window_secs: float = 60.0
    cooldown_secs: float = 300.0


class ModelLimits(_Section):
    """[models.limits.<role>]: one role's (or skill's) limits; unset ones come from [models]."""

    max_tokens: int | None = None
    timeout_secs: float | None = None
    max_retries: int | None = None


class CallLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What one model call of a role may use (max_tokens 0: the provider-dependent default)."""

    max_tokens: int
    timeout_secs: float
    max_retries: int


class ModelsConfig(_Section):
    default: str = ""  # "{provider}/{model}"; empty: picked from the SDK environment variables
    fallback: list[str] = msgspec.field(default_factory=list)
    roles: dict[str, str] = msgspec.field(default_factory=dict)
    skills: dict[str, str] = msgspec.field(default_factory=dict)
    timeout_secs: float = 120.0  # per attempt of a model call
    # Longest answer; 0: 4096 for a hosted API, 1024 for a local server (OPENAI_BASE_URL
    # elsewhere than api.openai.com, ANTHROPIC_BASE_URL, Ollama), which writes more slowly.
    max_tokens: int = 0
    max_retries: int = 2  # further attempts after a 429, a 5xx or a connection error
    limits: dict[str, ModelLimits] = msgspec.field(default_factory=dict)
    breaker: BreakerConfig = msgspec.field(default_factory=BreakerConfig)
    # Data labelled sensitive or above goes only to models running on this machine: `local`,
    # then the chain's models whose provider is in `local_providers`; none: such turns are
    # refused. Secret data goes to no model.
    local: str = ""
    local_providers: list[str] = msgspec.field(default_factory=lambda: ["ollama"])
    # Memory search vectors: local/minilm (offline, shipped as a package), openai/MODEL (any
    # OpenAI-compatible /v1/embeddings), ollama/MODEL, or none (full text only).
    embedding: str = "local/minilm"
    embedding_url: str = ""  # base URL for openai/ollama embeddings; empty: the SDK variables
    # Transient failures (HTTP 5xx/429, timeouts, unreachable, malformed answers) are retried
    # with backoff (1, 2, 4 ... up to retry_max_delay_secs) until this long after the request
    # was first published, then the turn fails with one message and the owner is told once.
    retry_deadline_secs: float = 90.0
    retry_max_delay_secs: float = 20.0
    progress_every_secs: float = 10.0  # "still working" events to the planner during a call
    # Import the chain's SDKs a second after start instead of on the first call: that call is
    # 0.3-1 s faster, the llm process 35-65 MB bigger until then (openai, anthropic).
    preload_sdks: bool = False

    def __post_init__(self) -> None:
        if self.retry_deadline_secs < 0 or self.retry_max_delay_secs <= 0:
            raise ValueError("retry_deadline_secs must be >= 0 and retry_max_delay_secs > 0")
        if self.progress_every_secs <= 0:
            raise ValueError("progress_every_secs must be positive")

    def limits_for(self, role: str) -> CallLimits:
        """The limits of a call for `role` (a role or skill name): its table over [models]."""
        own = self.limits.get(role) or ModelLimits()
        return CallLimits(
            max_tokens=self.max_tokens if own.max_tokens is None else own.max_tokens,
            timeout_secs=self.timeout_secs if own.timeout_secs is None else own.timeout_secs,
            max_retries=self.max_retries if own.max_retries is None else own.max_retries,
        )


class PlannerConfig(_Section):
    """Deadlines of a turn's steps: a step past its deadline is hung, not slow.

    The model step's deadline counts from the llm's last progress event (sent every
    models.progress_every_secs while a call runs or waits to retry), so only silence fires it.
    """

    recall_deadline_secs: float = 30.0  # optional: past it the turn goes on without memories
    model_silence_secs: float = 300.0  # no answer and no progress from the llm for this long
    tool_deadline_secs: float = 900.0  # a tool call (memory tools are optional: fail soft)
    sweep_every_secs: float = 1.0  # how often deadlines are checked
    # Right after a fresh start the executor may not have published its tools yet (it sets up
    # its sandbox after its first health report): a turn waits this long for them rather than
    # being answered without tools.
    tools_wait_secs: float = 30.0
    # Post-inference validation (seed 001's "Turing Protocol"): a final answer that claims an
    # action ("I've saved ...", "I sent ...") no tool call of the turn did is corrected once.
    turing_protocol: bool = True

    def __post_init__(self) -> None:
        for name in ("recall_deadline_secs", "model_silence_secs", "tool_deadline_secs",
                     "sweep_every_secs"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.tools_wait_secs < 0:
            raise ValueError("tools_wait_secs must be 0 (do not wait) or more")


class ModelPrice(_Section):
    """US dollars per million tokens, for the cost estimate in /budget."""

    input: float = 0.0
    output: float = 0.0


class BudgetConfig(_Section):
    max_tokens_per_session: int = 500_000  # 0: no session budget
    max_tokens_per_day: int = 5_000_000  # 0: no daily budget
    max_tool_calls_per_turn: int = 20
    max_dynamic_tools_per_turn: int = 20
    # Runaway guard: a turn past this many tokens, or repeating one tool call with the same
    # arguments this many times, is stopped with a message (0 turns either check off).
    max_tokens_per_turn: int = 250_000
    max_repeated_tool_calls: int = 3
    # The day budget renews at midnight here (an IANA zone such as "Europe/Berlin");
    # "" is the machine's local time.
    timezone: str = ""
    # Optional prices per model spec: "openai/gpt-4o" = {input = 2.5, output = 10}.
    prices: dict[str, ModelPrice] = msgspec.field(default_factory=dict)
