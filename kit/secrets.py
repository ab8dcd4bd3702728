"""Reading WINTERMUTE_HOME/.env, the one file of secrets (mode 0600)."""

from __future__ import annotations

from kit.envfile import dotenv_value, load_dotenv
from kit.redact import looks_secret_name as looks_secret

__all__ = ["dotenv_value", "load_dotenv", "looks_secret"]
