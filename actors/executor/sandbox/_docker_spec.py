"""Finding a Docker API and describing the warm sandbox container (no aiodocker import here)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from actors.executor.sandbox.base import (
    DEFAULT_PATH,
    EGRESS_INSIDE,
    EGRESS_SOCKET,
    FORWARD_SOURCE,
    PROXY_PORT,
    SANDBOX_HOME,
    Layout,
)
from contracts import short_hash
from contracts.config import Config

SANDBOX_PATH = f"{SANDBOX_HOME}/.local/bin:{DEFAULT_PATH}"
CONFIG_LABEL = "wintermute.config"


def docker_hosts(configured: str) -> list[str]:
    """Docker API URLs to try: the configured one, else DOCKER_HOST, else sockets that exist."""
    if configured:
        return [configured]
    if os.environ.get("DOCKER_HOST"):
        return [os.environ["DOCKER_HOST"]]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
    paths = ["/var/run/docker.sock", f"{runtime}/docker.sock", f"{runtime}/podman/podman.sock",
             "/run/podman/podman.sock", str(Path.home() / ".docker/run/docker.sock")]
    return [f"unix://{p}" for p in dict.fromkeys(paths) if Path(p).is_socket()]


def container_name(layout: Layout) -> str:
    return f"wintermute-sandbox-{short_hash(str(layout.home), 12)}"


# Explicit, modest rlimits: an engine without CAP_SYS_RESOURCE (podman in a container, as
# measured here) cannot raise them past its own, and fails on its defaults. The pids cgroup
# limit (sandbox.pids_limit) is what bounds processes; nproc only has to be harmless.
NOFILE = 4096
NPROC = 4096


def container_spec(
    config: Config, layout: Layout, *, image_id: str, user: str, egress_dir: Path | None,
) -> dict[str, Any]:
    """The create-container body: caps dropped, limits, mounts, no network but the forwarder."""
    sandbox = config.sandbox
    binds = []
    for host, inside in layout.shared():
        binds += [f"{host}:{inside}:rw", f"{host}:{host}:rw"]
    sock = ""
    if egress_dir is not None:
        binds.append(f"{egress_dir}:{EGRESS_INSIDE}:ro")
        sock = f"{EGRESS_INSIDE}/{EGRESS_SOCKET}"
    spec: dict[str, Any] = {
        "Image": image_id,
        "Entrypoint": ["python3", "-I", "-S", "-c", FORWARD_SOURCE],
        "Cmd": ["init", str(PROXY_PORT), sock],
        "Env": [f"PATH={SANDBOX_PATH}", f"HOME={SANDBOX_HOME}", "TMPDIR=/tmp"],
        "WorkingDir": "/workspace",
        "User": user,
        "Hostname": "wintermute-sandbox",
        "Labels": {"wintermute": "true", "wintermute.home": str(layout.home)},
        "HostConfig": {
            "NetworkMode": "none",
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "PidsLimit": sandbox.pids_limit,
            "Memory": sandbox.memory_mb * 1024 * 1024,
            "NanoCpus": int(sandbox.cpu_cores * 1e9),
            "Binds": binds,
            "Tmpfs": {"/tmp": f"rw,exec,nosuid,nodev,size={sandbox.tmp_mb}m"},
            "Ulimits": [{"Name": "nofile", "Soft": NOFILE, "Hard": NOFILE},
                        {"Name": "nproc", "Soft": NPROC, "Hard": NPROC}],
            "RestartPolicy": {"Name": "no"},
        },
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    spec["Labels"][CONFIG_LABEL] = digest
    return spec


SETUP_SCRIPT = """\
set -e
if [ -f /scripts/setup.sh ]; then bash /scripts/setup.sh; fi
if [ -f /scripts/requirements.txt ]; then
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -r /scripts/requirements.txt
fi
"""


def exec_command(command: str, timeout: float) -> list[str]:
    """GNU timeout inside the container around every command (TERM, then KILL 5 s later)."""
    return ["timeout", "--signal=TERM", "--kill-after=5", f"{max(timeout, 0.1):g}",
            "bash", "-c", command]
