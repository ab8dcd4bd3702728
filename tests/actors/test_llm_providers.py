"""complete() drives the real anthropic, openai and ollama SDKs against local fake servers."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.llm import _convert, providers
from actors.llm.providers import (
    Completion,
    ProviderError,
    complete,
    model_from_env,
    provider_configured,
)
from contracts.llm import ChatMessage, ToolCall, ToolSpec
from tests.fakes.llm_servers import FakeLLM, decide

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["openai", "anthropic", "ollama"]
URL_VAR = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "ollama": "OLLAMA_HOST"}
KEY_VAR = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "ollama": "OLLAMA_API_KEY"}
PROVIDER_VARS = [
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY", "OLLAMA_HOST", "OLLAMA_API_KEY",
]
EXEC = ToolSpec(
    name="execute_command",
    description="Run a shell command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider configuration leaks in from the host, and no client survives a test."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    providers.reset_clients()
    yield
    providers.reset_clients()


async def _serve(kind: str, monkeypatch: pytest.MonkeyPatch, **kw: object) -> FakeLLM:
    """Start a fake `kind` server and point that provider's SDK at it."""
    fake = FakeLLM(**kw)  # type: ignore[arg-type]
    monkeypatch.setenv(URL_VAR[kind], await fake.start(kind))
    return fake


@pytest.fixture(params=KINDS)
async def served(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, FakeLLM]]:
    """(kind, fake server) for each of the three providers."""
    fake = await _serve(request.param, monkeypatch)
    yield request.param, fake
    await fake.stop()


def _closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- answers and tool round trips ----------------------------------------------------------


async def test_plain_answer_with_usage(served: tuple[str, FakeLLM]) -> None:
    kind, fake = served
    msgs = [ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="hello there")]
    result = await complete(f"{kind}/fake-model", msgs, [])
    assert isinstance(result, Completion)
    assert result.content == "echo: hello there"
    assert result.tool_calls == []
    assert result.model == f"{kind}/fake-model"
    assert result.usage.input_tokens == (len("be brief") + len("hello there")) // 4
    assert result.usage.output_tokens == len("echo: hello there") // 4
    assert fake.calls == 1
    body = fake.requests[0]
    if kind == "anthropic":
        assert body["system"] == "be brief"
        assert body["messages"] == [{"role": "user", "content": "hello there"}]
        assert body["max_tokens"] == providers.LOCAL_MAX_TOKENS  # a local server: 1024
    else:
        assert body["messages"][0] == {"role": "system", "content": "be brief"}
        assert body["messages"][1] == {"role": "user", "content": "hello there"}
    if kind == "ollama":
        assert body["stream"] is False and body["options"]["num_predict"] == 1024
    if kind == "openai":
        assert body["max_tokens"] == 1024  # a local server (OPENAI_BASE_URL) gets max_tokens


async def test_tool_call_then_tool_result_round_trip(served: tuple[str, FakeLLM]) -> None:
    kind, fake = served
    spec = f"{kind}/fake-model"
    msgs = [ChatMessage(role="user", content="please run: ls -la /tmp")]
    first = await complete(spec, msgs, [EXEC])
    assert first.content == ""
    assert len(first.tool_calls) == 1
    call = first.tool_calls[0]
    assert call.name == "execute_command"
    assert call.arguments == {"command": "ls -la /tmp"}
    assert call.id
    if kind == "ollama":  # ollama has no call ids; they are made up in order
        assert call.id == "call_0"
    assert first.usage.output_tokens >= 1

    tools_sent = fake.requests[0]["tools"]
    if kind == "anthropic":
        assert tools_sent == [{"name": "execute_command", "description": "Run a shell command.",
                               "input_schema": EXEC.parameters}]
    else:
        assert tools_sent[0]["type"] == "function"
        assert tools_sent[0]["function"]["name"] == "execute_command"
        assert tools_sent[0]["function"]["parameters"]["required"] == ["command"]

    msgs += [
        ChatMessage(role="assistant", tool_calls=first.tool_calls),
        ChatMessage(role="tool", tool_call_id=call.id, name="execute_command", content="  file1\nfile2 \n"),
    ]
    second = await complete(spec, msgs, [EXEC])
    assert second.content == "Tool said: file1\nfile2"
    assert second.tool_calls == []

    sent = fake.requests[1]["messages"]
    if kind == "openai":
        assert sent[1]["role"] == "assistant"
        assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"command": "ls -la /tmp"}
        assert sent[1]["tool_calls"][0]["id"] == call.id
        assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "  file1\nfile2 \n"}
    elif kind == "anthropic":
        assert sent[1] == {"role": "assistant", "content": [
            {"type": "tool_use", "id": call.id, "name": "execute_command", "input": {"command": "ls -la /tmp"}}]}
        assert sent[2] == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "  file1\nfile2 \n"}]}
    else:
        assert sent[1]["tool_calls"] == [
            {"function": {"name": "execute_command", "arguments": {"command": "ls -la /tmp"}}}]
        assert sent[2] == {"role": "tool", "content": "  file1\nfile2 \n", "tool_name": "execute_command"}


