"""Local fake model servers speaking the real OpenAI, Anthropic and Ollama wire protocols.

All three share one scripted brain (`decide`) that reads the conversation, normalised to a
neutral list of {"role", "content", "tool_calls"} dicts, and picks the answer:

- last user message has "loop: CMD"     -> tool call execute_command {"command": CMD}, again
                                           after every result (a model stuck in a loop)
- last message is a tool result        -> text "Tool said: <result, stripped>"
- last user message has "run: CMD"      -> tool call execute_command {"command": CMD}
- ... "remember: TEXT"                  -> tool call memory_save {"content": TEXT}
- ... "recall: QUERY"                   -> tool call memory_search {"query": QUERY}
- ... "tool:NAME {json object}"         -> tool call NAME with that object as arguments
- ... "slow:SECONDS"                    -> sleep, then text "slept SECONDS"
- ... "stream:SECONDS[:WORDS]"          -> text "Streamed: word1 … wordWORDS" (default 12 words),
                                           spread evenly over SECONDS when the request streams
                                           (the whole text after SECONDS when it does not)
- ... "status:CODE"                     -> HTTP CODE with a provider-shaped error body
- a "[memory extraction]" system prompt -> a JSON list of facts from the transcript's user lines
                                           that say "my ..." (see `_extract`)
- a "[conversation summary]" system prompt -> the previous summary and the older user lines,
                                           joined with "; " (see `_summarise`)
- a "[tool reflection]" system prompt   -> a JSON list with one lesson per FAILED tool call
                                           (see `_reflect`)
- an "[agents consolidation]" system prompt -> the file with repeated lines dropped
- a "[memory dreaming]" system prompt   -> "Reworded: <the longest note>." (one sentence); two
                                           sentences when a note says "garbage-dream"
- otherwise                             -> text "echo: <last user message>"

Outages are scripted on the server, not in the conversation: each entry of `FakeLLM.faults`
(or POST /_fake/faults with a JSON list, for a server in another process) answers one request,
in order: "500" (HTTP 500), "hang" (no answer until the client gives up) or "garbage" (HTTP 200
with a body that is not JSON).

Requests may ask for `stream: true`: the answer (text, then any tool call) comes one word per
chunk as OpenAI SSE chunks (usage last with `stream_options.include_usage`, then `[DONE]`),
Anthropic SSE events (message_start, content blocks with text and input_json deltas,
message_delta with usage, message_stop) or Ollama NDJSON lines (counts on the last, `done` one).

Run one in the foreground:  python -m tests.fakes.llm_servers --kind openai --port 8911
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

KINDS = ("openai", "anthropic", "ollama")

DEFAULT_MODELS = {
    "openai": ["gpt-4o-mini", "fake-model"],
    "anthropic": ["claude-sonnet-4-5", "fake-model"],
    "ollama": ["llama3.2:latest", "fake-model:latest"],
}


# --- the brain -----------------------------------------------------------------------------


@dataclass
class Decision:
    """What the fake model does: answer `text`, call `tool`, fail with `status`, maybe after `sleep`."""

    text: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    sleep: float = 0.0
    spread: float = 0.0  # seconds over which a streamed text is emitted

    def output_chars(self) -> int:
        """Characters of the answer, for usage counting."""
        if self.tool:
            return len(self.tool) + len(json.dumps(self.arguments))
        return len(self.text)


_RULES = (
    (re.compile(r"(?<!\w)run:\s*(.+)", re.S), "execute_command", "command"),
    (re.compile(r"(?<!\w)remember:\s*(.+)", re.S), "memory_save", "content"),
    (re.compile(r"(?<!\w)recall:\s*(.+)", re.S), "memory_search", "query"),
)
_TOOL = re.compile(r"(?<!\w)tool:([A-Za-z0-9_.\-]+)\s+(?=\{)")
_SLOW = re.compile(r"(?<!\w)slow:\s*(\d+(?:\.\d+)?)")
_STATUS = re.compile(r"(?<!\w)status:\s*(\d{3})")
_LOOP = re.compile(r"(?<!\w)loop:\s*(.+)", re.S)
_STREAM = re.compile(r"(?<!\w)stream:\s*(\d+(?:\.\d+)?)(?::(\d+))?")


def _extract(transcript: str) -> Decision:
    """The observer's memory extraction: each user line saying "my ..." becomes a fact (0.9 sure,
    0.5 with "perhaps"); a line with "garbage-json" makes the answer malformed."""
    if "garbage-json" in transcript:
        return Decision(text="Sure! Here are the facts: the user, probably, likes things.")
    items = [
        {"content": line[len("user: "):].strip(), "kind": "fact",
         "confidence": 0.5 if "perhaps" in line else 0.9}
        for line in transcript.splitlines()
        if line.startswith("user: ") and " my " in f" {line[len('user: '):].lower()}"
    ]
    return Decision(text=json.dumps(items))


def _summarise(text: str) -> Decision:
    """A rolling summary: the previous summary's points plus the older user lines, joined."""
    before, _, older = text.partition("Older messages:")
    previous = before.removeprefix("Summary so far:").strip()
    points = [] if previous in ("", "(none)") else [previous]
    points += [line[len("user: "):] for line in older.splitlines() if line.startswith("user: ")]
    return Decision(text="; ".join(points))


