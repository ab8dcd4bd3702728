"""Seed 003 §17 #2 (invariant B): tool code cannot reach the vault, the config or other tools'
internals. The seed proves it at compile time (the tool API exposes none of them); our tools
are programs, so it is proved at run time, end to end through a turn: an agent-created tool
and a command, both run in the bubblewrap sandbox, look for every secret a home holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts.config import Settings
from tests.actors.harness import ALL, actors, chat
from tests.capability import TEST_KEY
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.sandboxes import require

SettingsFor = Callable[..., Settings]
MARK = "vault-7Qx"  # every planted secret starts with it

# The agent-created tool: tries each place a secret lives (by host path and relative to its
# working folder), every process's environment and command line it can see, its own
# environment; prints only where it found MARK or the capability key, never the values.
PEEK = """\
import glob, json, os
home, key = {home!r}, {key!r}
paths = [home + p for p in ("/.env", "/config.toml", "/data/keys/capability.key",
         "/data/nats/keys/executor.nk", "/data/nats/server.json", "/skills/private/SKILL.md",
         "/data/scripts.git/config")]
paths += ["../.env", "../config.toml", "../data/keys/capability.key", "../data/nats/keys"]
found = []
for path in paths:
    try:
        with open(path, "rb") as fh:
            found.append("read " + path + (" (secret)" if b"{mark}" in fh.read() else ""))
    except OSError:
        pass
for path in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        data = open(path, "rb").read().decode(errors="replace")
    except OSError:
        continue
    if "{mark}" in data or key in data:
        found.append("secret in " + path)
if any("{mark}" in v or key in v for v in os.environ.values()):
    found.append("secret in my environment")
print(json.dumps({{"found": found, "checked": len(paths)}}))
"""


@pytest.fixture
def vault(home: Path) -> Path:
    """A home holding a secret in every place one lives: .env, config, the capability key,
    the NATS credentials, another tool's (skill's) files, the scripts' git directory."""
    require({"bwrap": "bubblewrap"})
    (home / ".env").write_text(f"MY_SERVICE_PASSWORD={MARK}-env\n")
    with (home / "config.toml").open("a") as fh:
        fh.write(f"\n# {MARK}-config\n")
    for rel in ("data/keys/capability.key", "data/nats/keys/executor.nk",
                "data/nats/server.json", "skills/private/SKILL.md"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"{MARK}-{rel}\n")
    (home / "scripts" / "peek.py").write_text(
        PEEK.format(home=str(home), key=TEST_KEY.hex(), mark=MARK))
    (home / "scripts" / "peek.json").write_text(json.dumps(
        {"name": "peek", "description": "looks around", "parameters": {"type": "object"}}))
    return home


async def test_17_02_sandboxed_tool_code_reaches_no_secret(
    fake: FakeLLM, settings_for: SettingsFor, vault: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seed #2 (from tool.execute(), access to the vault, config and other tools fails): the
    owner's turn calls `peek`, an agent-created tool in scripts/, which tries to read .env,
    config.toml, the capability key, the NATS credential files, a skill's folder, the scripts'
    git directory, and the environment and command line of every process it can see (the
    executor's included: it holds the capability key); then a command does the same with
    cat. Both run in the bwrap sandbox, see none of it, and nothing secret reaches the model.
    (Direct mode runs tools unsandboxed and defends nothing of this: docs/security.md.)"""
    monkeypatch.setenv("MY_OTHER_TOKEN", f"{MARK}-process-env")  # the executor's environment
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model",
                            WM__EXECUTOR__MODE="bwrap", WM__EXECUTOR__NETWORK="none")
    async with actors(settings, *ALL), chat(settings) as owner:
        peeked = await owner.ask("tool:peek {}", timeout=90)
        catted = await owner.ask(
            f"run: cat {vault}/.env {vault}/config.toml {vault}/data/keys/* "
            f"{vault}/data/nats/keys/* ../.env ../data/keys/capability.key; "
            "cat /proc/*/environ; env", timeout=90)
    report = json.loads(peeked.removeprefix("Tool said:").strip())
    assert report == {"found": [], "checked": 11}
    assert "No such file or directory" in catted
    assert MARK not in catted and TEST_KEY.hex() not in catted and "[REDACTED]" not in catted
    sent = json.dumps(fake.requests)
    assert MARK not in sent and TEST_KEY.hex() not in sent
