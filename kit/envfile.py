"""Reading .env files (WINTERMUTE_HOME/.env, the one file of secrets) with python-dotenv.

Values are taken literally (no `${VAR}` interpolation): a secret that happens to contain `$`
must reach the provider unchanged. A line that does not parse is skipped; python-dotenv logs
its line number, never its text.
"""

from __future__ import annotations

import io
from pathlib import Path

from dotenv import dotenv_values


def parse_dotenv(text: str) -> dict[str, str]:
    """KEY=VALUE pairs of .env text: `export`, quotes, escapes, comments, multi-line values."""
    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    return {key: value for key, value in values.items() if value is not None}


def load_dotenv(path: Path) -> dict[str, str]:
    """The KEY=VALUE pairs of a .env file; {} when it is absent or unreadable."""
    try:
        return parse_dotenv(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}


def dotenv_value(path: Path, name: str) -> str:
    """One value of a .env file ("" when absent), for code that needs only that one."""
    return load_dotenv(path).get(name, "")
