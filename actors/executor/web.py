"""web_fetch: HTTP GET of public URLs (SSRF-filtered, redirects re-checked per hop), as text or
saved into the workspace; plus the helpers web_request shares."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

from actors.executor._http import Body, Head, follow, read_capped
from actors.executor._limits import RateLimiter
from actors.executor.base import Tool, ToolContext, ToolOutput, arg_float, arg_str
from actors.executor.ssrf import EgressError, Network, PolicyRefusal
from contracts import ToolRequest, ToolSpec
from kit import safefs

#: Replaced by tests to point "public" names at loopback servers; read at call time.
NETWORK: Network = Network()
_TEXTUAL = re.compile(r"^text/|json|xml|javascript|ecmascript|yaml|csv|x-www-form-urlencoded")


def network() -> Network:
    """The network in use (tests replace NETWORK)."""
    return NETWORK


def request_timeout(req: ToolRequest, ctx: ToolContext) -> float:
    """The call's timeout_secs, capped by egress.timeout_secs."""
    limit = ctx.config.egress.timeout_secs
    return max(0.1, min(arg_float(req, "timeout_secs", limit), limit))


def _charset(content_type: str) -> str:
    match = re.search(r"charset=[\"']?([A-Za-z0-9_.:-]+)", content_type)
    return match.group(1) if match else "utf-8"


