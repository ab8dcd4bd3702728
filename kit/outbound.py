"""The outbound gate: what may leave this installation (tool arguments, messages, files).

Every path out calls it: the executor on every tool call's arguments (web_fetch URLs, request
bodies, messages, commands), `send_message` and the channel adapters on every workspace file
they send. It finds known secret values — as they are and in the encodings a model or a script
would use to smuggle them (base64 in any alignment, URL and hex encoding, reversed) — and, for
calls that go to the network, credential-shaped strings. A hit is not redacted silently: the
call is held and the owner asked (executor), or the file is refused (channels).
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kit import safefs
from kit.redact import Redactor, redact_patterns

MAX_FILE_BYTES = 50_000_000  # what Telegram bots may upload; other channels allow less or more
SCAN_BYTES = 10_000_000  # files up to this size are checked for secrets before they go out


class Refused(Exception):
    """A file or target the gate will not let out; the message is a sentence for the reader."""


def _b64_cores(value: bytes) -> Iterator[str]:
    """Substrings that appear in the base64 of any text containing `value`, whatever its
    offset: each of the three alignments, minus the edge characters that depend on neighbours."""
    for shift in range(3):
        for alphabet in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = alphabet(b"\0" * shift + value).decode().rstrip("=")
            head = (shift * 4 + 2) // 3  # characters mixed with the preceding bytes
            tail = 1 if (shift + len(value)) % 3 else 0  # the last one may mix with what follows
            core = encoded[head:len(encoded) - tail]
            if len(core) >= 8:
                yield core


def encodings(secret: str) -> set[str]:
    """The forms of one secret value to look for."""
    raw = secret.encode()
    forms = {secret, secret[::-1], urllib.parse.quote(secret, safe=""),
             urllib.parse.quote_plus(secret), raw.hex(), raw.hex().upper()}
    forms.update(_b64_cores(raw))
    return {f for f in forms if len(f) >= 8}


class SecretScanner:
    """Finds known secret values (and their encodings) in text; follows the redactor's values."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._seen: frozenset[str] = frozenset()
        self._forms: list[str] = []

    def _refresh(self) -> None:
        secrets = self.redactor.secrets
        if secrets != self._seen:
            forms: set[str] = set()
            for secret in secrets:
                forms |= encodings(secret)
            self._forms = sorted(forms, key=len, reverse=True)
            self._seen = secrets

    def find(self, text: str, *, shapes: bool = False) -> list[str]:
        """Kinds of secrets in `text`: 'secret-value' for a known value in any encoding, and
        with `shapes` also credential formats (API keys, tokens) that are not ours."""
        self._refresh()
        found: list[str] = []
        candidates = [text]
        decoded = urllib.parse.unquote_plus(text)
        if decoded != text:
            candidates.append(decoded)
        if any(form in c for c in candidates for form in self._forms):
            found.append("secret-value")
        if shapes:
            for c in candidates:
                found += [k for k in redact_patterns(c)[1] if k not in found]
        return found


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from strings_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from strings_in(v)


def check_arguments(scanner: SecretScanner, arguments: dict[str, Any], *,
                    network: bool) -> list[str]:
    """Kinds of secrets a tool call's arguments would carry out ([] when clean)."""
    found: list[str] = []
    for text in strings_in(arguments):
        for kind in scanner.find(text, shapes=network):
            if kind not in found:
                found.append(kind)
    return found


def _decodes_to_secret(scanner: SecretScanner, blob: str) -> bool:
    """A file that is one base64 blob is checked decoded too (cheap: whole-file only)."""
    compact = "".join(blob.split())
    if len(compact) < 16 or len(compact) > SCAN_BYTES:
        return False
    try:
        decoded = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return bool(scanner.find(decoded.decode("latin-1")))


def check_file(workspace: Path, ref: str, scanner: SecretScanner) -> str:
    """The workspace-relative path of a file that may be sent, or Refused with the reason."""
    rel = ref.strip()
    for prefix in ("/workspace/", "workspace/"):
        if rel.startswith(prefix):
            rel = rel[len(prefix):]
    root = workspace.resolve()
    try:
        parts = safefs.relative_parts(rel)
    except safefs.UnsafePath as exc:
        raise Refused(f"{ref!r} is not inside the workspace; only workspace files can be "
                      "sent.") from exc
    path = root.joinpath(*parts)
    if path.resolve() != path:  # a link the sandbox may have planted, e.g. to ../.env
        raise Refused(f"{ref!r} is or goes through a symbolic link; only plain workspace files "
                      "can be sent.")
    if not path.is_file():
        raise Refused(f"There is no file {ref!r} in the workspace.")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise Refused(f"{ref!r} is {size} bytes, over the {MAX_FILE_BYTES}-byte limit for files.")
    if size > SCAN_BYTES:
        raise Refused(f"{ref!r} is too large ({size} bytes) to be checked for secrets, so it "
                      "was not sent; compress or split it.")
    try:  # without following links: the check must see the bytes that would be sent
        data = safefs.read_bytes(root, "/".join(parts), SCAN_BYTES + 1)
    except (safefs.UnsafePath, OSError) as exc:
        raise Refused(f"{ref!r} changed while it was checked, so it was not sent.") from exc
    text = data.decode("latin-1")  # every byte maps to one character
    if scanner.find(text, shapes=True) or _decodes_to_secret(scanner, text):
        raise Refused(
            f"{ref!r} contains a secret (a value from .env or a credential), so it was not sent."
        )
    return str(path.relative_to(root))


def check_files(workspace: Path, refs: Iterable[str], scanner: SecretScanner) -> list[str]:
    return [check_file(workspace, ref, scanner) for ref in refs]
