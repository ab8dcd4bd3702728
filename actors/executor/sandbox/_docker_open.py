"""Connecting to a Docker API (Docker or Podman) and starting the warm sandbox container."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from actors.executor.sandbox._docker_spec import docker_hosts
from actors.executor.sandbox.base import Layout, SandboxError, start_egress
from actors.executor.sandbox.docker import API_TIMEOUT, DockerSandbox
from contracts.config import Config

if TYPE_CHECKING:
    import aiodocker


async def open_docker(config: Config, layout: Layout, *, reason: str = "") -> DockerSandbox:
    """Connect to the first answering Docker API that has the image; SandboxError saying why
    not otherwise. Starts the egress proxy (network "proxy") and the warm container."""
    urls = docker_hosts(config.executor.docker_host)
    if not urls:
        raise SandboxError("no Docker API was found (DOCKER_HOST is unset and no Docker or "
                           "Podman socket exists)")
    # Only now: aiodocker brings aiohttp (~14 MB at rest), for nothing without a Docker API.
    try:
        from aiodocker.exceptions import DockerError
    except ImportError as exc:
        raise SandboxError("the aiodocker package is not installed (pip install aiodocker)") from exc
    problems = []
    for url in urls:
        try:
            docker, image_id, rootless = await _connect(url, config.executor.image)
        except SandboxError as exc:
            problems.append(str(exc))
            continue
        proxy, egress_dir = await start_egress(config, layout)
        sandbox = DockerSandbox(docker, url, config, layout, image_id=image_id,
                                rootless=rootless, proxy=proxy, egress_dir=egress_dir,
                                reason=reason or f"the Docker API at {url} has {config.executor.image}")
        try:
            await sandbox.start()
        except (SandboxError, TimeoutError, DockerError) as exc:
            await sandbox.close()
            why = getattr(exc, "message", "") or str(exc) or "it stopped answering"
            problems.append(f"the sandbox container could not be started via {url}: {why}"
                            if not isinstance(exc, SandboxError) else why)
            continue
        return sandbox
    raise SandboxError("; ".join(problems))


async def _connect(url: str, image: str) -> tuple[aiodocker.Docker, str, bool]:
    import aiodocker
    from aiodocker.exceptions import DockerError

    docker = aiodocker.Docker(url=url)
    try:
        async with asyncio.timeout(API_TIMEOUT):
            try:  # the first call also negotiates the API version
                image_id = (await docker.images.inspect(image))["Id"]
            except DockerError as exc:
                if exc.status != 404:
                    raise
                raise SandboxError(
                    f"the Docker API at {url} has no image {image} (build it with "
                    f"`docker build -t {image} images/sandbox`, or set executor.image)"
                ) from exc
            info = await docker.system.info()
    except (DockerError, OSError, TimeoutError, ValueError) as exc:
        await docker.close()
        why = getattr(exc, "message", "") or str(exc) or type(exc).__name__
        raise SandboxError(f"the Docker API at {url} did not answer ({why})") from exc
    except SandboxError:
        await docker.close()
        raise
    rootless = any("rootless" in str(opt) for opt in info.get("SecurityOptions") or [])
    return docker, image_id, rootless
