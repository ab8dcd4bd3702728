"""web_request: POST/PUT/PATCH/DELETE to allowlisted domains; a new domain asks the owner and,
once approved, is kept in the trust ledger."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from actors.executor import ssrf
from actors.executor._http import exchange, read_capped
from actors.executor._limits import RateLimiter
from actors.executor._trust import TrustLedger
from actors.executor.base import Tool, ToolContext, ToolOutput, arg_str
from actors.executor.ssrf import EgressError, PolicyRefusal, check_url, domain_matches
from actors.executor.web import describe, network, render_body, request_timeout
from contracts import ToolRequest, ToolSpec

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
_DROP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class WebRequest(Tool):
    spec = ToolSpec(
        name="web_request",
        description=(
            "HTTP POST, PUT, PATCH or DELETE to an allowed domain (config allowlist or approved "
            "before). A new domain asks the owner first; once approved it stays trusted. "
            "Redirects are not followed."
        ),
        parameters={
            "type": "object",
            "properties": {
                "url": {"type": "string"},
                "method": {"type": "string", "enum": list(WRITE_METHODS)},
                "json": {"description": "A JSON body (sets content-type application/json)."},
                "body": {"type": "string", "description": "A raw text body."},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "timeout_secs": {"type": "number"},
            },
            "required": ["url", "method"],
        },
    )
    owner_only = True
    outbound = True

    def __init__(self) -> None:
        self.limiter: RateLimiter | None = None

    async def _standing(self, req: ToolRequest, ctx: ToolContext) -> tuple[str, str]:
        """(host, how it may be called: 'allowed', 'trusted', 'always-approve' or 'new')."""
        _, host, _, _ = ssrf.split_url(arg_str(req, "url"))
        egress = ctx.config.egress
        if domain_matches(host, egress.always_approve_domains, subdomains=True):
            return host, "always-approve"
        if domain_matches(host, egress.allowed_domains, subdomains=False):
            return host, "allowed"
        if await TrustLedger(ctx.bus).get(host) is not None:
            return host, "trusted"
        return host, "new"

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        try:
            host, standing = await self._standing(req, ctx)
        except EgressError:
            return ""  # run() refuses it with the reason
        if domain_matches(host, ctx.config.egress.blocked_domains, subdomains=True):
            return ""
        if standing == "always-approve":
            return f"{host} is in egress.always_approve_domains, so every write asks first"
        if standing == "new":
            return (f"{host} is not an allowed domain yet; approving also adds it to the "
                    "trusted domains for later requests")
        return ""

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        egress = ctx.config.egress
        method = arg_str(req, "method").upper()
        if method not in WRITE_METHODS:
            return ToolOutput(ok=False, output=(
                f"web_request sends {', '.join(WRITE_METHODS)}; use web_fetch for GET."))
        self.limiter = self.limiter or RateLimiter(egress.request_rate_limit)
        refusal = self.limiter.refusal(self.name)
        if refusal:
            return ToolOutput(ok=False, output=refusal, refused=True)
        timeout = request_timeout(req, ctx)
        try:
            host, standing = await self._standing(req, ctx)
            headers, content = _request_body(req)
            target = await check_url(arg_str(req, "url"), network(), egress.blocked_domains)
            if standing == "new":  # we only get here once the owner approved this call
                await TrustLedger(ctx.bus).add(host, req.id)
            async with asyncio.timeout(timeout + 5), exchange(
                network(), target, method, with_length(headers, content), content, timeout
            ) as (head, chunks):
                body = await read_capped(head, chunks, egress.max_fetch_bytes)
        except PolicyRefusal as exc:  # a refused URL is the policy working, not a failure
            return ToolOutput(ok=False, output=str(exc), refused=True)
        except EgressError as exc:
            return ToolOutput(ok=False, output=str(exc))
        except TimeoutError:
            return ToolOutput(ok=False, output=f"web_request gave up after {timeout:g}s.",
                              timed_out=True)
        text = describe(head, body, egress.max_fetch_bytes) + render_body(head, body, raw=True)
        return ToolOutput(ok=200 <= head.status < 400, output=text)


def _request_body(req: ToolRequest) -> tuple[list[tuple[str, str]], bytes | None]:
    """Headers (without ones that would change where the request goes) and the body bytes."""
    raw: Any = req.arguments.get("headers") or {}
    if not isinstance(raw, dict):
        raise EgressError("headers must be an object of header names to string values.")
    headers = [(str(k), str(v)) for k, v in raw.items() if str(k).lower() not in _DROP_HEADERS]
    if "json" in req.arguments:
        if not any(k.lower() == "content-type" for k, _ in headers):
            headers.append(("Content-Type", "application/json"))
        return headers, msgspec.json.encode(req.arguments["json"])
    body = req.arguments.get("body")
    return headers, (str(body).encode() if body is not None else None)


def with_length(headers: list[tuple[str, str]], content: bytes | None) -> list[tuple[str, str]]:
    """httpcore sends exactly the headers it is given, so a body needs its Content-Length."""
    return headers if content is None else [*headers, ("Content-Length", str(len(content)))]
