"""Where commands run: a Docker-API container, a bubblewrap namespace, or (last) the host."""

from actors.executor.sandbox.base import Sandbox, SandboxError, UnavailableSandbox
from actors.executor.sandbox.detect import detect_sandbox
from actors.executor.sandbox.direct import DirectSandbox

__all__ = ["DirectSandbox", "Sandbox", "SandboxError", "UnavailableSandbox", "detect_sandbox"]
