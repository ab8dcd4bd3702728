"""Secret redaction: known secret values plus credential-shaped patterns, and a chat guard.

A `Redactor` knows the exact secret values of this installation (everything in
WINTERMUTE_HOME/.env plus secret-looking environment variables) and also recognises common
credential formats, so tool output and log lines can be scrubbed before they leave the process.
`credential_guard` decides what to do with an inbound chat message that contains a credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from kit.envfile import load_dotenv

REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 8
SECRET_NAME_WORDS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
)
# Names that contain a secret-looking word but hold a socket or file path, not a secret.
NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "XAUTHORITY"})

_L = r"(?<![A-Za-z0-9_-])"  # left token boundary
_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (kind, re.compile(regex), repl)
    for kind, regex, repl in (
        (
            "private-key",
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            "[REDACTED:private-key]",
        ),
        ("anthropic-key", _L + r"sk-ant-[A-Za-z0-9_-]{20,}", "[REDACTED:anthropic-key]"),
        (
            "openai-key",
            _L + r"sk-(?!ant-)(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}",
            "[REDACTED:openai-key]",
        ),
        ("github-token", _L + r"gh[pousr]_[A-Za-z0-9]{30,}", "[REDACTED:github-token]"),
        ("github-token", _L + r"github_pat_[A-Za-z0-9_]{30,}", "[REDACTED:github-token]"),
        ("gitlab-token", _L + r"glpat-[A-Za-z0-9_-]{20,}", "[REDACTED:gitlab-token]"),
        ("slack-token", _L + r"(?:xox[bpas]|xapp)-[A-Za-z0-9-]{10,}", "[REDACTED:slack-token]"),
        (
            "aws-access-key",
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
            "[REDACTED:aws-access-key]",
        ),
        (
            "telegram-token",
            # also right after "bot": Telegram's API URLs are .../bot<token>/<method>
            r"(?:(?<![A-Za-z0-9_])|(?<=bot))\d{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
            "[REDACTED:telegram-token]",
        ),
        (
            "bearer-token",
            r"(?i)(\bbearer\s+)(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{12,}=*",
            r"\g<1>[REDACTED:bearer-token]",
        ),
    )
)
_PLACEHOLDER = re.compile(r"\[REDACTED(?::[a-z-]+)?\]")


def looks_secret_name(name: str) -> bool:
    """True if an environment variable name suggests it holds a secret."""
    upper = name.upper()
    return upper not in NOT_SECRET_NAMES and any(word in upper for word in SECRET_NAME_WORDS)


def redact_patterns(text: str) -> tuple[str, list[str]]:
    """Replace credential-shaped substrings; return the new text and the kinds found."""
    found: list[str] = []
    for kind, pattern, repl in _PATTERNS:
        text, count = pattern.subn(repl, text)
        if count and kind not in found:
            found.append(kind)
    return text, found


class Redactor:
    """Replaces known secret values and credential-shaped strings with placeholders."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        """Start from the given secret values (short ones are ignored)."""
        self._secrets: set[str] = set()
        self._exact: re.Pattern[str] | None = None
        self.add(*secrets)

    @classmethod
    def from_env(cls, dotenv_path: Path | None, environ: Mapping[str, str]) -> Redactor:
        """Collect every .env value plus values of secret-looking environment variables."""
        values: list[str] = []
        if dotenv_path is not None:
            values += load_dotenv(dotenv_path).values()
        values += [value for name, value in environ.items() if looks_secret_name(name)]
        return cls(values)

    @classmethod
    def for_home(cls, home: Path, environ: Mapping[str, str]) -> Redactor:
        """The redactor for a home (.env values, NATS credentials, secret-looking environment
        variables): callers get the redactor, never the values (the supervisor redacts log
        tails without reading .env itself)."""
        return HomeRedactor(home, environ)

    @property
    def secrets(self) -> frozenset[str]:
        """The exact values this redactor replaces."""
        return frozenset(self._secrets)

    def add(self, *values: str) -> None:
        """Add secret values; values shorter than MIN_SECRET_LEN are ignored."""
        new = {v for v in values if v and len(v.strip()) >= MIN_SECRET_LEN} - self._secrets
        if not new:
            return
        self._secrets |= new
        ordered = sorted(self._secrets, key=len, reverse=True)  # longest first
        self._exact = re.compile("|".join(re.escape(v) for v in ordered))

    def scan(self, text: str) -> tuple[str, list[str]]:
        """Redact text; return it with the kinds found ('secret-value' for known values)."""
        found: list[str] = []
        if self._exact is not None:
            text, count = self._exact.subn(REDACTED, text)
            if count:
                found.append("secret-value")
        text, kinds = redact_patterns(text)
        return text, found + [k for k in kinds if k not in found]

    def redact(self, text: str) -> str:
        """Return text with known secrets and credential-shaped strings replaced."""
        return self.scan(text)[0]


class GuardResult(msgspec.Struct, frozen=True):
    """What to do with an inbound message: 'pass', 'redact' or 'block'."""

    action: str
    text: str
    found: list[str]


BLOCK_MESSAGE = (
    "That message looks like a credential ({kinds}), so it was not passed on. "
    "Please don't paste secrets into chat: put it in WINTERMUTE_HOME/.env "
    "(usually ~/.wintermute/.env) instead and refer to it by its variable name."
)


def credential_guard(text: str, redactor: Redactor | None = None) -> GuardResult:
    """Block a message that is mostly a credential, redact one embedded in prose, else pass."""
    redacted, found = redactor.scan(text) if redactor else redact_patterns(text)
    if not found:
        return GuardResult("pass", text, [])
    remaining = _PLACEHOLDER.sub(" ", redacted)
    total = sum(1 for c in text if not c.isspace())
    rest = sum(1 for c in remaining if not c.isspace())
    words = [w for w in remaining.split() if any(c.isalnum() for c in w)]
    if rest < 0.2 * total or len(words) < 3:
        return GuardResult("block", BLOCK_MESSAGE.format(kinds=", ".join(found)), found)
    return GuardResult("redact", redacted, found)


def _credential_values(folder: Path) -> list[str]:
    """Secret strings in the NATS credential files `up` writes (keys/*.nk seeds, .creds); the
    server config (public keys, accounts, permissions) holds none."""
    import json

    values: list[str] = []
    if not folder.is_dir():
        return values

    def leaves(node: object) -> None:
        if isinstance(node, str):
            values.append(node)
        elif isinstance(node, dict):
            for v in node.values():
                leaves(v)
        elif isinstance(node, list):
            for v in node:
                leaves(v)

    for path in _credential_files(folder):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if path.suffix == ".json":
            try:
                leaves(json.loads(text))  # not a KV value: a local credentials file
            except ValueError:
                continue
        else:  # nkey seeds and .creds files: one secret per line
            values += [line.strip() for line in text.splitlines() if len(line.strip()) >= 16]
    # Only long values: user names and public keys are short or harmless; passwords, hashes
    # and seeds are long.
    return [v for v in values if len(v) >= 16]


def _credential_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and p.name not in ("server.json", "server.json.tmp"))


class HomeRedactor(Redactor):
    """A redactor that follows WINTERMUTE_HOME: `.env` values (re-read when the file changes),
    the NATS credentials `up` generated, and secret-looking environment variables."""

    RECHECK_SECS = 1.0

    def __init__(self, home: Path, environ: Mapping[str, str]) -> None:
        super().__init__()
        self.home = home
        self._environ = dict(environ)
        self._stamp: tuple[float, ...] | None = None
        self._checked = 0.0
        self.reload()

    def _sources(self) -> tuple[Path, ...]:
        return (self.home / ".env", *_credential_files(self.home / "data" / "nats"))

    def _current_stamp(self) -> tuple[float, ...]:
        stamp: list[float] = []
        for path in self._sources():
            try:
                stamp.append(path.stat().st_mtime)
            except OSError:
                stamp.append(0.0)
        return tuple(stamp)

    def reload(self) -> None:
        """Read every source again (values only ever get added while the process runs)."""
        import time

        values: list[str] = list(load_dotenv(self.home / ".env").values())
        values += [v for k, v in self._environ.items() if looks_secret_name(k)]
        values += _credential_values(self.home / "data" / "nats")
        self.add(*values)
        self._stamp = self._current_stamp()
        self._checked = time.monotonic()

    def _maybe_reload(self) -> None:
        import time

        if time.monotonic() - self._checked < self.RECHECK_SECS:
            return
        self._checked = time.monotonic()
        if self._current_stamp() != self._stamp:
            self.reload()

    @property
    def secrets(self) -> frozenset[str]:
        self._maybe_reload()
        return super().secrets

    def scan(self, text: str) -> tuple[str, list[str]]:
        self._maybe_reload()
        return super().scan(text)
