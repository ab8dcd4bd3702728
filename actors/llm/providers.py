"""One call to a chat model through the official anthropic, openai or ollama SDK.

Each SDK is imported on the first call to its provider (in a thread: the event loop goes on),
so a process pays only for the provider it talks to, and only once it talks to it. Clients are
cached per provider (and event loop) to reuse pools.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

from actors.llm import _convert
from contracts.llm import ChatMessage, ToolCall, ToolSpec, Usage

PROVIDERS = ("anthropic", "openai", "ollama")

#: Called with the whole answer text so far, each time a streamed answer grows.
OnText = Callable[[str], Awaitable[None]]

#: The model used when the config names none, by the first provider configured.
DEFAULT_MODELS = {
    "anthropic": "anthropic/claude-sonnet-4-5",
    "openai": "openai/gpt-4o-mini",
    "ollama": "ollama/llama3.2",
}

#: The SDKs never retry on their own: `complete` does, and logs each retry with its reason.
SDK_MAX_RETRIES = 0

#: Further attempts after a retryable failure unless the caller says otherwise.
DEFAULT_RETRIES = 2

#: Longest answer when the config leaves it to us: hosted APIs, and local servers, which
#: write far more slowly (a rambling small model must finish within the timeout).
DEFAULT_MAX_TOKENS = 4096
LOCAL_MAX_TOKENS = 1024

#: Key sent to a local server that needs none (the SDKs refuse to run without one).
PLACEHOLDER_KEY = "not-needed"

_HINTS = {
    "anthropic": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "your network"),
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_KEY", "the model server"),
    "ollama": ("OLLAMA_HOST", "OLLAMA_API_KEY", "that `ollama serve` is running"),
}

_clients: dict[str, tuple[asyncio.AbstractEventLoop, Any]] = {}
SDKS = {"anthropic": "anthropic", "openai": "openai", "ollama": "ollama"}  # provider: module


class ProviderError(Exception):
    """A model call failed; `message` says what happened and what to do."""

    def __init__(self, message: str, *, retryable: bool, timed_out: bool = False,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.timed_out = timed_out  # not retried: a slow model would most likely be slow again
        self.retry_after = retry_after  # what the server asked for (HTTP Retry-After), if anything


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """The model's answer: text, tool calls, token usage and "provider/model" that answered."""

    content: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    usage: Usage = msgspec.field(default_factory=Usage)
    model: str = ""


