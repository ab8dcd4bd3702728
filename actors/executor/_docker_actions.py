"""docker_manage's actions, one function each; every container touched must carry our label."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from actors.executor._docker_run import SERVICE_LABEL, BadArgs, container_name, run_spec
from actors.executor.base import ToolContext, ToolOutput, arg_int, arg_str
from contracts import ToolRequest

if TYPE_CHECKING:
    from actors.executor.docker_tool import DockerManage

API_TIMEOUT = 30.0


class NotManaged(Exception):
    """A container or network docker_manage did not create; the message says so."""


def _out(text: str, ok: bool = True) -> ToolOutput:
    return ToolOutput(ok=ok, output=text)


async def _managed(docker: Any, name: str) -> Any:
    """The container `name` if docker_manage created it, else NotManaged."""
    from aiodocker.exceptions import DockerError

    if not name.strip():
        raise BadArgs("Name the container (container=...).")
    try:
        async with asyncio.timeout(API_TIMEOUT):
            container = await docker.containers.get(name)
    except DockerError as exc:
        if exc.status == 404:
            raise NotManaged(f"There is no container {name!r}.") from None
        raise
    labels = (container._container.get("Config") or {}).get("Labels") or {}
    if SERVICE_LABEL not in labels:
        raise NotManaged(f"{name!r} was not created by docker_manage, so it is left alone.")
    return container


async def ps(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
    async with asyncio.timeout(API_TIMEOUT):
        found = await docker.containers.list(all=True, filters=f'{{"label":["{SERVICE_LABEL}"]}}')
    if not found:
        return _out("No containers created by docker_manage.")
    lines = []
    for c in found:
        info = c._container
        names = ",".join(n.lstrip("/") for n in info.get("Names") or [])
        lines.append(f"{names}  {info.get('Image')}  {info.get('State')}  {info.get('Status', '')}")
    return _out("\n".join(lines))


async def run(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
    image = arg_str(req, "image").strip()
    if not image:
        raise BadArgs("run needs an image.")
    args = req.arguments.get("args") or {}
    if not isinstance(args, dict):
        raise BadArgs("args must be an object.")
    if "command" in req.arguments and "command" not in args:
        args = {**args, "command": req.arguments["command"]}
    name = container_name(str(args.get("name") or req.arguments.get("container") or ""), image)
    spec = run_spec(args, image, name, ctx.workspace)
    note = await tool.ensure_image(docker, image, ctx)
    async with asyncio.timeout(API_TIMEOUT):
        container = await docker.containers.run(config=spec, name=name)
        info = await container.show()
    ports = info.get("HostConfig", {}).get("PortBindings") or {}
    shown = ", ".join(f"127.0.0.1:{b[0]['HostPort']}->{p}" for p, b in ports.items() if b)
    return _out(f"{note}started {name} ({image}), state {info['State']['Status']}"
                + (f", ports {shown}" if shown else ""))


async def stop(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
    container = await _managed(docker, arg_str(req, "container"))
    async with asyncio.timeout(API_TIMEOUT):
        await container.stop(t=10)
    return _out(f"stopped {arg_str(req, 'container')}")


async def rm(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
    container = await _managed(docker, arg_str(req, "container"))
    async with asyncio.timeout(API_TIMEOUT):
        await container.delete(force=True)
    return _out(f"removed {arg_str(req, 'container')}")


async def logs(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
    container = await _managed(docker, arg_str(req, "container"))
    tail = max(1, min(arg_int(req, "tail", 100), 2000))
    async with asyncio.timeout(API_TIMEOUT):
        lines = await container.log(stdout=True, stderr=True, tail=tail)
    text = "".join(lines)[-ctx.config.executor.output_limit:]
    return _out(text or "(no output yet)")


async def inspect(tool: DockerManage, docker: Any, req: ToolRequest,
                  ctx: ToolContext) -> ToolOutput:
    container = await _managed(docker, arg_str(req, "container"))
    info = container._container
    state = info.get("State") or {}
    cfg = info.get("Config") or {}
    net = (info.get("NetworkSettings") or {}).get("Networks") or {}
    return _out(f"{arg_str(req, 'container')}: image {cfg.get('Image')}, "
                f"status {state.get('Status')}, exit code {state.get('ExitCode')}, "
                f"networks {', '.join(net) or 'none'}, "
                f"ports {(info.get('HostConfig') or {}).get('PortBindings') or {}}")


async def exec(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:  # noqa: A001
    container = await _managed(docker, arg_str(req, "container"))
    command = req.arguments.get("command")
    if not command:
        raise BadArgs("exec needs a command.")
    argv = command if isinstance(command, list) else ["sh", "-c", str(command)]
    limit = ctx.config.executor.output_limit
    chunks: list[bytes] = []
    async with asyncio.timeout(ctx.config.executor.timeout_secs):
        execution = await container.exec([str(a) for a in argv])
        async with execution.start(detach=False) as stream:
            while (msg := await stream.read_out()) is not None:
                chunks.append(msg.data)
        code = (await execution.inspect()).get("ExitCode")
    text = b"".join(chunks).decode("utf-8", "replace")
    if len(text) > limit:
        text = text[: limit // 2] + "\n[... cut ...]\n" + text[-limit // 2:]
    return _out(f"exit code {code}\n{text}", ok=code == 0)


async def pull(tool: DockerManage, docker: Any, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
    image = arg_str(req, "image").strip()
    if not image:
        raise BadArgs("pull needs an image.")
    note = await tool.ensure_image(docker, image, ctx)
    return _out(note.rstrip("; ") or f"{image} is already on this machine.")


async def network_create(tool: DockerManage, docker: Any, req: ToolRequest,
                         ctx: ToolContext) -> ToolOutput:
    name = container_name(arg_str(req, "network"), "net")
    async with asyncio.timeout(API_TIMEOUT):
        await docker.networks.create({"Name": name, "Labels": {"wintermute": "true",
                                                               SERVICE_LABEL: name}})
    return _out(f"created network {name}")


async def network_connect(tool: DockerManage, docker: Any, req: ToolRequest,
                          ctx: ToolContext) -> ToolOutput:
    name = arg_str(req, "network")
    container = await _managed(docker, arg_str(req, "container"))
    async with asyncio.timeout(API_TIMEOUT):
        network = await docker.networks.get(name)
        info = await network.show()
        if SERVICE_LABEL not in (info.get("Labels") or {}):
            raise NotManaged(f"The network {name!r} was not created by docker_manage.")
        await network.connect({"Container": container.id})
    return _out(f"connected {arg_str(req, 'container')} to {name}")
