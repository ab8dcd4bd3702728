"""The SSRF filter: parse a URL, resolve its host, refuse any non-public address, pin the rest.

Every address a name resolves to is checked (IPv4 and IPv6); if any one is not public the whole
host is refused, so a DNS answer mixing a public and a private address cannot slip through.
The address that passed is the one connected to (see `PinnedBackend`): nothing resolves the
name again between the check and the connect.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpcore

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressError(Exception):
    """A URL or address the web tools refuse; the message is a sentence for the model."""


class PolicyRefusal(EgressError):
    """Refused by policy (an address, scheme or domain not allowed): the tool worked as
    intended, so Flatline does not count it as the tool failing."""


_V4: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "'this network'"),
    ("10.0.0.0/8", "a private network"),
    ("100.64.0.0/10", "carrier-grade NAT space"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (where cloud metadata services live)"),
    ("172.16.0.0/12", "a private network"),
    ("192.0.0.0/24", "IETF protocol space"),
    ("192.0.2.0/24", "documentation space"),
    ("192.88.99.0/24", "6to4 relay space"),
    ("192.168.0.0/16", "a private network"),
    ("198.18.0.0/15", "benchmarking space"),
    ("198.51.100.0/24", "documentation space"),
    ("203.0.113.0/24", "documentation space"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved space"),
)
_V6: tuple[tuple[str, str], ...] = (
    ("::/96", "an unspecified, loopback or IPv4-compatible address"),
    ("::ffff:0:0/96", "IPv4-mapped space"),  # only reached if the mapped address was odd
    ("64:ff9b:1::/48", "local NAT64 space"),
    ("100::/64", "discard space"),
    ("2001::/23", "IETF protocol space (Teredo and others)"),
    ("2001:db8::/32", "documentation space"),
    ("2002::/16", "6to4 space"),
    ("fc00::/7", "a unique local (private) network"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_NETS = [(ipaddress.ip_network(n), why) for n, why in _V4 + _V6]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")


def blocked_reason(ip: IP) -> str:
    """Why the web tools refuse this address, or "" if it is a public one."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None
        )
        if embedded is not None:
            inner = blocked_reason(embedded)
            return f"{inner} (inside the IPv6 address {ip})" if inner else ""
    for net, why in _NETS:
        if ip.version == net.version and ip in net:
            return why
    if not ip.is_global:
        return "not a public address"
    return ""


def _number(label: str) -> int:
    """One label of an IPv4 literal in the forms URL parsers accept: 0x hex, 0 octal, decimal."""
    if label.startswith("0x"):
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label.startswith("0"):
        try:
            return int(label, 8)
        except ValueError:
            raise PolicyRefusal(f"{label!r} is not a valid octal number in an address.") from None
    return int(label)


def ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    """The address an IPv4 literal in any odd encoding means (127.1, 0x7f000001, 2130706433,
    0177.0.0.1), None for a name; EgressError for something numeric that is no address."""
    labels = host.split(".")
    if not _NUMERIC_LABEL.fullmatch(labels[-1]):
        return None
    if len(labels) > 4 or not all(_NUMERIC_LABEL.fullmatch(p) for p in labels):
        raise PolicyRefusal(f"The host {host!r} looks like an address but is not a valid one.")
    nums = [_number(p) for p in labels]
    head, last = nums[:-1], nums[-1]
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(nums)):
        raise PolicyRefusal(f"The host {host!r} looks like an address but is out of range.")
    value = last
    for i, n in enumerate(head):
        value += n << (24 - 8 * i)
    return ipaddress.IPv4Address(value)


@dataclass(frozen=True)
class Target:
    """A checked URL: where it points, and the one address that passed the filter."""

    url: str  # with an odd numeric host rewritten to its canonical form
    scheme: str
    host: str  # lower case, IDNA-encoded, without brackets
    port: int
    ip: str


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, url) of an http(s) URL, or EgressError with a sentence."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise PolicyRefusal(f"The URL {url!r} is not valid ({exc}).") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise PolicyRefusal(f"Only http and https URLs can be fetched, not {scheme or 'this'!r}.")
    if parts.username is not None or parts.password is not None:
        raise PolicyRefusal("URLs with a user name or password in them are refused.")
    raw = parts.hostname or ""
    if not raw:
        raise PolicyRefusal(f"The URL {url!r} has no host.")
    if "%" in raw:
        raise PolicyRefusal("IPv6 zone identifiers (%) are refused in URLs.")
    host = raw.rstrip(".")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        raise PolicyRefusal(f"The host {raw!r} is not a valid domain name.") from None
    if not host or any(c in host for c in " \\/@?#"):
        raise PolicyRefusal(f"The host {raw!r} is not a valid domain name.")
    port = port or (443 if scheme == "https" else 80)
    return scheme, host.lower(), port, parts.geturl()