def render_body(head: Head, body: Body, *, raw: bool = False) -> str:
    """The body as text for the model: HTML as readable text unless raw, binary described."""
    ctype = head.content_type.split(";")[0].strip().lower()
    data = body.data
    textual = bool(_TEXTUAL.search(ctype)) or (not ctype and b"\x00" not in data[:4096])
    if not textual:
        return (f"[binary content ({ctype or 'unknown type'}), not shown; "
                "use save_to to download it into the workspace]")
    try:
        text = data.decode(_charset(head.content_type), errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    if ctype in ("text/html", "application/xhtml+xml") and not raw:
        from actors.executor._html import html_to_text

        text = html_to_text(text)
    return text


def describe(head: Head, body: Body, limit: int) -> str:
    """Status line, type and size, then a blank line."""
    cut = f"; cut at {limit} bytes" if body.truncated else ""
    lines = [f"HTTP {head.status} {head.reason}".rstrip() + f" from {head.url}",
             f"content-type: {head.content_type or 'unknown'}",
             f"body: {len(body.data)} bytes{cut}"]
    if head.status in (301, 302, 303, 307, 308) and head.headers.get("location"):
        lines.append(f"location: {head.headers['location']} (not followed)")
    return "\n".join(lines) + "\n\n"


def workspace_path(ctx: ToolContext, save_to: str) -> str:
    """save_to as a path relative to the workspace; EgressError for anything outside it. Links
    are refused when the file is written (kit.safefs), not resolved here."""
    rel = save_to.strip()
    for prefix in ("/workspace/", "workspace/"):
        if rel.startswith(prefix):
            rel = rel[len(prefix):]
    if not rel or rel.startswith("/") or rel.startswith("~"):
        raise EgressError("save_to must be a file path inside the workspace, e.g. 'downloads/x.zip'.")
    try:
        return "/".join(safefs.relative_parts(rel))
    except safefs.UnsafePath as exc:
        raise EgressError("save_to must stay inside the workspace (no '..').") from exc


class WebFetch(Tool):
    spec = ToolSpec(
        name="web_fetch",
        description=(
            "HTTP GET a public URL. Returns the page as text (HTML converted to readable text, "
            "cut at a size limit), or with save_to downloads the file (binary ok) into the "
            "workspace. Private, loopback and cloud-metadata addresses are refused."
        ),
        parameters={
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "http:// or https:// URL."},
                "save_to": {"type": "string",
                            "description": "Workspace-relative file path to save the body to."},
                "raw": {"type": "boolean", "description": "Return HTML source, not text."},
                "large": {"type": "boolean", "description": (
                    "With save_to: allow a file over the approval size; asks the owner first.")},
                "timeout_secs": {"type": "number"},
            },
            "required": ["url"],
        },
    )
    side_effects = False  # a GET is safe to repeat after an executor restart
    outbound = True

    def __init__(self) -> None:
        self.limiter: RateLimiter | None = None

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        if req.arguments.get("save_to") and req.arguments.get("large") is True:
            mb = ctx.config.egress.approve_download_bytes / 1e6
            return f"the download may be larger than {mb:g} MB and would fill the disk"
        return ""

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        egress = ctx.config.egress
        self.limiter = self.limiter or RateLimiter(egress.fetch_rate_limit)
        refusal = self.limiter.refusal(self.name)
        if refusal:
            return ToolOutput(ok=False, output=refusal, refused=True)
        url, save_to = arg_str(req, "url"), arg_str(req, "save_to")
        timeout = request_timeout(req, ctx)
        try:
            async with asyncio.timeout(timeout + 5):  # backstop over the per-phase timeouts
                if save_to:
                    path = workspace_path(ctx, save_to)
                    large = req.arguments.get("large") is True
                    cap = egress.max_download_bytes if large else egress.approve_download_bytes
                    return await self._save(ctx, url, path, cap, large, timeout)
                return await self._text(ctx, url, req.arguments.get("raw") is True, timeout)
        except PolicyRefusal as exc:  # a refused URL is the policy working, not a failure
            return ToolOutput(ok=False, output=str(exc), refused=True)
        except EgressError as exc:
            return ToolOutput(ok=False, output=str(exc))
        except TimeoutError:
            return ToolOutput(ok=False, output=f"web_fetch gave up after {timeout:g}s.",
                              timed_out=True)

    async def _text(self, ctx: ToolContext, url: str, raw: bool, timeout: float) -> ToolOutput:
        limit = ctx.config.egress.max_fetch_bytes

        async def consume(head: Head, chunks: AsyncIterator[bytes]) -> ToolOutput:
            body = await read_capped(head, chunks, limit)
            text = describe(head, body, limit) + render_body(head, body, raw=raw)
            return ToolOutput(ok=200 <= head.status < 400, output=text)

        return await follow(url, network(), blocked_domains=ctx.config.egress.blocked_domains,
                            max_hops=ctx.config.egress.max_redirects, timeout=timeout,
                            consume=consume)

    async def _save(self, ctx: ToolContext, url: str, path: str, cap: int, large: bool,
                    timeout: float) -> ToolOutput:
        async def consume(head: Head, chunks: AsyncIterator[bytes]) -> ToolOutput:
            if not 200 <= head.status < 300:
                body = await read_capped(head, chunks, 2000)
                return ToolOutput(ok=False, output=describe(head, body, 2000)
                                  + "Nothing was saved.\n" + render_body(head, body))
            declared = int(head.headers.get("content-length", "0") or 0)
            if declared > cap:
                return ToolOutput(ok=False, output=_too_big(declared, cap, large))
            return await _write(path, ctx.workspace, chunks, cap, large, head)

        return await follow(url, network(), blocked_domains=ctx.config.egress.blocked_domains,
                            max_hops=ctx.config.egress.max_redirects, timeout=timeout,
                            consume=consume)


def _too_big(size: int, cap: int, large: bool) -> str:
    if large:
        return f"The file is over the download limit of {cap} bytes ({size}); nothing was saved."
    return (f"The file is larger than {cap} bytes ({size}); nothing was saved. Call web_fetch "
            "again with large=true to ask the owner to approve a bigger download.")


async def _write(rel: str, root: Path, chunks: AsyncIterator[bytes], cap: int, large: bool,
                 head: Head) -> ToolOutput:
    """Stream into a temporary file next to the target, then rename it into place; never
    through a link the sandbox planted (kit.safefs)."""
    size = 0
    try:
        # Local disk writes of network-sized chunks: the network is the slow side here.
        with safefs.atomic_writer(root, rel) as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > cap:
                    raise EgressError(_too_big(size, cap, large))
                out.write(chunk)
    except safefs.UnsafePath as exc:
        return ToolOutput(ok=False, output=f"Nothing was saved: {exc}")
    return ToolOutput(ok=True, output=(
        f"HTTP {head.status} from {head.url}\nsaved {size} bytes to workspace/{rel} "
        f"(content-type: {head.content_type or 'unknown'})"))
