"""The sandbox's only way out: an HTTP/HTTPS proxy that lets allowlisted domains through.

It speaks CONNECT (HTTPS, any TLS) and absolute-form HTTP requests. A host passes if it is in
`[egress] allowed_domains` ("example.com" exactly, "*.example.com" for its subdomains, as for
web_request) or is a package registry, is not under `blocked_domains`, the port is allowed,
and every address it resolves to is public (the web tools' SSRF rules: no loopback, private,
link-local, CGNAT, ULA or mapped private addresses), so a sandbox cannot reach the host, the
LAN or cloud metadata. It connects to the checked address, never resolving twice. Refusals are
HTTP 403 (502 when the site cannot be reached) with a sentence the agent can act on.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from actors.executor.ssrf import blocked_reason, domain_matches

log = logging.getLogger(__name__)

# Always allowed, so the agent can install what it needs.
PACKAGE_REGISTRIES = (
    "pypi.org", "files.pythonhosted.org",
    "registry.npmjs.org", "registry.yarnpkg.com",
    "crates.io", "index.crates.io", "static.crates.io",
    "proxy.golang.org", "sum.golang.org",
    "rubygems.org",
    "deb.debian.org", "security.debian.org",
    "archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com",
)
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
CHUNK = 65_536
HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive"})
REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Refused(Exception):
    """A request the proxy will not forward; the message is the sentence sent back."""

    def __init__(self, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


class Dialer:
    """How the proxy reaches the outside: DNS and TCP. Tests substitute one whose "public"
    addresses lead to loopback servers, since a test machine may have no internet."""

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise Refused(f"The egress proxy could not resolve {host} ({exc}).", 502) from exc
        return list(dict.fromkeys(str(info[4][0]) for info in infos))

    async def connect(self, ip: str, port: int) -> Streams:
        return await asyncio.open_connection(ip, port)


class EgressProxy:
    """Allowlist proxy on a unix socket (for sandboxes) or a TCP port."""

    def __init__(
        self, allowed_domains: Iterable[str], *, blocked_domains: Iterable[str] = (),
        ports: Iterable[int] = (80, 443), registries: bool = True, dialer: Dialer | None = None,
    ) -> None:
        self.named = [d.strip() for d in allowed_domains if d.strip()]
        self.allowed_domains = self.named + (list(PACKAGE_REGISTRIES) if registries else [])
        self.blocked_domains = list(blocked_domains)
        self.ports = frozenset(ports)
        self.registries = registries
        self.dialer = dialer or Dialer()
        self.allowed = 0
        self.refused = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def describe(self) -> str:
        """The allowlist in a few words, for IDENTITY.md and status."""
        text = f"allowed: {', '.join(self.named) or 'no domains'}"
        return text + (" plus package registries" if self.registries else "")

    def check_host(self, host: str, port: int) -> str:
        """The normalised host name; Refused unless it and the port are allowed."""
        name = host.strip("[]").lower().rstrip(".")
        blocked = domain_matches(name, self.blocked_domains, subdomains=True)
        if blocked:
            raise Refused(f"The egress proxy blocked {name}: the owner blocked {blocked} "
                          "(egress.blocked_domains).")
        if not domain_matches(name, self.allowed_domains, subdomains=False):
            raise Refused(
                f"The egress proxy blocked {name}: it is not in [egress] allowed_domains. "
                "Ask the owner to add it to config.toml if this site is needed."
            )
        if self.ports and port not in self.ports:
            allowed = ", ".join(str(p) for p in sorted(self.ports))
            raise Refused(f"The egress proxy blocked port {port} on {name}: only ports "
                          f"{allowed} are allowed.")
        return name

    async def resolve(self, host: str, port: int) -> list[str]:
        """Addresses for host, every one of them public; else Refused (nothing is dialled)."""
        addrs = await self.dialer.resolve(host, port)
        if not addrs:
            raise Refused(f"The egress proxy could not resolve {host}.", 502)
        for addr in addrs:
            try:
                why = blocked_reason(ipaddress.ip_address(addr.split("%", 1)[0]))
            except ValueError:
                why = "not an address"
            if why:
                raise Refused(f"The egress proxy blocked {host}: it resolves to {addr}, which is "
                              f"{why}; sandboxes may reach only public addresses.")
        return addrs

    async def start_unix(self, path: Path) -> None:
        """Listen on a unix socket anyone who can see it may use (mode 0666)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._server = await asyncio.start_unix_server(self._serve, path=str(path))
        os.chmod(path, 0o666)

    async def start_tcp(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on TCP; returns the port."""
        self._server = await asyncio.start_server(self._serve, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and cut open tunnels."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError):
            pass  # a client that hung up or sent garbage; nothing to answer
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")  # LimitOverrunError (a ValueError) past 64 KiB
        lines = head.decode("latin-1").split("\r\n")
        request = lines[0]
        try:
            method, target, version = request.split(" ", 2)
            if method.upper() == "CONNECT":
                host, _, port_text = target.rpartition(":")
                if not port_text.isdigit():
                    raise Refused("CONNECT needs host:port.", 400)
                up_reader, up_writer = await self._open(host, int(port_text))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                url = urlsplit(target)
                if url.scheme != "http" or not url.hostname:
                    raise Refused("Send plain-HTTP requests in absolute form (http://host/...) "
                                  "and use CONNECT for HTTPS.", 400)
                up_reader, up_writer = await self._open(url.hostname, url.port or 80)
                up_writer.write(_origin_form(method, url, version, lines[1:]))
        except Refused as refusal:
            return await self._refuse(writer, refusal, request)
        except ValueError:
            return await self._refuse(writer, Refused("Not an HTTP proxy request.", 400), request)
        self.allowed += 1
        log.info("egress allowed: %s", request)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def _open(self, host: str, port: int) -> Streams:
        """Check, resolve and connect to the first checked address that answers."""
        name = self.check_host(host, port)
        last = ""
        for addr in await self.resolve(name, port):
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    return await self.dialer.connect(addr, port)
            except (OSError, TimeoutError) as exc:
                last = str(exc) or "timed out"
        raise Refused(f"The egress proxy could not connect to {name}:{port} ({last}).", 502)

    async def _refuse(self, writer: asyncio.StreamWriter, refusal: Refused, what: str) -> None:
        self.refused += 1
        log.warning("egress refused: %s: %s", what, refusal)
        body = (str(refusal) + "\n").encode()
        writer.write(
            f"HTTP/1.1 {refusal.status} {REASONS.get(refusal.status, 'Error')}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode() + body
        )
        with contextlib.suppress(OSError):
            await writer.drain()


def _origin_form(method: str, url: SplitResult, version: str, headers: list[str]) -> bytes:
    """The request as the origin server expects it, one request per connection."""
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [h for h in headers if h and h.split(":", 1)[0].strip().lower() not in HOP_HEADERS]
    lines = [f"{method} {path} {version}", *kept, "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close the writer."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()
