"""bwrap with network "proxy": one network namespace per sandbox, its forwarder started once and
joined by every command (actors/executor/sandbox/netns.py), with the per-command forwarder as
the fallback. Real bubblewrap, real egress proxy, a loopback origin standing for the internet."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.executor.command import CommandResult
from actors.executor.egress_proxy import EgressProxy
from actors.executor.sandbox.base import EGRESS_SOCKET, Layout
from actors.executor.sandbox.bwrap import BwrapSandbox
from tests.fakes.egress import PUBLIC_IP, LoopbackDialer, Origin
from tests.fakes.sandboxes import require

FETCH = ('(exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://allowed.example/ HTTP/1.1\\r\\n'
         'Host: allowed.example\\r\\n\\r\\n" >&3; cat <&3); echo')
NETNS = "readlink /proc/self/ns/net"


@pytest.fixture(scope="module", autouse=True)
def bwrap_installed() -> None:
    require({"bwrap": "bubblewrap", "nsenter": "util-linux"})


@pytest.fixture
async def sb(home: Path, origin: Origin) -> AsyncIterator[BwrapSandbox]:
    layout = Layout(home)
    folder = layout.egress_dir()
    proxy = EgressProxy(["allowed.example"], dialer=LoopbackDialer({"allowed.example": [PUBLIC_IP]},
                                                                   origin))
    await proxy.start_unix(folder / EGRESS_SOCKET)
    sandbox = BwrapSandbox(layout, network="proxy", proxy=proxy, egress_dir=folder)
    yield sandbox
    await sandbox.close()


async def run(sb: BwrapSandbox, command: str, timeout: float = 30) -> CommandResult:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    return await sb.run(command, cwd=sb.layout.workspace, timeout=timeout, output_limit=20_000,
                        env=env)


async def test_commands_share_one_loopback_only_namespace_whose_forwarder_they_cannot_see(
    sb: BwrapSandbox,
) -> None:
    await sb.probe()
    assert "a forwarder per sandbox" in sb.note
    first = await run(sb, f"{NETNS}; {FETCH}; cut -d: -f1 /proc/net/dev | tail -n +3")
    second = await run(sb, f"{NETNS}; {FETCH}; cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    ns, ns2 = first.output.split()[0], second.output.split()[0]
    assert ns == ns2 != os.readlink("/proc/self/ns/net")  # shared, and not the host's
    assert first.output.count("hello from allowed.example") == 1
    assert second.output.count("hello from allowed.example") == 1
    assert first.output.split()[-1] == "lo" and "eth" not in first.output  # loopback only
    # its own pid namespace: the forwarder (python ... init 3128 ...) is not among its processes
    assert "init 3128" not in second.output and "cat /proc/" in second.output


async def test_nothing_a_command_leaves_listening_reaches_the_next(sb: BwrapSandbox) -> None:
    listen = ("setsid python3 -c \"import socket, time\ns = socket.socket()\n"
              "s.bind(('127.0.0.1', 4000)); s.listen(); time.sleep(60)\" >/dev/null 2>&1 &\n"
              "for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/4000) 2>/dev/null "
              "&& echo listening && break; sleep 0.05; done")
    first = await run(sb, listen)
    assert "listening" in first.output, first.output
    second = await run(sb, "(exec 3<>/dev/tcp/127.0.0.1/4000) 2>&1; echo done")
    assert "Connection refused" in second.output and "done" in second.output


async def test_a_forwarder_that_died_is_started_again(sb: BwrapSandbox, origin: Origin) -> None:
    assert "hello from allowed.example" in (await run(sb, FETCH)).output
    assert sb.net is not None and sb.net.proc is not None
    sb.net.proc.kill()
    await sb.net.proc.wait()
    again = await run(sb, FETCH)
    assert "hello from allowed.example" in again.output, again.output
    assert origin.hits == 2


async def test_without_a_shared_namespace_each_command_starts_its_own_forwarder(
    sb: BwrapSandbox, origin: Origin,
) -> None:
    assert sb.net is not None
    await sb.net.disable()
    await sb.probe()
    assert "a forwarder per command" in sb.note
    first = await run(sb, f"{NETNS}; {FETCH}")
    second = await run(sb, f"{NETNS}; exit 3")
    assert "hello from allowed.example" in first.output and second.exit_code == 3
    assert first.output.split()[0] != second.output.split()[0]  # a namespace per command
    assert origin.hits == 1


async def test_one_command_cannot_hold_the_shared_forwarder(sb: BwrapSandbox) -> None:
    # 130 idle connections: the forwarder takes 128 at most and refuses the rest at once.
    hog = ("for i in $(seq 130); do exec {fd}<>/dev/tcp/127.0.0.1/3128 || exit 9; done; "
           "timeout 20 head -c 300 <&$fd")
    res = await run(sb, hog)
    assert "503 Service Unavailable" in res.output and "Too many connections" in res.output, res.output
    # its connections ended with it: the next command gets through (their threads end promptly)
    retry = ("for i in $(seq 100); do out=$(" + FETCH + "); case $out in *'hello from'*) "
             "echo \"$out\"; break;; esac; sleep 0.1; done")
    again = await run(sb, retry)
    assert "hello from allowed.example" in again.output, again.output


async def test_commands_in_the_shared_namespace_behave_as_in_their_own(sb: BwrapSandbox) -> None:
    """Exit status, signals, stdout and stderr, rlimits and the timeout: as with network none."""
    plain = BwrapSandbox(sb.layout, network="none", limits=sb.limits)
    commands = ["echo out; echo err >&2; exit 7", "kill -TERM $$", "ulimit -f; ulimit -t; id",
                "sleep 60 & sleep 60; echo never"]
    for command in commands:
        timeout = 1 if "sleep" in command else 30
        got, want = await run(sb, command, timeout), await run(plain, command, timeout)
        assert (got.exit_code, got.output, got.timed_out) == (
            want.exit_code, want.output, want.timed_out), command
    assert got.timed_out and got.exit_code is None
    assert sb.net is not None and sb.net.fd is not None  # it did run in the shared namespace


async def test_where_commands_cannot_join_the_namespace_they_start_their_own_forwarder(
    sb: BwrapSandbox,
) -> None:
    # as for a non-root executor: joining the namespace fails (here: a nsenter that always fails)
    assert sb.net is not None
    sb.net.nsenter = shutil.which("false")
    await sb.probe()
    assert not sb.net.usable and sb.net.proc is None and "a forwarder per command" in sb.note
    res = await run(sb, FETCH)
    assert "hello from allowed.example" in res.output, res.output


async def test_reset_starts_a_fresh_namespace(sb: BwrapSandbox) -> None:
    before = (await run(sb, NETNS)).output.split()[0]
    assert "start afresh" in await sb.reset()
    after = await run(sb, f"{NETNS}; {FETCH}")
    assert after.output.split()[0] != before and "hello from allowed.example" in after.output


#: The start of an executor in a process of its own (argv[1]: its home): a bwrap sandbox with
#: network "proxy" behind an egress proxy that allows nothing.
SANDBOX_PROCESS = r"""
import asyncio, os, signal, sys
from pathlib import Path
from actors.executor.egress_proxy import EgressProxy
from actors.executor.sandbox.base import EGRESS_SOCKET, Layout
from actors.executor.sandbox.bwrap import BwrapSandbox

