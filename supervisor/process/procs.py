"""Spawning actor processes that die with their parent."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

from kit.secrets import looks_secret

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def pdeathsig() -> None:
    """Run in the child before exec: die with SIGKILL when the parent dies (Linux)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


#: Which secret variables each actor may inherit; everything else secret-looking is dropped.
KEEP_SECRETS = {
    "llm": ("ANTHROPIC_", "OPENAI_", "OLLAMA_"),
    "channel": ("WINTERMUTE_TELEGRAM", "WINTERMUTE_SLACK", "WINTERMUTE_WEBHOOK", "TELEGRAM_",
                "SLACK_"),
}


#: The variable naming the `up` run an actor belongs to (see contracts.Notice.run).
RUN_VAR = "WINTERMUTE_RUN"


def actor_env(
    name: str, nats_url: str, home: str, login: dict[str, str] | None = None, run: str = "",
) -> dict[str, str]:
    """The environment of one actor: secrets only where that actor needs them, its NATS
    login when `login` (`Bus.connect` arguments: user, seed file, API prefix...) is given,
    and the run id."""
    keep = KEEP_SECRETS.get(name, ())
    env = {
        k: v for k, v in os.environ.items()
        if not looks_secret(k) or k.startswith(keep) or k.startswith("WM__")
    }
    if name != "llm":
        for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_HOST"):
            env.pop(var, None)
    env["WM__NATS__URL"] = nats_url
    if login is not None:  # a seed file's path, never the seed itself
        env["WM__NATS__USER"] = login.get("user") or name
        for key, var in (("seed", "WM__NATS__SEED"), ("password", "WM__NATS__PASSWORD"),
                         ("api_prefix", "WM__NATS__API_PREFIX"),
                         ("credentials", "WM__NATS__CREDENTIALS")):
            if login.get(key):
                env[var] = login[key]
    env["WINTERMUTE_HOME"] = home
    if run:
        env[RUN_VAR] = run
    env["PYTHONUNBUFFERED"] = "1"
    return env


def actor_command(name: str) -> list[str]:
    # The actors' own entry point: the supervisor starts actor code, it never imports it.
    return [sys.executable, "-m", "actors", name]