async def test_parallel_tool_results(served: tuple[str, FakeLLM]) -> None:
    kind, fake = served
    calls = [ToolCall(id="call_a", name="memory_search", arguments={"query": "x"}),
             ToolCall(id="call_b", name="memory_search", arguments={"query": "y"})]
    msgs = [
        ChatMessage(role="user", content="look both up"),
        ChatMessage(role="assistant", content="Looking.", tool_calls=calls),
        ChatMessage(role="tool", tool_call_id="call_a", content="first"),
        ChatMessage(role="tool", tool_call_id="call_b", content="second"),
    ]
    result = await complete(f"{kind}/fake-model", msgs, [])
    assert result.content == "Tool said: first | second"
    sent = fake.requests[0]["messages"]
    if kind == "anthropic":  # consecutive tool results become one user turn
        assert len(sent) == 3
        assert sent[1]["content"][0] == {"type": "text", "text": "Looking."}
        assert [b["tool_use_id"] for b in sent[2]["content"]] == ["call_a", "call_b"]
    elif kind == "ollama":  # tool names are looked up from the assistant's calls
        assert [m.get("tool_name") for m in sent[2:]] == ["memory_search", "memory_search"]
    else:
        assert [m["tool_call_id"] for m in sent[2:]] == ["call_a", "call_b"]


async def test_tool_with_json_arguments(served: tuple[str, FakeLLM]) -> None:
    kind, _ = served
    text = 'tool:memory_save {"content": "likes tea", "tags": ["food", "uk"], "n": 2} please'
    result = await complete(f"{kind}/fake-model", [ChatMessage(role="user", content=text)], [])
    assert result.tool_calls[0].name == "memory_save"
    assert result.tool_calls[0].arguments == {"content": "likes tea", "tags": ["food", "uk"], "n": 2}


async def test_clients_are_cached_per_provider(served: tuple[str, FakeLLM]) -> None:
    kind, _ = served
    await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="a")], [])
    first = providers._clients[kind][1]
    await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="b")], [])
    assert providers._clients[kind][1] is first
    providers.reset_clients()
    assert kind not in providers._clients


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (404, False), (429, True), (500, True), (503, True)])
async def test_http_errors_map_to_provider_error(served: tuple[str, FakeLLM], status: int, retryable: bool) -> None:
    kind, fake = served
    with pytest.raises(ProviderError) as info:
        await complete(f"{kind}/fake-model", [ChatMessage(role="user", content=f"status:{status}")], [])
    err = info.value
    assert err.retryable is retryable
    assert f"The {kind} provider answered HTTP {status}" in err.message
    assert "Scripted failure" in err.message
    # we retry 429/5xx ourselves (the SDKs do not), the same for every provider
    assert fake.calls == (1 + providers.DEFAULT_RETRIES if retryable else 1)


@pytest.mark.parametrize("kind", KINDS)
async def test_wrong_key_is_401_not_retryable(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = await _serve(kind, monkeypatch, api_key="right-key")
    try:
        monkeypatch.setenv(KEY_VAR[kind], "wrong-key")
        with pytest.raises(ProviderError) as info:
            await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="hi")], [])
        assert info.value.retryable is False
        assert "HTTP 401" in info.value.message and KEY_VAR[kind] in info.value.message
        assert fake.calls == 1

        monkeypatch.setenv(KEY_VAR[kind], "right-key")
        providers.reset_clients()
        ok = await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="hi")], [])
        assert ok.content == "echo: hi"
        assert fake.headers[-1]["Authorization"] == "Bearer right-key"
    finally:
        await fake.stop()


