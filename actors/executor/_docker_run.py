"""docker_manage's `run` arguments turned into a container spec that cannot escape its limits.

Only the keys read here reach the Docker API: no privileged mode, capabilities, devices, host
network or PID namespace; published ports bind to 127.0.0.1; bind mounts only from the
workspace; every container carries the labels that make it manageable later.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kit import safefs

SERVICE_LABEL = "wintermute.service"  # what docker_manage may touch (the sandbox has no such label)
RESTART = ("no", "on-failure", "unless-stopped", "always")
# Explicit rlimits: an engine without CAP_SYS_RESOURCE (podman inside a container) cannot raise
# them past its own and fails on its defaults; these stay below common hard limits.
ULIMITS = [{"Name": "nofile", "Soft": 4096, "Hard": 4096},
           {"Name": "nproc", "Soft": 4096, "Hard": 4096}]
_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}")


class BadArgs(Exception):
    """Arguments docker_manage refuses; the message is a sentence for the model."""


def container_name(raw: str, image: str) -> str:
    name = raw.strip() or "wintermute-" + re.sub(r"[^a-zA-Z0-9_.-]", "-", image.split("/")[-1])
    if not _NAME.fullmatch(name):
        raise BadArgs(f"{name!r} is not a valid container name (letters, digits, _ . -).")
    return name


def _ports(raw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """ExposedPorts and PortBindings from {"11434": 11434} or ["8080:80", "9000"]."""
    pairs: list[tuple[str, str]] = []
    if isinstance(raw, dict):
        pairs = [(str(host), str(ctr)) for ctr, host in raw.items()]
    elif isinstance(raw, list):
        for item in raw:
            host, _, ctr = str(item).rpartition(":")
            pairs.append((host or ctr, ctr))
    elif raw:
        raise BadArgs("ports must be an object {container_port: host_port} or a list 'host:ctr'.")
    exposed: dict[str, Any] = {}
    bindings: dict[str, Any] = {}
    for host, ctr in pairs:
        ctr_key = ctr if "/" in ctr else f"{ctr}/tcp"
        if not ctr_key.split("/")[0].isdigit() or not host.isdigit():
            raise BadArgs(f"port mapping {host}:{ctr} is not numeric.")
        exposed[ctr_key] = {}
        bindings.setdefault(ctr_key, []).append({"HostIp": "127.0.0.1", "HostPort": host})
    return exposed, bindings


def _binds(raw: Any, workspace: Path) -> list[str]:
    """Named volumes, or host folders inside the workspace; never other host paths."""
    if not raw:
        return []
    if not isinstance(raw, list):
        raise BadArgs("volumes must be a list like ['data:/var/lib/x', 'workspace/models:/m'].")
    out = []
    root = workspace.resolve()
    for item in raw:
        parts = str(item).split(":")
        if len(parts) not in (2, 3) or not parts[1].startswith("/"):
            raise BadArgs(f"volume {item!r} should look like 'source:/path/in/container[:ro]'.")
        src = parts[0]
        if "/" in src or src.startswith("."):
            rel = src.removeprefix("/workspace/").removeprefix("workspace/").removeprefix("./")
            try:  # created without following links the sandbox may have planted
                path = root if rel in ("", ".") else safefs.make_dirs(root, rel)
            except safefs.UnsafePath as exc:
                raise BadArgs(f"volume source {src!r} is outside the workspace or goes through "
                              f"a link ({exc}); only workspace folders and named volumes can be "
                              "mounted.") from exc
            src = str(path)
        out.append(":".join([src, *parts[1:]]))
    return out


def run_spec(args: dict[str, Any], image: str, name: str, workspace: Path) -> dict[str, Any]:
    """The create-container body for `run`."""
    exposed, bindings = _ports(args.get("ports"))
    env = args.get("env") or {}
    if not isinstance(env, dict):
        raise BadArgs("env must be an object of variable names to values.")
    restart = str(args.get("restart") or "no")
    if restart not in RESTART:
        raise BadArgs(f"restart must be one of {', '.join(RESTART)}.")
    network = str(args.get("network") or "")
    if network in ("host", "none") or network.startswith("container:"):
        raise BadArgs("containers cannot share the host's or another container's network.")
    command = args.get("command")
    spec: dict[str, Any] = {
        "Image": image,
        "Labels": {"wintermute": "true", SERVICE_LABEL: name},
        "Env": [f"{k}={v}" for k, v in env.items()],
        "ExposedPorts": exposed,
        "HostConfig": {
            "PortBindings": bindings, "Binds": _binds(args.get("volumes"), workspace),
            "RestartPolicy": {"Name": restart}, "Privileged": False,
            "SecurityOpt": ["no-new-privileges"], "Ulimits": ULIMITS,
            **({"NetworkMode": network} if network else {}),
        },
    }
    if command:
        spec["Cmd"] = command if isinstance(command, list) else ["sh", "-c", str(command)]
    return spec