def _reflect(calls: str) -> Decision:
    """The observer's reflection on tool use: one lesson per failed call ("NAME: FAILED: why");
    a call whose output says "garbage-json" makes the answer malformed."""
    if "garbage-json" in calls:
        return Decision(text="I learned a lot from those tools today.")
    lessons = [f"When {name} fails ({why.strip()[:60]}), find the cause before retrying."
               for name, _, why in (line.partition(": FAILED: ") for line in calls.splitlines())
               if why]
    return Decision(text=json.dumps(lessons))


def _dream(notes: str) -> Decision:
    """Dreaming's rewording of near-duplicate notes ("- NOTE" lines) into one sentence."""
    lines = [line[2:].strip() for line in notes.splitlines() if line.startswith("- ")]
    if any("garbage-dream" in line for line in lines):
        return Decision(text="These notes say the same. Here is everything they say.")
    longest = max(lines, key=len, default="nothing").rstrip(".!")
    return Decision(text=f"Reworded: {longest}.")


def decide(messages: list[dict[str, Any]]) -> Decision:
    """Pick the scripted answer for a neutral conversation."""
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if "[memory extraction]" in system:
        return _extract(messages[-1]["content"])
    if "[conversation summary]" in system:
        return _summarise(messages[-1]["content"])
    if "[tool reflection]" in system:
        return _reflect(messages[-1]["content"])
    if "[memory dreaming]" in system:
        return _dream(messages[-1]["content"])
    if "[agents consolidation]" in system:
        return Decision(text="\n".join(dict.fromkeys(messages[-1]["content"].splitlines())))
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    if match := _LOOP.search(last_user):
        return Decision(tool="execute_command", arguments={"command": match.group(1).strip()})
    if messages and messages[-1]["role"] == "tool":
        results = []
        for m in reversed(messages):
            if m["role"] != "tool":
                break
            results.append(m["content"].strip())
        return Decision(text="Tool said: " + " | ".join(reversed(results)))
    text = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    for pattern, tool, key in _RULES:
        if match := pattern.search(text):
            return Decision(tool=tool, arguments={key: match.group(1).strip()})
    if match := _TOOL.search(text):
        try:
            args, _ = json.JSONDecoder().raw_decode(text, match.end())
        except ValueError:
            args = None
        if isinstance(args, dict):
            return Decision(tool=match.group(1), arguments=args)
    if match := _SLOW.search(text):
        return Decision(text=f"slept {match.group(1)}", sleep=float(match.group(1)))
    if match := _STATUS.search(text):
        return Decision(status=int(match.group(1)))
    if match := _STREAM.search(text):
        words = int(match.group(2) or 12)
        answer = "Streamed: " + " ".join(f"word{i}" for i in range(1, words + 1))
        return Decision(text=answer, spread=float(match.group(1)))
    return Decision(text=f"echo: {text}")


def usage_of(messages: list[dict[str, Any]], decision: Decision) -> tuple[int, int]:
    """(input tokens, output tokens): characters of all message contents // 4, answer // 4 (>= 1)."""
    chars = sum(len(m["content"]) for m in messages)
    return chars // 4, max(1, decision.output_chars() // 4)


def _text_of(content: Any) -> str:
    """Plain text of a string or a list of text parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def _args_of(raw: Any) -> dict[str, Any]:
    """Tool-call arguments from a JSON string or an object."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"_raw": raw}
    return raw if isinstance(raw, dict) else {"_raw": raw}


