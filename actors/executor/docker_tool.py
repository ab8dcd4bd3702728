"""docker_manage: services the agent runs next to itself, through the Docker API (aiodocker).

Offered only when a Docker API answers at executor start. It sees and touches only containers
it created (label `wintermute.service`), never the sandbox or anything else on the host; the
first pull of an image not yet on the machine waits for the owner's approval.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from actors.executor._docker_run import BadArgs
from actors.executor.base import Tool, ToolContext, ToolOutput, arg_str
from contracts import ToolRequest, ToolSpec

log = logging.getLogger(__name__)
ACTIONS = ("run", "stop", "rm", "ps", "logs", "pull", "network_create", "network_connect",
           "exec", "inspect")
API_TIMEOUT = 30.0
PULL_TIMEOUT = 900.0


def docker_urls(configured: str = "") -> list[str]:
    """Docker API addresses to try: configured, DOCKER_HOST, then the usual sockets."""
    urls = [u for u in (configured, os.environ.get("DOCKER_HOST", "")) if u]
    runtime = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    for sock in ("/var/run/docker.sock", f"{runtime}/podman/podman.sock",
                 "/run/podman/podman.sock"):
        if Path(sock).exists():
            urls.append(f"unix://{sock}")
    return list(dict.fromkeys(urls))


async def reachable_docker(configured: str = "") -> str:
    """The first Docker API that answers, or ""."""
    urls = docker_urls(configured)
    if not urls:
        return ""  # without importing aiodocker (and aiohttp: ~14 MB at rest)
    import aiodocker

    for url in urls:
        docker = aiodocker.Docker(url=url)
        try:
            # An absent socket fails at once; one that exists but answers slowly is a busy
            # engine (first call after start-up, a loaded machine), not a missing one.
            async with asyncio.timeout(15):
                await docker.version()
            return url
        except Exception as exc:  # noqa: BLE001 - any failure means "not this one"
            log.info("no Docker API at %s: %s", url, exc)
        finally:
            await docker.close()
    return ""


async def docker_manage_tool(config: Any) -> DockerManage | None:
    """The tool if a Docker API is reachable now, else None (and it is not offered)."""
    url = await reachable_docker(getattr(config.executor, "docker_host", "") or "")
    return DockerManage(url) if url else None


def _image_key(image: str) -> str:
    return "image." + hashlib.sha256(image.encode()).hexdigest()[:32]


def _full(image: str) -> str:
    return image if ":" in image.rsplit("/", 1)[-1] or "@" in image else f"{image}:latest"


class DockerManage(Tool):
    spec = ToolSpec(
        name="docker_manage",
        description=(
            "Run services the agent needs as containers on the host (e.g. a database or a "
            "model server): run, stop, rm, ps, logs, exec, inspect, pull, network_create, "
            "network_connect. Only containers created by this tool can be managed; ports bind "
            "to 127.0.0.1; the first pull of a new image asks the owner."
        ),
        parameters={
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ACTIONS)},
                "image": {"type": "string", "description": "For run and pull."},
                "container": {"type": "string", "description": "Container name."},
                "network": {"type": "string", "description": "For network_* actions."},
                "command": {"description": "For exec (and run): a string or a list."},
                "args": {"type": "object", "description": (
                    "For run: name, ports {ctr: host}, env {}, volumes ['vol:/path', "
                    "'workspace/dir:/path'], network, restart, command.")},
                "tail": {"type": "integer", "description": "For logs: last lines (100)."},
            },
            "required": ["action"],
        },
    )
    owner_only = True

    def __init__(self, url: str) -> None:
        self.url = url

    def _docker(self) -> Any:
        import aiodocker

        return aiodocker.Docker(url=self.url)

    async def _has_image(self, docker: Any, image: str) -> bool:
        from aiodocker.exceptions import DockerError

        try:
            await docker.images.inspect(_full(image))
            return True
        except DockerError as exc:
            if exc.status == 404:
                return False
            raise

    async def approval_reason(self, req: ToolRequest, ctx: ToolContext) -> str:
        action, image = arg_str(req, "action"), arg_str(req, "image").strip()
        if action not in ("pull", "run") or not image:
            return ""
        if await ctx.bus.kv_get(ctx.subjects.kv_state, _image_key(_full(image))):
            return ""  # the owner approved this image before
        docker = self._docker()
        try:
            async with asyncio.timeout(API_TIMEOUT):
                if await self._has_image(docker, image):
                    return ""
        except Exception:  # noqa: BLE001 - run() reports the API failure
            return ""
        finally:
            await docker.close()
        return f"the image {_full(image)} is not on this machine yet and would be pulled"

    async def run(self, req: ToolRequest, ctx: ToolContext) -> ToolOutput:
        from aiodocker.exceptions import DockerError

        from actors.executor import _docker_actions as actions

        action = arg_str(req, "action")
        if action not in ACTIONS:
            return ToolOutput(ok=False, output=f"action must be one of {', '.join(ACTIONS)}.")
        docker = self._docker()
        try:
            handler = getattr(actions, action)
            out: ToolOutput = await handler(self, docker, req, ctx)
            return out
        except (BadArgs, actions.NotManaged) as exc:
            return ToolOutput(ok=False, output=str(exc))
        except DockerError as exc:
            return ToolOutput(ok=False, output=f"The Docker API refused {action}: {exc.message}")
        except TimeoutError:
            return ToolOutput(ok=False, output=f"The Docker API did not finish {action} in time.",
                              timed_out=True)
        finally:
            await docker.close()

    async def ensure_image(self, docker: Any, image: str, ctx: ToolContext) -> str:
        """Pull the image if missing (the call was approved if that was needed); a note."""
        if await self._has_image(docker, image):
            return ""
        async with asyncio.timeout(PULL_TIMEOUT):
            await docker.images.pull(_full(image))
        await ctx.bus.kv_put(ctx.subjects.kv_state, _image_key(_full(image)), b"approved")
        return f"pulled {_full(image)}; "