async def proxied_sandbox():
    layout = Layout(Path(sys.argv[1]))
    folder = layout.egress_dir()
    proxy = EgressProxy([])
    await proxy.start_unix(folder / EGRESS_SOCKET)
    return layout, BwrapSandbox(layout, network="proxy", proxy=proxy, egress_dir=folder)
"""

KILLED_EXECUTOR = SANDBOX_PROCESS + """
async def main():
    _, sb = await proxied_sandbox()
    await sb.probe()
    pid = sb.net.proc.pid
    print(pid, open(f"/proc/{pid}/task/{pid}/children").read(), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


async def test_the_forwarder_dies_with_a_killed_executor(home: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_EXECUTOR, str(home), stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -9
    pids = [int(p) for p in out.split()]
    assert len(pids) == 2, out  # bwrap and the namespace's init, the forwarder's parent
    deadline = asyncio.get_running_loop().time() + 30
    while any(_alive(p) for p in pids):
        assert asyncio.get_running_loop().time() < deadline, "the forwarder outlived its executor"
        await asyncio.sleep(0.05)


AS_NOBODY = SANDBOX_PROCESS + r"""
GET = ('exec 3<>/dev/tcp/127.0.0.1/3128; printf "GET http://blocked.example/ HTTP/1.1\r\n'
       'Host: blocked.example\r\n\r\n" >&3; head -1 <&3')

async def main():
    layout, sb = await proxied_sandbox()
    try:
        await sb.probe()
        print(sb.note)
        for _ in range(2):
            res = await sb.run("id -u; readlink /proc/self/ns/net; " + GET, cwd=layout.workspace,
                               timeout=30, output_limit=5000, env={"PATH": "/usr/bin:/bin"})
            print("exit", res.exit_code, res.output.replace("\n", " "))
    finally:
        await sb.close()

asyncio.run(main())
"""
REAL_PYTHON = os.path.realpath(sys.executable)
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


async def _as_nobody(*argv: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *NOBODY, *argv, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_a_non_root_executor_joins_through_the_holders_user_namespace() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run an executor as another user")
    python = None
    for candidate in (REAL_PYTHON, "/usr/bin/python3"):  # its packages: this venv's, by path
        # run twice: setpriv execs its program before its capabilities are gone
        check = "import msgspec, subprocess, sys; subprocess.run([sys.executable, '-V'], check=True)"
        if (await _as_nobody(candidate, "-c", check))[0] == 0:
            python = candidate
            break
    if python is None:
        pytest.skip(f"no Python {sys.version_info[:2]} that user nobody may run")
    home = Path(tempfile.mkdtemp(prefix="wm-nobody-"))
    try:
        os.chown(home, 65534, 65534)
        code, out = await _as_nobody(python, "-c", AS_NOBODY, str(home))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert code == 0, out
    assert "a forwarder per sandbox" in out, out
    runs = [line.split() for line in out.splitlines() if line.startswith("exit ")]
    assert len(runs) == 2 and all(r[1:3] == ["0", "65534"] for r in runs), out
    assert runs[0][3] == runs[1][3] and "403" in runs[0] and "403" in runs[1], out


async def test_a_tool_run_in_the_shared_namespace_sees_scripts_read_only(
    sb: BwrapSandbox,
) -> None:
    """The read-only scripts/ of an agent-created tool's run holds for a command that joins
    the shared network namespace, and for one that starts its own forwarder."""
    scripts = sb.layout.scripts
    (scripts / "other.py").write_text("print('mine')\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    for _ in ("shared", "per command"):
        res = await sb.run(f"{NETNS}; echo evil > /scripts/other.py; echo evil > "
                           f"{scripts}/other.py; {FETCH}", cwd=sb.layout.workspace, timeout=30,
                           output_limit=20_000, env=env, read_only_scripts=True)
        assert res.output.count("Read-only file system") == 2, res.output
        assert "hello from allowed.example" in res.output, res.output
        assert (scripts / "other.py").read_text() == "print('mine')\n"
        assert sb.net is not None
        await sb.net.disable()  # the second round: a forwarder per command
