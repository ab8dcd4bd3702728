"""Sections of config.toml about what tools may do: the executor and its sandbox, egress,
and MCP servers."""

from __future__ import annotations

import msgspec

from contracts.config_base import _Section

DEFAULT_RISKY = [
    r"\brm\s+-[a-zA-Z]*[rf]",
    r"\bsudo\b",
    r"\bmkfs",
    r"\bdd\s+if=",
    r"\bshutdown\b|\breboot\b",
    r"\bchmod\s+-R\b",
    r"\bcurl\b[^|]*\|\s*(ba)?sh",
    r"\bgit\s+push\b.*--force",
]


# Direct mode runs these without asking when nothing in the command line makes them write or
# run something else; the default of executor.direct_allowlist.
DIRECT_ALLOWLIST = [
    "ls", "cat", "echo", "printf", "pwd", "grep", "egrep", "fgrep", "head", "tail", "wc",
    "date", "whoami", "id", "uname", "true", "false", "test", "[", "seq", "sleep", "basename",
    "dirname", "realpath", "readlink", "stat", "file", "du", "df", "free", "uptime", "ps",
    "nl", "tac", "rev", "sort", "cut", "tr", "diff", "cmp", "md5sum", "sha1sum", "sha256sum",
    "base64", "od", "jq", "tree", "which", "printenv", "cd", "find", "exit",
]

SANDBOX_MODES = ("auto", "docker", "bwrap", "direct")
SANDBOX_NETWORKS = ("proxy", "none")
# A sandbox contains damage to the machine, not what reaches other machines through the proxy.
DEFAULT_SANDBOXED_RISKY = [r"\bgit\s+push\b.*--force"]


class ExecutorConfig(_Section):
    # Label ceilings by tool name (contracts/labels.py): a result is labelled at least this,
    # whatever the tool claims; unlisted tools: internal.
    tool_labels: dict[str, str] = msgspec.field(default_factory=dict)
    # auto: a Docker/Podman API with `image`, else bubblewrap, else direct (unsandboxed)
    mode: str = "auto"
    # sandboxed modes: "proxy" (only egress.allowed_domains + package registries) or "none"
    network: str = "proxy"
    docker_host: str = ""  # empty: DOCKER_HOST, else the usual Docker and Podman sockets
    image: str = "wintermute-sandbox:latest"  # built from images/sandbox (never pulled)
    timeout_secs: float = 120.0
    output_limit: int = 16_000
    # direct mode: commands matching these wait for the owner's approval ...
    risky_patterns: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_RISKY))
    # ... and so does every command not made only of these (parsed like the shell does;
    # actors/executor/shellgate.py)
    direct_allowlist: list[str] = msgspec.field(default_factory=lambda: list(DIRECT_ALLOWLIST))
    # docker/bwrap modes: the same, for what a sandbox cannot contain
    sandboxed_risky_patterns: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_SANDBOXED_RISKY)
    )


class EgressConfig(_Section):
    allowed_domains: list[str] = msgspec.field(default_factory=list)  # web_request; "*.x" ok
    fetch_rate_limit: int = 30  # web_fetch calls per minute
    request_rate_limit: int = 10  # web_request calls per minute
    blocked_domains: list[str] = msgspec.field(default_factory=list)  # and their subdomains
    always_approve_domains: list[str] = msgspec.field(default_factory=list)  # never trusted
    timeout_secs: float = 30.0  # per web call, all hops together
    max_redirects: int = 5
    max_fetch_bytes: int = 100_000  # text mode: the body is cut here
    approve_download_bytes: int = 50_000_000  # save_to: larger files need the owner's approval
    max_download_bytes: int = 500_000_000  # save_to: hard cap
    allowed_ports: list[int] = msgspec.field(default_factory=lambda: [80, 443])  # sandbox proxy


class SandboxConfig(_Section):
    """Limits of the sandboxes: the Docker-API container, and each bubblewrap command (a
    cgroup where this process may create one, rlimits otherwise)."""

    memory_mb: int = 2048
    cpu_cores: float = 2.0  # docker only
    pids_limit: int = 256
    tmp_mb: int = 512  # size of its /tmp (tmpfs); docker only
    file_size_mb: int = 1024  # bwrap: largest file a command may write (RLIMIT_FSIZE)
    cpu_secs: int = 600  # bwrap: CPU seconds per process (RLIMIT_CPU); 0: no limit

    def __post_init__(self) -> None:
        for name in ("memory_mb", "pids_limit", "file_size_mb"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.cpu_secs < 0:
            raise ValueError("cpu_secs must be 0 (no limit) or more")

class McpServer(_Section):
    """One MCP server: stdio (`command`, `args`, `env`) or Streamable HTTP (`url`, `headers`).
    Env and header values written "$NAME" are taken from .env."""

    name: str
    command: str = ""
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    allow: list[str] = msgspec.field(default_factory=list)  # its tools offered (empty: all)
    deny: list[str] = msgspec.field(default_factory=list)
    approval: str | list[str] = "never"  # "never", "always", or the tool names that ask
    timeout_secs: float = 60.0


class McpConfig(_Section):
    servers: list[McpServer] = msgspec.field(default_factory=list)