def normalise(kind: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request body's conversation as neutral {"role", "content", "tool_calls"} dicts."""
    out: list[dict[str, Any]] = []
    if kind == "anthropic":
        if body.get("system"):
            out.append({"role": "system", "content": _text_of(body["system"]), "tool_calls": []})
        for m in body.get("messages", []):
            content = m.get("content")
            blocks = content if isinstance(content, list) else []
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    out.append({"role": "tool", "content": _text_of(b.get("content")), "tool_calls": [],
                                "tool_call_id": b.get("tool_use_id", "")})
            calls = [{"id": b.get("id", ""), "name": b.get("name", ""), "arguments": _args_of(b.get("input"))}
                     for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            text = _text_of(content)
            if text or calls or not blocks:
                out.append({"role": m.get("role", "user"), "content": text, "tool_calls": calls})
        return out
    for m in body.get("messages", []):
        calls = []
        for c in m.get("tool_calls") or []:
            fn = c.get("function", {})
            calls.append({"id": c.get("id", ""), "name": fn.get("name", ""), "arguments": _args_of(fn.get("arguments"))})
        out.append({"role": m.get("role", "user"), "content": _text_of(m.get("content")), "tool_calls": calls,
                    "tool_call_id": m.get("tool_call_id") or m.get("tool_name") or ""})
    return out


# --- wire formats --------------------------------------------------------------------------

_OPENAI_ERRORS = {400: "invalid_request_error", 401: "invalid_api_key", 403: "permission_denied",
                  404: "model_not_found", 429: "rate_limit_exceeded"}
_ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                     404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                     500: "api_error", 529: "overloaded_error"}


def _error_body(kind: str, status: int, message: str) -> dict[str, Any]:
    """The error JSON each provider sends with a non-2xx status."""
    if kind == "openai":
        code = _OPENAI_ERRORS.get(status, "server_error")
        etype = "invalid_request_error" if status < 500 and status != 429 else code
        return {"error": {"message": message, "type": etype, "param": None, "code": code}}
    if kind == "anthropic":
        etype = _ANTHROPIC_ERRORS.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": etype, "message": message}, "request_id": "req_fake"}
    return {"error": message}


def _openai_reply(n: int, model: str, d: Decision, usage: tuple[int, int]) -> dict[str, Any]:
    """A chat.completion object."""
    message: dict[str, Any] = {"role": "assistant", "content": d.text or None, "refusal": None}
    if d.tool:
        message["tool_calls"] = [{"id": f"call_fake{n}", "type": "function",
                                  "function": {"name": d.tool, "arguments": json.dumps(d.arguments)}}]
    return {
        "id": f"chatcmpl-fake{n}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if d.tool else "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def _anthropic_reply(n: int, model: str, d: Decision, usage: tuple[int, int]) -> dict[str, Any]:
    """A Messages API message object."""
    content: list[dict[str, Any]] = []
    if d.text:
        content.append({"type": "text", "text": d.text})
    if d.tool:
        content.append({"type": "tool_use", "id": f"toolu_fake{n}", "name": d.tool, "input": d.arguments})
    return {
        "id": f"msg_fake{n}", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": "tool_use" if d.tool else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def _ollama_reply(model: str, d: Decision, usage: tuple[int, int]) -> dict[str, Any]:
    """A final (done) /api/chat response."""
    message: dict[str, Any] = {"role": "assistant", "content": d.text}
    if d.tool:
        message["tool_calls"] = [{"function": {"name": d.tool, "arguments": d.arguments}}]
    return {
        "model": model, "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "message": message, "done": True, "done_reason": "stop", "total_duration": 1_000_000,
        "load_duration": 1000, "prompt_eval_count": usage[0], "prompt_eval_duration": 1000,
        "eval_count": usage[1], "eval_duration": 1000,
    }


def _words(text: str) -> list[str]:
    """`text` cut before each word (whitespace kept), for streaming it piece by piece."""
    words = re.findall(r"\s*\S+", text)
    rest = text[len("".join(words)) :]
    return [*words, rest] if rest else words


# --- the server ----------------------------------------------------------------------------


class FakeLLM:
    """One fake provider server; `requests` holds every decoded chat request body, `calls` counts them."""

    def __init__(self, *, api_key: str | None = None, models: list[str] | None = None,
                 retry_after_ms: int | None = 10) -> None:
        self.kind = ""
        self.url = ""
        self.api_key = api_key
        self.models = models
        self.retry_after_ms = retry_after_ms
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.calls = 0
        self.streamed = 0  # requests answered as a stream
        self.faults: list[str] = []  # scripted outage, one entry per request: 500, hang, garbage
        self._runner: web.AppRunner | None = None

    async def start(self, kind: str, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve `kind` on host:port (0 picks a free port) and return the base URL for its SDK."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.kind = kind
        self.models = self.models or DEFAULT_MODELS[kind]
        app = web.Application()
        app.router.add_post("/_fake/faults", self._set_faults)
        if kind == "openai":
            app.router.add_post("/v1/chat/completions", self._chat)
            app.router.add_get("/v1/models", self._list_models)
        elif kind == "anthropic":
            app.router.add_post("/v1/messages", self._chat)
            app.router.add_get("/v1/models", self._list_models)
        else:
            app.router.add_post("/api/chat", self._chat)
            app.router.add_get("/api/tags", self._list_models)
            app.router.add_get("/", self._ollama_root)
        # handler_cancellation: like a real server, stop work when the client hangs up
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0][1]
        self.url = f"http://{host}:{bound}" + ("/v1" if kind == "openai" else "")
        return self.url

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _error(self, status: int, message: str) -> web.Response:
        """A provider-shaped error response (retryable ones carry retry-after-ms, as OpenAI sends)."""
        headers = {}
        if self.retry_after_ms is not None and (status >= 500 or status in (408, 409, 429)):
            headers["retry-after-ms"] = str(self.retry_after_ms)
        if self.kind == "anthropic":
            headers["request-id"] = "req_fake"
        return web.json_response(_error_body(self.kind, status, message), status=status, headers=headers)

    async def _set_faults(self, request: web.Request) -> web.Response:
        """Script the next requests' failures from another process (`just chaos`)."""
        self.faults = [str(f) for f in await request.json()]
        return web.json_response({"faults": len(self.faults)})

    async def _fault(self) -> web.StreamResponse | None:
        """The scripted failure for this request, if one is queued."""
        if not self.faults:
            return None
        fault = self.faults.pop(0)
        if fault == "hang":
            await asyncio.sleep(3600)
        if fault == "garbage":
            return web.Response(text='{"id": "chatcmpl-broken", "choices": [', status=200,
                                content_type="application/json")
        return self._error(int(fault) if fault.isdigit() else 500, "Scripted outage.")

    def _authorised(self, request: web.Request) -> bool:
        """Whether the request carries the expected key (always, when no key is required)."""
        if not self.api_key:
            return True
        bearer = request.headers.get("Authorization", "")
        return bearer == f"Bearer {self.api_key}" or request.headers.get("x-api-key") == self.api_key

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        """Handle one chat request in this server's protocol."""
        self.calls += 1
        self.headers.append(dict(request.headers))
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "The request body is not valid JSON.")
        self.requests.append(body)
        if (failed := await self._fault()) is not None:
            return failed
        if not self._authorised(request):
            return self._error(401, "Invalid API key.")
        model = str(body.get("model", ""))
        if not model:
            return self._error(400, "model is required")
        stream = bool(body.get("stream", self.kind == "ollama"))
        messages = normalise(self.kind, body)
        d = decide(messages)
        if d.sleep:
            await asyncio.sleep(d.sleep)
        if d.status:
            return self._error(d.status, f"Scripted failure with status {d.status}.")
        usage = usage_of(messages, d)
        if stream:
            self.streamed += 1
            if self.kind == "anthropic":
                return await self._anthropic_stream(request, model, d, usage)
            return await self._stream(request, body, model, d, usage)
        if d.spread:
            await asyncio.sleep(d.spread)
        if self.kind == "openai":
            return web.json_response(_openai_reply(self.calls, model, d, usage))
        if self.kind == "anthropic":
            return web.json_response(_anthropic_reply(self.calls, model, d, usage))
        return web.json_response(_ollama_reply(model, d, usage))

    async def _stream(self, request: web.Request, body: dict[str, Any], model: str, d: Decision,
                      usage: tuple[int, int]) -> web.StreamResponse:
        """The answer as OpenAI SSE chunks or Ollama NDJSON lines, one word at a time."""
        openai = self.kind == "openai"
        resp = web.StreamResponse(headers={
            "Content-Type": "text/event-stream" if openai else "application/x-ndjson",
            "Cache-Control": "no-cache"})
        await resp.prepare(request)

        async def send(obj: dict[str, Any]) -> None:
            line = f"data: {json.dumps(obj)}\n\n" if openai else json.dumps(obj) + "\n"
            await resp.write(line.encode())

        n = self.calls
        base = {"id": f"chatcmpl-fake{n}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model, "system_fingerprint": "fp_fake"}
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")

        def delta(part: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            if openai:
                return {**base, "choices": [{"index": 0, "delta": part, "logprobs": None,
                                             "finish_reason": finish}]}
            message = {"role": "assistant", "content": part.get("content", "")}
            if "tool_calls" in part:
                message["tool_calls"] = part["tool_calls"]
            return {"model": model, "created_at": stamp, "message": message, "done": False}

        if openai:
            await send(delta({"role": "assistant", "content": ""}))
        words = _words(d.text)
        pause = d.spread / len(words) if d.spread and words else 0.0
        for word in words:
            if pause:
                await asyncio.sleep(pause)
            await send(delta({"content": word}))
        if d.tool and openai:
            args = json.dumps(d.arguments)
            half = len(args) // 2
            await send(delta({"tool_calls": [{"index": 0, "id": f"call_fake{n}", "type": "function",
                                              "function": {"name": d.tool, "arguments": args[:half]}}]}))
            await send(delta({"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]}))
        elif d.tool:
            await send(delta({"tool_calls": [{"function": {"name": d.tool, "arguments": d.arguments}}]}))
        if openai:
            await send(delta({}, "tool_calls" if d.tool else "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                await send({**base, "choices": [], "usage": {
                    "prompt_tokens": usage[0], "completion_tokens": usage[1],
                    "total_tokens": sum(usage)}})
            await resp.write(b"data: [DONE]\n\n")
        else:
            await send(_ollama_reply(model, Decision(), usage))
        await resp.write_eof()
        return resp

    async def _anthropic_stream(self, request: web.Request, model: str, d: Decision,
                                usage: tuple[int, int]) -> web.StreamResponse:
        """The answer as Anthropic's server-sent events, one word per text delta."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache", "request-id": "req_fake"})
        await resp.prepare(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode())

        n = self.calls
        await send("message_start", {"message": {
            "id": f"msg_fake{n}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": 1}}})
        index = 0
        if d.text:
            await send("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            words = _words(d.text)
            pause = d.spread / len(words) if d.spread and words else 0.0
            for word in words:
                if pause:
                    await asyncio.sleep(pause)
                await send("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": word}})
            await send("content_block_stop", {"index": 0})
            index = 1
        if d.tool:
            await send("content_block_start", {"index": index, "content_block": {
                "type": "tool_use", "id": f"toolu_fake{n}", "name": d.tool, "input": {}}})
            args = json.dumps(d.arguments)
            for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
                await send("content_block_delta", {"index": index, "delta": {
                    "type": "input_json_delta", "partial_json": piece}})
            await send("content_block_stop", {"index": index})
        await send("message_delta", {"delta": {"stop_reason": "tool_use" if d.tool else "end_turn",
                                               "stop_sequence": None},
                                     "usage": {"output_tokens": usage[1]}})
        await send("message_stop", {})
        await resp.write_eof()
        return resp

    async def _list_models(self, request: web.Request) -> web.Response:
        """The model list in this server's protocol."""
        models = self.models or []
        if self.kind == "openai":
            return web.json_response({"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]})
        if self.kind == "anthropic":
            return web.json_response({"data": [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in models], "has_more": False,
                "first_id": models[0] if models else None, "last_id": models[-1] if models else None})
        return web.json_response({"models": [
            {"name": m, "model": m, "modified_at": "2025-01-01T00:00:00Z", "size": 1, "digest": "0" * 64,
             "details": {"format": "gguf", "family": "fake", "parameter_size": "1B",
                         "quantization_level": "Q4_0"}} for m in models]})

    async def _ollama_root(self, request: web.Request) -> web.Response:
        """Ollama answers its root path with a liveness sentence."""
        return web.Response(text="Ollama is running")


def _env_hint(kind: str, url: str) -> str:
    """The environment a client needs to use the fake at `url`."""
    return {"openai": f"OPENAI_BASE_URL={url}", "anthropic": f"ANTHROPIC_BASE_URL={url}",
            "ollama": f"OLLAMA_HOST={url}"}[kind]


async def _serve(kind: str, host: str, port: int, api_key: str | None) -> None:
    """Run one fake server until SIGINT or SIGTERM."""
    fake = FakeLLM(api_key=api_key)
    url = await fake.start(kind, host, port)
    print(url, flush=True)
    print(f"fake {kind} server; use {_env_hint(kind, url)}", flush=True, file=sys.stderr)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    await fake.stop()


def main(argv: list[str] | None = None) -> None:
    """Command line: run one fake server in the foreground, printing its base URL."""
    parser = argparse.ArgumentParser(description="Fake LLM server speaking a real provider protocol.")
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default=None, help="require this key (401 otherwise)")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.kind, args.host, args.port, args.api_key))


if __name__ == "__main__":
    main()