def literal_ip(host: str) -> IP | None:
    """The address a host names literally (IPv6 or any IPv4 encoding), or None for a name."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise PolicyRefusal(f"The host {host!r} is not a valid IPv6 address.") from None
    return ipv4_literal(host)


def domain_matches(host: str, entries: Sequence[str], *, subdomains: bool) -> str:
    """The entry of `entries` that `host` falls under ("" if none). `*.x` always covers
    subdomains of x; with subdomains=True a plain entry covers them too."""
    for entry in entries:
        e = entry.strip().lower().rstrip(".")
        if e.startswith("*."):
            if host.endswith(e[1:]):
                return entry
        elif host == e or (subdomains and host.endswith("." + e)):
            return entry
    return ""


class Network:
    """How the web tools reach the outside: name resolution and TCP connections.

    The default uses the system resolver and real sockets; tests substitute their own to point
    "public" names at loopback servers and to record every connection attempt.
    """

    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to (in resolver order, without repeats)."""
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise EgressError(f"The host {host!r} could not be resolved ({exc.strerror}).") from None
        return list(dict.fromkeys(str(info[4][0]) for info in infos))

    def backend(self) -> httpcore.AsyncNetworkBackend:
        """The TCP connector to wrap; connections always go to an already checked address."""
        import httpcore

        return httpcore.AnyIOBackend()


async def check_url(url: str, network: Network, blocked_domains: Sequence[str] = ()) -> Target:
    """Parse, resolve and check a URL; return the target pinned to an address that passed."""
    scheme, host, port, clean = split_url(url)
    if host == "localhost" or host.endswith(".localhost"):
        raise PolicyRefusal(f"Refused {host}: it names this machine (loopback).")
    blocked = domain_matches(host, list(blocked_domains), subdomains=True)
    if blocked:
        raise PolicyRefusal(f"Refused {host}: the owner blocked {blocked} (egress.blocked_domains).")
    literal = literal_ip(host)
    if literal is not None:
        why = blocked_reason(literal)
        if why:
            raise PolicyRefusal(f"Refused {host}: {literal} is {why}, not a public address.")
        canonical = f"[{literal}]" if literal.version == 6 else str(literal)
        netloc = canonical if (port == (443 if scheme == "https" else 80)) else f"{canonical}:{port}"
        clean = urlsplit(clean)._replace(netloc=netloc).geturl()
        return Target(url=clean, scheme=scheme, host=str(literal), port=port, ip=str(literal))
    addresses = await network.resolve(host, port)
    if not addresses:
        raise PolicyRefusal(f"The host {host!r} resolved to no address.")
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            raise PolicyRefusal(f"The host {host!r} resolved to an invalid address.") from None
        why = blocked_reason(ip)
        if why:
            raise PolicyRefusal(
                f"Refused {host}: it resolves to {ip}, which is {why}, not a public address."
            )
    return Target(url=clean, scheme=scheme, host=host, port=port, ip=addresses[0])


def pinned_backend(target: Target, inner: httpcore.AsyncNetworkBackend) -> Any:
    """A network backend that connects only to `target`'s checked address, never resolving."""
    import httpcore

    class PinnedBackend(httpcore.AsyncNetworkBackend):
        async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                              local_address: str | None = None,
                              socket_options: Any = None) -> httpcore.AsyncNetworkStream:
            if host.strip("[]").lower() != target.host or port != target.port:
                raise httpcore.ConnectError(f"refused an unchecked connection to {host}:{port}")
            return await inner.connect_tcp(
                target.ip, port, timeout=timeout, local_address=local_address,
                socket_options=socket_options,
            )

        async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                      socket_options: Any = None) -> httpcore.AsyncNetworkStream:
            raise httpcore.ConnectError("unix sockets are not reachable from the web tools")

        async def sleep(self, seconds: float) -> None:
            await inner.sleep(seconds)

    return PinnedBackend()
