"""The first program of every sandboxed or direct command: join its cgroups, set its rlimits,
and either exec the command or (subreaper mode) run it as a child and stay its reaper.

Run as `python -I -S -c <this source> SPEC... -- ARGV...` by the executor
(_proctree.launcher_argv), so it must stay self-contained (stdlib only). Each SPEC argument is
`cgroup=<cgroup.procs path>`, `rlimit=RLIMIT_X=n` or `subreaper`. It starts once per command,
so it imports only what is built into the interpreter (no json or signal: their imports cost
~12 ms of CPU per command). As a subreaper, processes the command orphans (double fork, setsid) are re-parented here instead of
to init, so the executor can find and kill every one of them at the timeout.
"""

import _signal
import os
import resource
import sys

PR_SET_CHILD_SUBREAPER = 36


def fail(text: str) -> None:
    sys.stderr.write(f"wintermute launcher: {text}\n")
    sys.exit(125)


def main() -> None:
    # Python ignores these at start-up and ignored signals survive exec: give the command
    # the defaults a shell gives (a full pipe or file then stops it as usual).
    for name in ("SIGPIPE", "SIGXFSZ"):
        _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    split = sys.argv.index("--")
    spec, argv = sys.argv[1:split], sys.argv[split + 1:]
    cgroups = [a[len("cgroup="):] for a in spec if a.startswith("cgroup=")]
    rlimits = [a[len("rlimit="):].split("=", 1) for a in spec if a.startswith("rlimit=")]
    for procs in cgroups:
        try:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))
        except OSError as exc:
            fail(f"cannot join the cgroup {procs}: {exc}")
    for name, text in rlimits:
        value = int(text)
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (OSError, ValueError) as exc:
            fail(f"cannot set {name} to {value}: {exc}")
    if "subreaper" not in spec:
        os.execvp(argv[0], argv)
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        fail("cannot become a child subreaper")
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    while True:  # reap orphans handed to us until the command itself exits
        try:
            got, status = os.waitpid(-1, 0)
        except ChildProcessError:
            sys.exit(127)
        if got == pid:
            code = os.waitstatus_to_exitcode(status)
            if code < 0:  # die of the same signal, so the caller sees what the command saw
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                if -code not in (_signal.SIGKILL, _signal.SIGSTOP):
                    _signal.signal(-code, _signal.SIG_DFL)
                os.kill(os.getpid(), -code)
            sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
