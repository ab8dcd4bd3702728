"""The bubblewrap sandbox, for real: what a command can see, write and reach."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from actors.executor.command import CommandResult
from actors.executor.egress_proxy import EgressProxy
from actors.executor.sandbox import detect_sandbox
from actors.executor.sandbox.base import EGRESS_SOCKET, Layout, Sandbox
from actors.executor.sandbox.bwrap import BwrapSandbox
from actors.executor.sandbox.limits import CommandLimits, Limits, detect_cgroups
from actors.llm.providers import reset_clients
from contracts.config import Settings
from supervisor.cli.client import gather_status
from tests.actors.harness import ALL, actors, chat
from tests.fakes.egress import PUBLIC_IP, LoopbackDialer, Origin
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.sandboxes import require

SettingsFor = Callable[..., Settings]
SECRET = "pl4nted-s3cret-value-98765"
MISSING_DOCKER = "unix:///nonexistent/docker.sock"


@pytest.fixture(scope="module", autouse=True)
def bwrap_installed() -> None:
    require({"bwrap": "bubblewrap"})


@pytest.fixture
def planted(home: Path) -> Path:
    """A home with a secret in .env and private data, as a real installation has."""
    (home / ".env").write_text(f"MY_SERVICE_PASSWORD={SECRET}\n")
    (home / "data" / "private.txt").write_text(f"memory {SECRET}\n")
    return home


@pytest.fixture
async def sandbox(settings_for: SettingsFor, planted: Path) -> AsyncIterator[Sandbox]:
    settings = settings_for(WM__EXECUTOR__MODE="bwrap", WM__EXECUTOR__NETWORK="none")
    sb = await detect_sandbox(settings.config, settings.home)
    yield sb
    await sb.close()


async def run(sb: Sandbox, command: str, home: Path, timeout: float = 30) -> CommandResult:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    return await sb.run(command, cwd=home / "workspace", timeout=timeout, output_limit=20_000,
                        env=env)


async def test_command_cannot_see_secrets_or_data_and_writes_the_workspace(
    sandbox: Sandbox, planted: Path
) -> None:
    assert sandbox.kind == "bwrap" and sandbox.isolated
    home = planted
    res = await run(sandbox, f"cat ../.env {home}/.env {home}/data/private.txt; ls -a {home}; "
                             "ls /root ~ 2>&1 | head -3; echo written > out.txt; pwd", home)
    assert SECRET not in res.output
    assert res.output.count("No such file or directory") >= 3
    listing = res.output.split("\n")
    assert "workspace" in listing and "scripts" in listing and "data" not in listing
    assert "/workspace" in listing  # pwd (stderr may come after stdout)
    assert (home / "workspace" / "out.txt").read_text() == "written\n"
    # the system is read-only, /tmp is private to the command, no capabilities
    res = await run(sandbox, "touch /usr/x 2>&1; echo t > /tmp/t && cat /tmp/t; "
                             "grep CapEff /proc/self/status", home)
    assert "Read-only file system" in res.output and "t\n" in res.output
    assert "CapEff:\t0000000000000000" in res.output


async def test_a_tool_run_cannot_change_scripts_but_a_command_can(
    sandbox: Sandbox, planted: Path
) -> None:
    """An agent-created tool runs with scripts/ read-only at both its paths (it must not
    rewrite itself or another tool); execute_command still writes there (the agent codes)."""
    home = planted
    scripts = home / "scripts"
    (scripts / "other.py").write_text("print('mine')\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    res = await sandbox.run(
        f"cat /scripts/other.py; echo evil > /scripts/other.py; echo evil > "
        f"{scripts}/other.py; echo new > /scripts/new.py; echo done", cwd=home / "workspace",
        timeout=30, output_limit=20_000, env=env, read_only_scripts=True)
    assert "mine" in res.output and "done" in res.output, res.output
    assert res.output.count("Read-only file system") == 3, res.output
    assert (scripts / "other.py").read_text() == "print('mine')\n"
    assert not (scripts / "new.py").exists()
    res = await run(sandbox, "echo fine > /scripts/new.py", home)
    assert res.exit_code == 0 and (scripts / "new.py").read_text() == "fine\n"
    assert sandbox.scripts_read_only


async def test_no_network_when_policy_is_none(sandbox: Sandbox, planted: Path) -> None:
    hits = 0

    async def count(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal hits
        hits += 1
        writer.close()

    server = await asyncio.start_server(count, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        res = await run(sandbox, f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>&1; "
                                 f"(exec 3<>/dev/tcp/{PUBLIC_IP}/80) 2>&1; env", planted)
    finally:
        server.close()
    assert "Connection refused" in res.output and "Network is unreachable" in res.output
    assert "PROXY" not in res.output.upper()
    assert hits == 0


async def test_proxy_network_reaches_only_allowlisted_names(
    settings_for: SettingsFor, planted: Path
) -> None:
    origin = await Origin().start()
    layout = Layout(planted)
    folder = layout.egress_dir()
    dialer = LoopbackDialer({"allowed.example": [PUBLIC_IP], "other.example": [PUBLIC_IP]}, origin)
    proxy = EgressProxy(["allowed.example"], dialer=dialer)
    await proxy.start_unix(folder / EGRESS_SOCKET)
    sb = BwrapSandbox(layout, network="proxy", proxy=proxy, egress_dir=folder)
    fetch = ('(exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://{0}/ HTTP/1.1\\r\\nHost: {0}'
             '\\r\\n\\r\\n" >&3; cat <&3); echo')
    try:
        res = await run(sb, fetch.format("allowed.example") + "; " + fetch.format("other.example")
                        + f"; (exec 3<>/dev/tcp/127.0.0.1/{origin.port}) 2>&1; echo $HTTPS_PROXY",
                        planted)
    finally:
        await sb.close()
        await origin.stop()
    assert "hello from allowed.example" in res.output
    assert "403 Forbidden" in res.output and "other.example: it is not in [egress] allowed_domains" in res.output
    assert "Connection refused" in res.output  # the host's loopback is not the sandbox's
    assert "http://127.0.0.1:3128" in res.output
    assert origin.hits == 1 and dialer.dialled == [(PUBLIC_IP, 80)]
    assert not folder.exists()  # close removes the socket folder


async def test_timeout_kills_everything_the_command_started(sandbox: Sandbox, planted: Path) -> None:
    res = await run(sandbox, "sleep 60 & sleep 60; echo never", planted, timeout=1)
    assert res.timed_out and res.exit_code is None and "never" not in res.output


FORK_MANY = (
    "python3 -c \"import os, time\n"
    "n = 0\n"
    "try:\n"
    "    while n < 1500:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(20); os._exit(0)\n"
    "        n += 1\n"
    "except OSError as exc:\n"
    "    print('stopped at', n, exc.strerror)\n"
    "print('forked', n)\"")
ALLOCATE = "python3 -c \"b = b'x' * (3 << 30); print('allocated', len(b))\""
BIG_FILE = "head -c 50M /dev/zero > big.bin; ls -l big.bin"


@pytest.fixture
async def limited(settings_for: SettingsFor, planted: Path) -> AsyncIterator[Sandbox]:
    """bwrap with small limits: 64 processes, 512 MB, 10 MB files."""
    settings = settings_for(WM__EXECUTOR__MODE="bwrap", WM__EXECUTOR__NETWORK="none",
                            WM__SANDBOX__PIDS_LIMIT="64", WM__SANDBOX__MEMORY_MB="512",
                            WM__SANDBOX__FILE_SIZE_MB="10")
    sb = await detect_sandbox(settings.config, settings.home)
    yield sb
    await sb.close()


async def test_processes_memory_and_file_size_are_limited(limited: Sandbox, planted: Path) -> None:
    """1,500 processes, 3 GiB and a 50 MB file fail cleanly; the next command runs (issue 16)."""
    assert "limits per command" in limited.facts()["note"]
    if "cgroup" not in limited.facts()["note"] and os.geteuid() == 0:
        pytest.skip("no cgroup here and rlimits do not bind root's process count")
    forks = await run(limited, FORK_MANY, planted)
    assert "stopped at" in forks.output and "forked 1500" not in forks.output, forks.output
    # 64 in a cgroup; with rlimits the count is per user, so other processes shift it a little
    assert int(forks.output.split("stopped at")[1].split()[0]) < 200
    memory = await run(limited, ALLOCATE, planted)
    assert memory.exit_code != 0 and "allocated" not in memory.output
    big = await run(limited, BIG_FILE, planted)
    assert (planted / "workspace" / "big.bin").stat().st_size <= 10 << 20
    assert "File size limit exceeded" in big.output
    bomb = await run(limited, ":(){ :|:& };:; sleep 30", planted, timeout=3)
    assert bomb.timed_out
    after = await run(limited, "echo still here", planted)
    assert after.exit_code == 0 and after.output == "still here\n"


async def test_rlimits_bound_memory_and_files_without_cgroups(planted: Path) -> None:
    """Where no cgroup can be created, memory and file size still hold (rlimits)."""
    sb = BwrapSandbox(Layout(planted), network="none",
                      limits=CommandLimits(Limits(pids=64, memory_mb=512, file_size_mb=10,
                                                  cpu_secs=5), []))
    assert "(rlimits)" in sb.note
    memory = await run(sb, ALLOCATE, planted)
    assert memory.exit_code != 0 and "MemoryError" in memory.output
    await run(sb, BIG_FILE, planted)
    assert (planted / "workspace" / "big.bin").stat().st_size <= 10 << 20
    spin = await run(sb, "python3 -c 'while True: pass'", planted, timeout=30)
    assert not spin.timed_out and spin.exit_code != 0  # RLIMIT_CPU: 5 CPU seconds


def test_cgroup_detection_finds_a_delegated_v2_cgroup_or_v1_hierarchies(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    (v2 / "user" / "app").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    (v2 / "user" / "app" / "cgroup.subtree_control").write_text("memory pids\n")
    (tmp_path / "self-v2").write_text("0::/user/app\n")
    (found,) = detect_cgroups(v2, tmp_path / "self-v2")
    assert found.base == v2 / "user" / "app" and found.controllers == {"pids", "memory"}
    (v2 / "user" / "app" / "cgroup.subtree_control").write_text("cpu\n")  # not delegated
    assert detect_cgroups(v2, tmp_path / "self-v2") == []
    v1 = tmp_path / "v1"
    for name in ("pids", "memory/box"):
        (v1 / name).mkdir(parents=True)
        (v1 / name / "cgroup.procs").write_text("")
    (tmp_path / "self-v1").write_text("8:pids:/\n4:memory:/box\n0::/\n")
    found_v1 = detect_cgroups(v1, tmp_path / "self-v1")
    assert [(h.base, set(h.controllers)) for h in found_v1] == [
        (v1 / "pids", {"pids"}), (v1 / "memory" / "box", {"memory"})]
    note = CommandLimits(Limits(pids=9, memory_mb=64, file_size_mb=1, cpu_secs=0),
                         found_v1).describe()
    assert "(cgroup)" in note and "at most 9 processes" in note


async def test_auto_picks_bwrap_without_docker_and_says_why(
    settings_for: SettingsFor, planted: Path
) -> None:
    settings = settings_for(WM__EXECUTOR__MODE="auto", WM__EXECUTOR__DOCKER_HOST=MISSING_DOCKER)
    sb = await detect_sandbox(settings.config, settings.home)
    try:
        facts = sb.facts()
    finally:
        await sb.close()
    assert facts["mode"] == "bwrap" and facts["sandboxed"] and facts["network"] == "proxy"
    assert "auto" in facts["note"] and MISSING_DOCKER in facts["note"]
    assert "package registries" in facts["note"]


async def test_turn_in_bwrap_mode_keeps_secrets_out_and_reports_the_mode(
    settings_for: SettingsFor, planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLLM()
    await fake.start("openai")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    monkeypatch.setenv("MY_OTHER_TOKEN", SECRET + "-env")  # the executor scrubs it
    # ... and these by value: the .env secret under innocent names (issue 16)
    monkeypatch.setenv("DATABASE_URL", f"postgres://app:{SECRET}@db:5432/app")
    monkeypatch.setenv("SERVICE_SETTING", SECRET)
    reset_clients()
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", WM__EXECUTOR__MODE="bwrap")
    try:
        async with actors(settings, *ALL), chat(settings) as c:
            reply = await c.ask(f"run: cat ../.env {planted}/.env; env; rm -rf gone && echo ran")
            status = await gather_status(settings)
    finally:
        await fake.stop()
        reset_clients()
    assert SECRET not in reply and SECRET not in json.dumps(fake.requests)
    assert "[REDACTED]" not in reply and "No such file or directory" in reply  # never read
    assert "ran" in reply  # rm -rf is contained by the sandbox: no approval needed
    assert status["executor"]["mode"] == "bwrap" and "bubblewrap" in status["executor"]["note"]
