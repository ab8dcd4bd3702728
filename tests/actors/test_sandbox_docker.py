"""The Docker-API sandbox against a real engine: Podman's Docker-compatible service, with an
image imported from a local rootfs (images cannot be pulled here)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from actors.executor.command import CommandResult
from actors.executor.sandbox import detect_sandbox
from actors.executor.sandbox.base import Sandbox
from actors.llm.providers import reset_clients
from contracts.config import Settings
from supervisor.cli.client import gather_status
from tests.actors.harness import ALL, actors, chat
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.sandboxes import PodmanService, require, sandbox_rootfs

SettingsFor = Callable[..., Settings]
SECRET = "pl4nted-d0cker-s3cret-24680"
IMAGE = "localhost/wintermute-sandbox-test:v1"


@pytest.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PodmanService]:
    """One Podman service and one imported image for this module."""
    if os.geteuid() != 0:
        pytest.fail("the Docker-API tests run podman as root") if os.environ.get("CI") else \
            pytest.skip("the Docker-API tests run podman as root")
    require({"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap",
             "bwrap": "bubblewrap"})
    service = PodmanService(tmp_path_factory.mktemp("podman"))
    await service.start()
    try:
        await service.import_image(sandbox_rootfs(), IMAGE)
        yield service
    finally:
        service.stop()


@pytest.fixture
def planted(home: Path) -> Path:
    (home / ".env").write_text(f"MY_SERVICE_PASSWORD={SECRET}\n")
    (home / "data" / "private.txt").write_text(f"memory {SECRET}\n")
    return home


def docker_env(engine: PodmanService, **extra: str) -> dict[str, str]:
    return {"WM__EXECUTOR__MODE": "docker", "WM__EXECUTOR__DOCKER_HOST": engine.url,
            "WM__EXECUTOR__IMAGE": IMAGE, **extra}


async def run(sb: Sandbox, command: str, home: Path, timeout: float = 30,
              stdin: bytes = b"") -> CommandResult:
    return await sb.run(command, cwd=home / "workspace", timeout=timeout, output_limit=20_000,
                        env={"LANG": "C.UTF-8", "PATH": "/host/only"}, stdin=stdin)


async def test_container_is_locked_down_and_sees_only_workspace_and_scripts(
    engine: PodmanService, settings_for: SettingsFor, planted: Path
) -> None:
    settings = settings_for(**docker_env(engine, WM__EXECUTOR__NETWORK="none",
                                         WM__SANDBOX__MEMORY_MB="256"))
    sb = await detect_sandbox(settings.config, settings.home)
    try:
        assert sb.kind == "docker", sb.note
        home = planted
        res = await run(sb, f"cat ../.env {home}/.env {home}/data/private.txt; ls -a {home}; "
                            "ls /var/run/docker.sock /run/docker.sock 2>&1; echo w > out.txt; pwd",
                        home)
        assert SECRET not in res.output and res.output.count("No such file or directory") >= 5
        assert "data" not in res.output.split("\n")
        assert "/workspace" in res.output.splitlines()  # pwd (stderr may come after stdout)
        written = home / "workspace" / "out.txt"
        assert written.read_text() == "w\n" and written.stat().st_uid == os.geteuid()
        res = await run(sb, "grep CapEff /proc/self/status; echo $PATH; "
                            "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null; "
                            "cat /sys/fs/cgroup/memory/memory.limit_in_bytes "
                            "/sys/fs/cgroup/memory.max 2>/dev/null; "
                            "(exec 3<>/dev/tcp/10.0.2.2/80) 2>&1; (exec 3<>/dev/tcp/127.0.0.1/3128) 2>&1",
                        home)
        assert "CapEff:\t0000000000000000" in res.output and "/host/only" not in res.output
        assert "\n256\n" in res.output and str(256 * 1024 * 1024) in res.output
        assert "Network is unreachable" in res.output and "Connection refused" in res.output
        res = await run(sb, "tr a-z A-Z", home, stdin=b"piped input\n")
        assert res.exit_code == 0 and res.output == "PIPED INPUT\n"
        res = await run(sb, "sleep 60 & sleep 60; echo never", home, timeout=1)
        assert res.timed_out and res.exit_code is None and "never" not in res.output
    finally:
        await sb.close()


async def test_proxy_network_refuses_unlisted_names_and_reset_recreates(
    engine: PodmanService, settings_for: SettingsFor, planted: Path
) -> None:
    (planted / "scripts" / "setup.sh").write_text("echo ran > /etc/setup-ran\n")
    settings = settings_for(**docker_env(engine, WM__EGRESS__ALLOWED_DOMAINS='["allowed.example"]'))
    sb = await detect_sandbox(settings.config, settings.home)
    try:
        fetch = ('exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://evil.example/ HTTP/1.1\\r\\n'
                 'Host: evil.example\\r\\n\\r\\n" >&3; cat <&3; echo; echo $HTTPS_PROXY')
        res = await run(sb, fetch, planted)
        assert "403 Forbidden" in res.output and "evil.example: it is not in [egress]" in res.output
        assert "http://127.0.0.1:3128" in res.output
        res = await run(sb, "cat /etc/setup-ran; echo mark > /var/tmp/marker; hostname", planted)
        assert res.output.startswith("ran\n"), res.output  # setup.sh ran when it was created
        before = sb.container.id  # type: ignore[attr-defined]
        said = await sb.reset()
        assert "recreated" in said
        res = await run(sb, "cat /var/tmp/marker 2>&1; cat /etc/setup-ran", planted)
        assert "No such file" in res.output and "ran" in res.output
        assert sb.container.id != before  # type: ignore[attr-defined]
    finally:
        await sb.close()


async def test_auto_prefers_the_engine_with_the_image_else_falls_back(
    engine: PodmanService, settings_for: SettingsFor, planted: Path
) -> None:
    settings = settings_for(**docker_env(engine, WM__EXECUTOR__MODE="auto"))
    sb = await detect_sandbox(settings.config, settings.home)
    await sb.close()
    assert sb.kind == "docker" and engine.url in sb.note
    settings = settings_for(**docker_env(engine, WM__EXECUTOR__MODE="auto",
                                         WM__EXECUTOR__IMAGE="localhost/not-built:v0"))
    sb = await detect_sandbox(settings.config, settings.home)
    await sb.close()
    assert sb.kind == "bwrap" and "has no image localhost/not-built:v0" in sb.note
    settings = settings_for(**docker_env(engine, WM__EXECUTOR__IMAGE="localhost/not-built:v0"))
    sb = await detect_sandbox(settings.config, settings.home)
    res = await run(sb, "echo should-not-run", planted)
    assert sb.kind == "unavailable" and "should-not-run" not in res.output
    assert "Not run" in res.output and "docker build" in res.output


async def test_turn_in_docker_mode_keeps_secrets_out_and_reports_the_mode(
    engine: PodmanService, settings_for: SettingsFor, planted: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeLLM()
    await fake.start("openai")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
    reset_clients()
    settings = settings_for(WM__MODELS__DEFAULT="openai/test-model", **docker_env(engine))
    try:
        async with actors(settings, *ALL), chat(settings) as c:
            reply = await c.ask(f"run: cat ../.env {planted}/.env; env; echo done-$((6*7))",
                                timeout=60)
            status = await gather_status(settings)
    finally:
        await fake.stop()
        reset_clients()
    assert "done-42" in reply and "No such file or directory" in reply
    assert SECRET not in reply and SECRET not in json.dumps(fake.requests)
    assert status["executor"]["mode"] == "docker" and status["executor"]["sandboxed"]
    assert status["executor"]["container"].startswith("wintermute-sandbox-")


async def test_a_dead_executors_commands_end_when_the_next_one_opens_the_container(
    engine: PodmanService, settings_for: SettingsFor, home: Path
) -> None:
    """Invariant I (seed 003 #6) for the warm container: an executor that dies leaves its
    container running with its commands in it (only a clean stop stops it); the next one
    finds it running and restarts it, which ends them."""
    import asyncio

    settings = settings_for(**docker_env(engine, WM__EXECUTOR__NETWORK="none"))
    dead = await detect_sandbox(settings.config, settings.home)
    assert dead.kind == "docker", dead.note
    started = home / "workspace" / "started"
    orphan = asyncio.create_task(run(dead, "touch started; sleep 613", home, timeout=600))
    try:
        async with asyncio.timeout(60):
            while not started.exists():  # noqa: ASYNC110 - a file the container writes
                await asyncio.sleep(0.1)
        # the executor "dies": `dead` is never closed; the next executor opens the container
        sb = await detect_sandbox(settings.config, settings.home)
        try:
            res = await run(sb, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '", home)
            assert "sleep 613" not in res.output and "cat" in res.output
            ended = await asyncio.wait_for(orphan, 30)  # its exec ended with the restart
            assert not ended.timed_out
        finally:
            await sb.close()
    finally:
        orphan.cancel()
        await asyncio.gather(orphan, return_exceptions=True)