@pytest.mark.parametrize("kind", KINDS)
async def test_connection_refused_is_retryable_and_readable(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    port = _closed_port()
    monkeypatch.setenv(URL_VAR[kind], f"http://127.0.0.1:{port}" + ("/v1" if kind == "openai" else ""))
    with pytest.raises(ProviderError) as info:
        await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="hi")], [],
                       retries=0)
    msg = info.value.message
    assert info.value.retryable is True
    assert msg.startswith(f"The {kind} provider could not be reached at http://127.0.0.1:{port}")
    assert f"Check {URL_VAR[kind]}" in msg
    assert "refused" in msg.lower() or "connect" in msg.lower()


async def test_slow_answer_times_out(served: tuple[str, FakeLLM], monkeypatch: pytest.MonkeyPatch) -> None:
    kind, fake = served
    with pytest.raises(ProviderError) as info:
        await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="slow:2")], [], timeout=0.3)
    assert info.value.retryable is True and info.value.timed_out
    assert fake.calls == 1  # a timeout is not retried: the user already waited that long
    assert f"The {kind} provider did not answer within 0.3 s" in info.value.message


async def test_slow_answer_within_timeout(served: tuple[str, FakeLLM]) -> None:
    kind, _ = served
    result = await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="slow:0.1")], [], timeout=5)
    assert result.content == "slept 0.1"


async def test_streamed_answers_match_and_are_seen_growing(served: tuple[str, FakeLLM]) -> None:
    kind, fake = served
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    ask = [ChatMessage(role="user", content="stream:0.5:8")]
    whole = await complete(f"{kind}/fake-model", ask, [])
    streamed = await complete(f"{kind}/fake-model", ask, [], on_text=on_text)
    assert streamed == whole and whole.content.endswith("word8")
    assert len(seen) >= 8 and seen[-1] == whole.content
    assert all(later.startswith(earlier) for earlier, later in zip(seen, seen[1:], strict=False))
    call = [ChatMessage(role="user", content="run: echo hi")]
    a = await complete(f"{kind}/fake-model", call, [EXEC], on_text=on_text)
    b = await complete(f"{kind}/fake-model", call, [EXEC])
    assert [(c.name, c.arguments) for c in a.tool_calls] == \
        [(c.name, c.arguments) for c in b.tool_calls] == [("execute_command", {"command": "echo hi"})]
    assert (a.content, a.usage) == (b.content, b.usage)
    assert fake.streamed == 2
    with pytest.raises(ProviderError) as failed:
        await complete(f"{kind}/fake-model", [ChatMessage(role="user", content="status:404")], [],
                       on_text=on_text)
    assert not failed.value.retryable and "404" in failed.value.message


@pytest.mark.parametrize("spec", ["gpt-4o", "mistral/large", "openai/"])
async def test_bad_spec_is_not_retryable(spec: str) -> None:
    with pytest.raises(ProviderError) as info:
        await complete(spec, [ChatMessage(role="user", content="hi")], [])
    assert info.value.retryable is False
    assert spec in info.value.message


async def test_missing_openai_key_is_not_retryable() -> None:
    with pytest.raises(ProviderError) as info:
        await complete("openai/gpt-4o-mini", [ChatMessage(role="user", content="hi")], [])
    assert info.value.retryable is False
    assert "OPENAI_API_KEY" in info.value.message


# --- configuration -------------------------------------------------------------------------


def test_model_from_env_order() -> None:
    assert model_from_env({}) == ""
    assert model_from_env({"OLLAMA_HOST": "http://h:11434"}) == "ollama/llama3.2"
    assert model_from_env({"OPENAI_BASE_URL": "http://h/v1", "OLLAMA_HOST": "h"}) == "openai/gpt-4o-mini"
    assert model_from_env({"OPENAI_API_KEY": "k"}) == "openai/gpt-4o-mini"
    env = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "OLLAMA_HOST": "h"}
    assert model_from_env(env) == "anthropic/claude-sonnet-4-5"
    assert model_from_env({"ANTHROPIC_BASE_URL": "http://h"}) == "anthropic/claude-sonnet-4-5"
    assert model_from_env({"OPENAI_API_KEY": ""}) == ""


