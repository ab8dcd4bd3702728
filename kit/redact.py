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
            r"(?<![A-Za-z0-9_])\d{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
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
        """The redactor for a home: its .env values and secret-looking environment variables.

        Callers get only the redactor, never the values (the supervisor redacts log tails
        without holding the secrets itself).
        """
        return cls.from_env(home / ".env", environ)

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
