"""No credentials in any configured URL (seed 003 invariant H).

A URL is logged, shown by `status`, kept in shell history and proxies' access logs; a token in
it leaks through all of them. Every string of config.toml (and WM__ overrides) that is a URL
is checked, so a URL key added later is covered too: a user:password part, a query parameter
named like a credential, or a Telegram bot token anywhere in it is refused, and the message
says where the secret goes instead (.env, headers, the key's own user/password fields).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import msgspec

_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_SECRET_PARAM = re.compile(
    r"(?i)(token|secret|passw|pwd|api[-_]?key|apikey|access[-_]?key|signature|credential|"
    r"authorization|^auth$|^auth[-_]|[-_]auth$|^sig$|^key$)")
# A bot token is how Telegram's API URLs authenticate (".../bot<token>/getMe"): it never
# belongs in configuration, only in .env (channels.telegram.bot_token_env).
_BOT_TOKEN = re.compile(r"\d{6,12}:[A-Za-z0-9_-]{30,}")


def url_problem(url: str) -> str | None:
    """Why `url` carries a credential (a sentence fragment), or None if it does not."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None  # not a URL we can read: the key's own check says so
    if parts.username is not None or parts.password is not None:
        return "it has a user or password before the host"
    for name, _ in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAM.search(name):
            return f"its query parameter {name!r} looks like a credential"
    if _BOT_TOKEN.search(url):
        return "it contains a bot token"
    return None


def _strings(node: Any, key: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield key, node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, f"{key}[{i}]")


def check_urls(config: msgspec.Struct) -> None:
    """Raise ValueError naming the first key whose URL carries a credential."""
    for key, value in _strings(msgspec.to_builtins(config), ""):
        if _URL.match(value.strip()) and (why := url_problem(value.strip())):
            raise ValueError(
                f"invalid value for '{key}': {why}. Credentials never go into URLs, where "
                "logs, status and proxies would show them: put the secret in .env and name "
                "it in the key made for it (a header, a *_env key, nats.user/password/seed)")