def test_model_from_env_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    assert model_from_env() == ""
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11434")
    assert model_from_env() == "ollama/llama3.2"


def test_provider_configured() -> None:
    assert provider_configured("anthropic", {"ANTHROPIC_API_KEY": "k"})
    assert provider_configured("openai", {"OPENAI_BASE_URL": "http://h/v1"})
    assert not provider_configured("ollama", {"OPENAI_API_KEY": "k"})
    assert not provider_configured("nonsense", {"OPENAI_API_KEY": "k"})


def test_importing_providers_loads_no_sdk() -> None:
    code = ("import sys, actors.llm.providers; "
            "print([m for m in ('anthropic', 'openai', 'ollama', 'httpx', 'httpx2') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_sdk_is_imported_on_the_first_call_to_its_provider_only() -> None:
    code = ("import asyncio, sys; from actors.llm.providers import load_sdk\n"
            "asyncio.run(load_sdk('ollama')); asyncio.run(load_sdk('nonsense'))\n"
            "print([m for m in ('anthropic', 'openai', 'ollama') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "['ollama']"


async def test_a_missing_sdk_is_an_import_error_for_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(providers.SDKS, "openai", "no_such_sdk_module")
    with pytest.raises(ImportError):
        await providers.load_sdk("openai")


def test_openai_invalid_json_arguments_are_kept_raw() -> None:
    from openai.types.chat import ChatCompletion

    resp = ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"a": 1}'}},
                {"id": "c3", "type": "function", "function": {"name": "h", "arguments": ""}}]}}],
    })
    content, calls, usage, model = _convert.openai_result(resp)
    assert content == "" and model == "m" and usage.input_tokens == 0
    assert [c.arguments for c in calls] == [{"_raw": "{not json"}, {"a": 1}, {}]


# --- the fake servers themselves -----------------------------------------------------------


def test_brain_rules() -> None:
    def user(text: str) -> list[dict[str, object]]:
        return [{"role": "user", "content": text, "tool_calls": []}]

    assert decide(user("run: echo hi && ls")).arguments == {"command": "echo hi && ls"}
    assert decide(user("run: echo hi")).tool == "execute_command"
    assert (decide(user("remember: I like tea")).tool, decide(user("remember: I like tea")).arguments) == (
        "memory_save", {"content": "I like tea"})
    assert decide(user("recall: tea")).tool == "memory_search"
    assert decide(user("recall: tea")).arguments == {"query": "tea"}
    assert decide(user('tool:web.get {"url": "http://x"}')).tool == "web.get"
    assert decide(user("tool:broken {nope")).text == "echo: tool:broken {nope"
    assert decide(user("slow:0.5")).sleep == 0.5
    assert decide(user("status:502")).status == 502
    assert decide(user("rerun: x")).text == "echo: rerun: x"
    history = user("run: ls") + [{"role": "assistant", "content": "", "tool_calls": []},
                                 {"role": "tool", "content": " ok \n", "tool_calls": []}]
    assert decide(history).text == "Tool said: ok"


async def test_model_listing_through_the_sdks(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic
    import ollama
    import openai

    fakes = {kind: await _serve(kind, monkeypatch) for kind in KINDS}
    try:
        oa = openai.AsyncOpenAI(base_url=fakes["openai"].url, api_key="k")
        assert "gpt-4o-mini" in [m.id async for m in oa.models.list()]
        an = anthropic.AsyncAnthropic(base_url=fakes["anthropic"].url, api_key="k")
        assert "claude-sonnet-4-5" in [m.id async for m in an.models.list()]
        ol = ollama.AsyncClient(host=fakes["ollama"].url)
        assert "llama3.2:latest" in [m.model for m in (await ol.list()).models]
    finally:
        for fake in fakes.values():
            await fake.stop()


async def test_fake_server_runs_as_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "ollama", "--port", "0",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        url = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        assert url.startswith("http://127.0.0.1:")
        monkeypatch.setenv("OLLAMA_HOST", url)
        result = await complete("ollama/llama3.2", [ChatMessage(role="user", content="remember: milk")], [])
        assert result.tool_calls[0].name == "memory_save"
        assert result.tool_calls[0].arguments == {"content": "milk"}
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) == 0