def provider_configured(provider: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment holds what `provider` needs to be reached."""
    keys = {
        "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
        "ollama": ("OLLAMA_HOST",),
    }.get(provider, ())
    return any(environ.get(k) for k in keys)


def model_from_env(environ: Mapping[str, str] = os.environ) -> str:
    """A default "provider/model" for the first configured provider, or "" when none is."""
    for provider in PROVIDERS:
        if provider_configured(provider, environ):
            return DEFAULT_MODELS[provider]
    return ""


def reset_clients() -> None:
    """Forget cached clients so the next call reads the environment again (for tests)."""
    _clients.clear()


def split_spec(spec: str) -> tuple[str, str]:
    """Split "provider/model" (the model may itself contain slashes)."""
    provider, _, model = spec.partition("/")
    if provider not in PROVIDERS or not model:
        raise ProviderError(
            f"The model '{spec}' is not of the form provider/model with provider one of "
            f"{', '.join(PROVIDERS)}; fix the model name in the config.",
            retryable=False,
        )
    return provider, model


def is_local(provider: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `provider` is a server of your own (slow to write) rather than a hosted API."""
    if provider == "ollama":
        return "ollama.com" not in environ.get("OLLAMA_HOST", "")
    var, host = {"openai": ("OPENAI_BASE_URL", "api.openai.com"),
                 "anthropic": ("ANTHROPIC_BASE_URL", "api.anthropic.com")}[provider]
    return host not in environ.get(var, host)


def default_max_tokens(spec: str) -> int:
    """The answer limit for `spec` when the config sets none (max_tokens = 0)."""
    provider = spec.partition("/")[0]
    local = provider in PROVIDERS and is_local(provider)
    return LOCAL_MAX_TOKENS if local else DEFAULT_MAX_TOKENS


async def complete(
    spec: str,
    messages: list[ChatMessage],
    tools: list[ToolSpec],
    *,
    max_tokens: int = 0,
    timeout: float = 120.0,  # noqa: ASYNC109 - passed to the SDKs, which enforce it per request
    on_text: OnText | None = None,
    retries: int = DEFAULT_RETRIES,
) -> Completion:
    """Ask the model named by `spec` ("provider/model") for the next message.

    With `on_text` the answer is streamed (for a chat's live preview) and `on_text` sees the
    text so far as it grows; the returned Completion is the same as without streaming.
    `max_tokens` 0 is `default_max_tokens(spec)`; a retryable failure (429, 5xx, connection)
    is tried again up to `retries` times, each retry logged with its reason (`_retry.py`).
    """
    from actors.llm._call_retry import with_retries

    limit = max_tokens or default_max_tokens(spec)
    return await with_retries(spec, retries, lambda: _complete_once(
        spec, messages, tools, limit, timeout, on_text))


async def _complete_once(spec: str, messages: list[ChatMessage], tools: list[ToolSpec],
                         max_tokens: int, timeout: float,  # noqa: ASYNC109 - per request
                         on_text: OnText | None) -> Completion:
    """One attempt; every failure is a ProviderError."""
    provider, model = split_spec(spec)
    call = {"anthropic": _anthropic, "openai": _openai, "ollama": _ollama}[provider]
    try:
        await load_sdk(provider)
        client = _client(provider)
        if on_text is not None:
            from actors.llm import _stream

            stream = {"anthropic": _stream.anthropic, "openai": _stream.openai,
                      "ollama": _stream.ollama}[provider]
            result = await stream(client, model, messages, tools, max_tokens, timeout, on_text)
        else:
            result = await call(client, model, messages, tools, max_tokens, timeout)
        content, calls, usage, reported = result
    except ProviderError:
        raise
    except Exception as exc:
        raise _map_error(provider, model, timeout, exc) from exc
    return Completion(content=content, tool_calls=calls, usage=usage, model=f"{provider}/{reported or model}")


async def load_sdk(provider: str) -> None:
    """Import the provider's SDK in a thread (0.2-1.2 s the first time; ImportError if it is
    not installed); at once when it is loaded already."""
    module = SDKS.get(provider, "")
    loaded = sys.modules.get(module)
    if module and (loaded is None or getattr(loaded.__spec__, "_initializing", False)):
        await asyncio.to_thread(importlib.import_module, module)


def _client(provider: str) -> Any:
    """The cached SDK client for `provider`, built on first use in this event loop."""
    loop = asyncio.get_running_loop()
    cached = _clients.get(provider)
    if cached is not None and cached[0] is loop:
        return cached[1]
    env = os.environ
    if provider == "anthropic":
        import anthropic

        kw: dict[str, Any] = {"max_retries": SDK_MAX_RETRIES}
        if env.get("ANTHROPIC_BASE_URL") and not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
            kw["api_key"] = PLACEHOLDER_KEY
        client: Any = anthropic.AsyncAnthropic(**kw)
    elif provider == "openai":
        import openai

        kw = {"max_retries": SDK_MAX_RETRIES}
        if env.get("OPENAI_BASE_URL") and not env.get("OPENAI_API_KEY"):
            kw["api_key"] = PLACEHOLDER_KEY
        client = openai.AsyncOpenAI(**kw)
    else:
        import ollama

        client = ollama.AsyncClient()
    _clients[provider] = (loop, client)
    return client


async def _anthropic(client: Any, model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                     max_tokens: int, seconds: float) -> tuple[str, list[ToolCall], Usage, str]:
    """One Messages API call."""
    system, msgs = _convert.anthropic_messages(messages)
    kw: dict[str, Any] = {}
    if system:
        kw["system"] = system
    if tools:
        kw["tools"] = _convert.anthropic_tools(tools)
    resp = await client.messages.create(
        model=model, messages=msgs, max_tokens=max_tokens, timeout=seconds, **kw
    )
    return _convert.anthropic_result(resp)


async def _openai(client: Any, model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                  max_tokens: int, seconds: float) -> tuple[str, list[ToolCall], Usage, str]:
    """One Chat Completions call, with a prebuilt JSON body (`_openai_raw`: the SDK's own
    request transformation cost more than the rest of the actor)."""
    from actors.llm import _openai_raw

    body = _openai_raw.request_body(model, messages, tools, max_tokens)
    data = await _openai_raw.post(client, body, seconds)
    try:
        result = _openai_raw.parse(data)
    except _openai_raw.Malformed as exc:
        raise ProviderError(
            f"The openai provider sent an answer that is not valid JSON (model '{model}'): "
            f"{_sentence(str(exc))}. This is usually a passing server fault; try again.",
            retryable=True) from exc
    if result is None:
        raise ProviderError(
            f"The openai provider returned no answer for model '{model}'. Try again.", retryable=True
        )
    return result


async def _ollama(client: Any, model: str, messages: list[ChatMessage], tools: list[ToolSpec],
                  max_tokens: int, seconds: float) -> tuple[str, list[ToolCall], Usage, str]:
    """One /api/chat call (non-streaming); the SDK has no per-call timeout, so asyncio enforces it."""
    resp = await asyncio.wait_for(
        client.chat(
            model=model,
            messages=_convert.ollama_messages(messages),
            tools=_convert.ollama_tools(tools) or None,
            stream=False,
            options={"num_predict": max_tokens},
        ),
        seconds,
    )
    return _convert.ollama_result(resp)


def _base_url(provider: str) -> str:
    """Where the provider's client sends requests, for error messages."""
    cached = _clients.get(provider)
    client = cached[1] if cached else None
    if provider == "ollama":
        inner = getattr(client, "_client", None)
        return str(getattr(inner, "base_url", "") or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434")
    url = getattr(client, "base_url", None)
    default = "https://api.anthropic.com" if provider == "anthropic" else "https://api.openai.com/v1"
    return str(url or os.environ.get(_HINTS[provider][0]) or default)


def _detail(exc: BaseException) -> str:
    """The most specific text in an exception's cause chain."""
    seen: set[int] = set()
    best = ""
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = str(cur).strip()
        if text:
            best = text.rstrip(".")
        cur = cur.__cause__ or cur.__context__
    return best or type(exc).__name__


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error, if it came from a response."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


def _api_message(exc: BaseException) -> str:
    """The server's own explanation of an HTTP error."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "error", "") or getattr(exc, "message", "") or exc)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from an HTTP error's Retry-After header, if it has a number there."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):  # OpenAI sends ms
        try:
            return float(str(headers.get(name))) * scale
        except (TypeError, ValueError):
            continue
    return None


def _sentence(text: str) -> str:
    """`text` without trailing periods, so it can sit inside a sentence."""
    return text.strip().rstrip(".") or "no details"


def _is_connection_error(exc: BaseException) -> bool:
    """Whether the request never got an HTTP answer (refused, reset, DNS, TLS)."""
    if isinstance(exc, OSError):  # ConnectionError included
        return True
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"APIConnectionError", "TransportError", "NetworkError", "ConnectError",
                         "RemoteProtocolError", "ProtocolError"})


def _is_timeout(exc: BaseException) -> bool:
    """Whether the call ran out of time (SDK, httpx or asyncio timeout)."""
    if isinstance(exc, TimeoutError):
        return True
    return any(c.__name__ in ("APITimeoutError", "TimeoutException") for c in type(exc).__mro__)


def _is_malformed(exc: BaseException) -> bool:
    """Whether the answer could not be decoded (a proxy's error page, a truncated body)."""
    seen: BaseException | None = exc
    while seen is not None:
        names = {c.__name__ for c in type(seen).__mro__}
        if names & {"JSONDecodeError", "APIResponseValidationError"}:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _map_error(provider: str, model: str, timeout: float, exc: Exception) -> ProviderError:
    """Translate an SDK exception into a ProviderError a user can act on."""
    url_var, key_var, what = _HINTS[provider]
    status = _status_of(exc)
    if status is not None:
        api = _sentence(_api_message(exc))
        head = f"The {provider} provider answered HTTP {status} for model '{model}': {api}."
        if status in (401, 403):
            return ProviderError(f"{head} Check {key_var} (and {url_var}).", retryable=False)
        if status == 404:
            return ProviderError(f"{head} Check the model name in the config and {url_var}.", retryable=False)
        if status == 429:
            return ProviderError(f"{head} The provider is rate limiting; wait and try again.",
                                 retryable=True, retry_after=_retry_after(exc))
        if status in (408, 409) or status >= 500:
            return ProviderError(f"{head} This is usually temporary; try again.", retryable=True,
                                 retry_after=_retry_after(exc))
        return ProviderError(f"{head} The request was refused; check the model and its options.", retryable=False)
    if _is_timeout(exc):
        return ProviderError(
            f"The {provider} provider did not answer within {timeout:g} s (model '{model}'). "
            "Try again, raise models.timeout_secs (or lower models.max_tokens) or pick a "
            "faster model.",
            retryable=True, timed_out=True,
        )
    if _is_connection_error(exc):
        return ProviderError(
            f"The {provider} provider could not be reached at {_base_url(provider)}: {_detail(exc)}. "
            f"Check {url_var} or {what}.",
            retryable=True,
        )
    if _is_malformed(exc):
        return ProviderError(
            f"The {provider} provider sent an answer that is not valid JSON (model '{model}'): "
            f"{_detail(exc)}. This is usually a passing server fault; try again.",
            retryable=True,
        )
    text = _detail(exc)
    if "credential" in text.lower() or "authentication method" in text.lower() or "api_key" in text:
        return ProviderError(
            f"The {provider} provider has no credentials: {text}. Set {key_var} "
            f"(or {url_var} for a local server).",
            retryable=False,
        )
    return ProviderError(
        f"The {provider} provider failed for model '{model}': {type(exc).__name__}: {text}.",
        retryable=False,
    )
