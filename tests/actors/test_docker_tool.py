"""docker_manage against a real Docker API (Podman's service) with a locally imported image;
pulls go only to a loopback registry address, so nothing leaves the machine."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from actors.executor._docker_run import SERVICE_LABEL, ULIMITS, BadArgs, run_spec
from actors.executor.base import ToolContext
from actors.executor.docker_tool import DockerManage, docker_manage_tool
from actors.executor.sandbox.direct import DirectSandbox
from bus import Bus
from contracts import ToolRequest
from contracts.config import Settings
from kit.redact import Redactor
from tests.actors.harness import actors
from tests.fakes.sandboxes import PodmanService, require, sandbox_rootfs

SettingsFor = Callable[..., Settings]
IMAGE = "localhost/wintermute-service-test:v1"
NOWHERE = "127.0.0.1:9/wintermute/absent:v1"  # a registry address where nothing listens


@pytest.fixture(scope="module")
async def engine(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PodmanService]:
    if os.geteuid() != 0:
        pytest.fail("docker_manage tests run podman as root") if os.environ.get("CI") else \
            pytest.skip("docker_manage tests run podman as root")
    require({"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"})
    service = PodmanService(tmp_path_factory.mktemp("podman-tool"))
    await service.start()
    try:
        await service.import_image(sandbox_rootfs(), IMAGE)
        yield service
    finally:
        service.stop()


@pytest.fixture
def ctx(settings_for: SettingsFor, bus: Bus) -> ToolContext:
    settings = settings_for(WM__EXECUTOR__MODE="direct")
    settings.home.joinpath("workspace").mkdir(exist_ok=True)
    return ToolContext(settings, bus, DirectSandbox(), Redactor(), {})


def call(action: str, **arguments: object) -> ToolRequest:
    return ToolRequest(id=f"t:tool:{action}", session="s", turn_id="t", step=0, call_id="c",
                       name="docker_manage", arguments={"action": action, **arguments},
                       is_owner=True)


async def test_service_lifecycle_on_labelled_containers(
    engine: PodmanService, ctx: ToolContext,
) -> None:
    tool = DockerManage(engine.url)
    start = call("run", image=IMAGE, args={"name": "wm-svc", "command": "echo ready; sleep 300",
                                           "env": {"MODE": "test"}})
    assert await tool.approval_reason(start, ctx) == ""  # the image is already here
    started = await tool.run(start, ctx)
    assert started.ok and "started wm-svc" in started.output, started.output
    listed = await tool.run(call("ps"), ctx)
    assert "wm-svc" in listed.output and IMAGE in listed.output
    ran = await tool.run(call("exec", container="wm-svc", command="echo $MODE; exit 3"), ctx)
    assert "exit code 3" in ran.output and "test" in ran.output and not ran.ok
    logs = await tool.run(call("logs", container="wm-svc"), ctx)
    assert "ready" in logs.output
    assert "status running" in (await tool.run(call("inspect", container="wm-svc"), ctx)).output
    assert (await tool.run(call("stop", container="wm-svc"), ctx)).ok
    assert (await tool.run(call("rm", container="wm-svc"), ctx)).ok
    assert "No containers" in (await tool.run(call("ps"), ctx)).output


async def test_containers_it_did_not_create_are_left_alone(
    engine: PodmanService, ctx: ToolContext,
) -> None:
    import aiodocker

    docker = aiodocker.Docker(url=engine.url)
    try:
        other = await docker.containers.run(
            {"Image": IMAGE, "Cmd": ["sleep", "300"], "Labels": {"wintermute": "true"},
             "HostConfig": {"Ulimits": ULIMITS}},
            name="not-ours")
        tool = DockerManage(engine.url)
        for action in ("stop", "rm", "exec", "logs", "inspect"):
            out = await tool.run(call(action, container="not-ours", command="true"), ctx)
            assert not out.ok and "not created by docker_manage" in out.output, action
        assert "not-ours" not in (await tool.run(call("ps"), ctx)).output
        assert (await other.show())["State"]["Running"]
    finally:
        await docker.containers.container("not-ours").delete(force=True)
        await docker.close()


async def test_first_pull_of_an_image_needs_approval(
    engine: PodmanService, ctx: ToolContext,
) -> None:
    tool = DockerManage(engine.url)
    for action in ("pull", "run"):
        reason = await tool.approval_reason(call(action, image=NOWHERE), ctx)
        assert "not on this machine" in reason and NOWHERE in reason
    assert await tool.approval_reason(call("pull", image=IMAGE), ctx) == ""
    approved = await tool.run(call("pull", image=NOWHERE), ctx)  # what runs once approved
    assert not approved.ok and "refused pull" in approved.output


def test_run_spec_keeps_containers_inside_their_limits(tmp_path: Path) -> None:
    spec = run_spec({"ports": {"80": 8080}, "volumes": ["data:/data", "workspace/m:/m:ro"]},
                    IMAGE, "svc", tmp_path)
    host = spec["HostConfig"]
    assert host["PortBindings"] == {"80/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8080"}]}
    assert host["Binds"] == ["data:/data", f"{tmp_path}/m:/m:ro"]
    assert host["Privileged"] is False and spec["Labels"][SERVICE_LABEL] == "svc"
    (tmp_path / "lnk").symlink_to("/etc")  # planted by a sandboxed command
    for bad in ({"volumes": ["/etc:/etc"]}, {"volumes": ["../x:/x"]}, {"network": "host"},
                {"volumes": ["workspace/lnk:/x"]}, {"volumes": ["workspace/lnk/sub:/x"]},
                {"restart": "sometimes"}, {"ports": {"80": "eighty"}}):
        with pytest.raises(BadArgs):
            run_spec(bad, IMAGE, "svc", tmp_path)


async def test_offered_only_when_a_docker_api_answers(
    engine: PodmanService, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    settings = settings_for(WM__EXECUTOR__MODE="direct")
    assert await docker_manage_tool(settings.config) is None
    monkeypatch.setenv("DOCKER_HOST", engine.url)
    async with actors(settings, "executor") as running:
        bus = running.procs["executor"][2]
        names: set[str] = set()
        async with asyncio.timeout(60):  # until the executor has published its tools
            while "execute_command" not in names:
                await asyncio.sleep(0.1)
                raw = await bus.kv_get(bus.subjects.kv_state, "tools") or b"[]"
                names = {t["name"] for t in json.loads(raw)}
    assert "docker_manage" in names
