"""Prometheus metrics, served by the supervisor at /metrics (`[telemetry] metrics_port`).

The supervisor sees every message (it is the bus admin): a core subscription to `<prefix>.>`
counts turns, replies, model calls and tokens, tool outcomes and dead letters, and times each
hop from its request to its answer as the bus carried them (turn, recall, model, tool). Queue
depth per durable consumer is read from JetStream; restarts and health from the supervisor's own
state. Nothing here is on a message's path: a slow scrape slows nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from bus import Bus, Delivery

log = logging.getLogger(__name__)

HOP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class _Pending(OrderedDict[str, tuple[float, str]]):
    """Start times of requests awaiting their answer (bounded: old ones are forgotten)."""

    LIMIT = 20_000

    def start(self, key: str, label: str = "") -> None:
        self[key] = (time.monotonic(), label)
        if len(self) > self.LIMIT:
            self.popitem(last=False)

    def finish(self, key: str) -> tuple[float, str] | None:
        found = self.pop(key, None)
        return (time.monotonic() - found[0], found[1]) if found else None


class Metrics:
    """The registry and what feeds it."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.turns = Counter("wintermute_turns_total", "Turns that entered the system.",
                             ["channel", "origin"], registry=r)
        self.replies = Counter("wintermute_replies_total", "Replies published.", ["channel"],
                               registry=r)
        self.hop = Histogram("wintermute_hop_seconds",
                             "Time from a request to its answer on the bus, per hop.",
                             ["hop"], buckets=HOP_BUCKETS, registry=r)
        self.model_seconds = Histogram("wintermute_model_seconds",
                                       "Model call time per model, request to response.",
                                       ["model"], buckets=HOP_BUCKETS, registry=r)
        self.tokens = Counter("wintermute_tokens_total", "Tokens used, per model and direction.",
                              ["model", "direction"], registry=r)
        self.model_errors = Counter("wintermute_model_errors_total",
                                    "Model calls answered with an error.", ["model"], registry=r)
        self.tools = Counter("wintermute_tool_calls_total", "Tool calls by outcome.",
                             ["tool", "outcome"], registry=r)
        self.tool_seconds = Histogram("wintermute_tool_seconds", "Tool run time (executor).",
                                      ["tool"], buckets=HOP_BUCKETS, registry=r)
        self.dead_letters = Counter("wintermute_dead_letters_total", "Dead-lettered messages.",
                                    ["actor"], registry=r)
        self.restarts = Gauge("wintermute_actor_restarts", "Restarts of each actor process.",
                              ["actor"], registry=r)
        self.healthy = Gauge("wintermute_actor_healthy", "1 when the actor reports healthy.",
                             ["actor"], registry=r)
        self.pending = Gauge("wintermute_consumer_pending",
                             "Messages waiting per durable consumer (pending: not yet "
                             "delivered; ack_pending: delivered, not yet acked).",
                             ["stream", "consumer", "state"], registry=r)
        self._waiting = _Pending()

    # -- from the bus -----------------------------------------------------------------------

    def observe(self, subject: str, data: bytes) -> None:
        """Account one message seen on the bus (anything undecodable is ignored)."""
        try:
            msg = msgspec.json.decode(data)
        except msgspec.DecodeError:
            return
        if not isinstance(msg, dict):
            return
        kind = msg.get("type")
        w = self._waiting
        if kind == "turn.request":
            channel = str((msg.get("reply_to") or {}).get("channel", ""))
            self.turns.labels(channel, str(msg.get("origin", "user"))).inc()
            w.start(f"turn:{msg.get('id')}", channel)
        elif kind == "turn.reply":
            channel = str((msg.get("sink") or {}).get("channel", ""))
            self.replies.labels(channel).inc()
            if done := w.finish(f"turn:{msg.get('turn_id')}"):
                self.hop.labels("turn").observe(done[0])
        elif kind == "memory.recall":
            w.start(f"recall:{msg.get('turn_id')}")
        elif kind == "memory.recalled":
            if done := w.finish(f"recall:{msg.get('turn_id')}"):
                self.hop.labels("recall").observe(done[0])
        elif kind == "llm.request":
            w.start(f"llm:{msg.get('id')}")
        elif kind == "llm.response":
            self._model(msg)
        elif kind == "tool.request":
            w.start(f"tool:{msg.get('id')}")
        elif kind == "tool.result":
            key = str(msg.get("id", "")).removesuffix(":result")
            if done := w.finish(f"tool:{key}"):
                self.hop.labels("tool").observe(done[0])
        elif kind == "tool.outcome":
            tool = str(msg.get("tool", ""))
            outcome = "ok" if msg.get("ok") else ("timeout" if msg.get("timed_out") else "error")
            self.tools.labels(tool, outcome).inc()
            self.tool_seconds.labels(tool).observe(float(msg.get("duration_ms") or 0) / 1000)
        elif kind == "deadletter":
            self.dead_letters.labels(subject.rsplit(".", 1)[-1]).inc()

    def _model(self, msg: dict[str, Any]) -> None:
        model = str(msg.get("model") or "unknown")
        usage = msg.get("usage") or {}
        self.tokens.labels(model, "input").inc(int(usage.get("input_tokens") or 0))
        self.tokens.labels(model, "output").inc(int(usage.get("output_tokens") or 0))
        if msg.get("error"):
            self.model_errors.labels(model).inc()
        if done := self._waiting.finish(f"llm:{msg.get('request_id')}"):
            self.hop.labels("model").observe(done[0])
            self.model_seconds.labels(model).observe(done[0])

    # -- from the supervisor and JetStream ------------------------------------------------

    def actors(self, state: dict[str, dict[str, Any]]) -> None:
        for name, st in state.items():
            self.restarts.labels(name).set(float(st.get("restarts", 0)))
            self.healthy.labels(name).set(1.0 if st.get("healthy") else 0.0)

    def consumer(self, stream: str, durable: str, pending: int, ack_pending: int) -> None:
        self.pending.labels(stream, durable, "pending").set(pending)
        self.pending.labels(stream, durable, "ack_pending").set(ack_pending)


async def serve_metrics(bus: Bus, metrics: Metrics, host: str, port: int,
                        actors: Callable[[], dict[str, dict[str, Any]]],
                        durables: list[tuple[str, str]], every: float = 10.0) -> str:
    """Start /metrics and the feeders; the URL. Runs until cancelled (feeders only)."""
    server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    bound = server.server_address[1]
    url = f"http://{host}:{bound}/metrics"

    async def on_msg(msg: Delivery) -> None:
        metrics.observe(msg.subject, msg.data)

    await bus.subscribe(f"{bus.subjects.p}.>", on_msg)

    async def poll() -> None:
        while True:
            with contextlib.suppress(Exception):
                metrics.actors(actors())
            for stream, durable in durables:
                with contextlib.suppress(Exception):
                    pending, ack_pending = await bus.consumer_backlog(stream, durable)
                    metrics.consumer(stream, durable, pending, ack_pending)
            await asyncio.sleep(every)

    asyncio.get_running_loop().create_task(poll(), name="metrics-poll")
    log.info("metrics at %s", url)
    return url
