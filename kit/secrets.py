"""Reading WINTERMUTE_HOME/.env, the one file of secrets (mode 0600)."""

from __future__ import annotations

from pathlib import Path

from kit.redact import looks_secret_name as looks_secret
from kit.redact import parse_dotenv

__all__ = ["load_dotenv", "looks_secret"]


def load_dotenv(path: Path) -> dict[str, str]:
    """The KEY=VALUE pairs of a .env file; {} when it is absent or unreadable."""
    try:
        return parse_dotenv(path.read_text())
    except OSError:
        return {}
