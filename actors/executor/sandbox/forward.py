"""Runs inside a sandbox (stdlib only): relay 127.0.0.1:PORT to the egress proxy's unix socket.

A sandbox has no network of its own, only loopback. This program listens on the sandbox's
loopback and relays every connection to the host's egress proxy through a unix socket mounted
into the sandbox, so HTTP(S)_PROXY=http://127.0.0.1:PORT is the only way out.

    python3 -I -S -c SOURCE run  PORT SOCKET CMD...   listen, then become CMD
    python3 -I -S -c SOURCE init PORT SOCKET          container init: listen, reap, stop on TERM

An empty SOCKET means no network: nothing listens. This file is passed as source text with
`-c`, so it must not import anything outside the standard library and must stay compatible
with older Python 3 releases found in sandbox images.

It starts once per bubblewrap command, so it imports only modules built into the interpreter
(`_socket`, `_thread`, `_signal`: no `socket`, `threading`, `subprocess` or `signal`, whose
enum set-up costs ~10 ms of CPU per start), and in `run` mode the relay is a forked child while
this process execs CMD: the command's exit status and signals are its own, and the relay dies
with the sandbox's PID namespace when CMD ends.
"""

import _socket
import _thread
import os
import sys

CHUNK = 65536
# The forwarder may outlive the commands that use it (one per sandbox, or a container's init),
# so no command may hold its threads: at most MAX_RELAYS connections at once (more are refused),
# and once a client has sent EOF (or died), the answer gets AFTER_EOF seconds to finish.
MAX_RELAYS = 128
AFTER_EOF = 300.0
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    b"Too many connections through the sandbox's egress forwarder at once; close some and retry.\n"
)
_free = [MAX_RELAYS]
_free_lock = _thread.allocate_lock()
NOT_RUNNING = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    b"The Wintermute egress proxy is not running, so the network is unavailable.\n"
)


def _pipe(src: _socket.socket, dst: _socket.socket, done: "_thread.LockType | None" = None) -> None:
    """Copy src to dst until EOF, then half-close dst (and release `done`)."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    if done is not None:
        done.release()


def _relay(client: _socket.socket, path: str) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        try:
            client.sendall(NOT_RUNNING)
        except OSError:
            pass
        client.close()
        upstream.close()
        return
    back = _thread.allocate_lock()
    back.acquire()
    _thread.start_new_thread(_pipe, (upstream, client, back))
    _pipe(client, upstream)
    if not back.acquire(True, AFTER_EOF):  # wait for the other direction, not forever
        try:
            upstream.shutdown(_socket.SHUT_RDWR)  # wakes its blocked recv
        except OSError:
            pass
        back.acquire()
    client.close()
    upstream.close()


def _relay_counted(client: _socket.socket, path: str) -> None:
    try:
        _relay(client, path)
    finally:
        with _free_lock:
            _free[0] += 1


def _serve(listener: _socket.socket, path: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # socket.accept without the socket module
        except OSError:
            return
        client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
        with _free_lock:
            full = _free[0] <= 0
            if not full:
                _free[0] -= 1
        if full:
            try:
                client.sendall(BUSY)
            except OSError:
                pass
            client.close()
            continue
        _thread.start_new_thread(_relay_counted, (client, path))


def _listen(port: int, path: str) -> "_socket.socket | None":
    """Bind before the command starts, so its first request finds the port open."""
    if not path:
        return None
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def _run(listener: "_socket.socket | None", path: str, cmd: "list[str]") -> None:
    if listener is not None:
        child = os.fork()
        if child == 0:
            # The relay, orphaned at once (the sandbox's init adopts it), so the command has no
            # child it did not start, and without the command's stdio (its pipes end with it).
            if os.fork() != 0:
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            _serve(listener, path)
            os._exit(0)
        os.waitpid(child, 0)
        listener.close()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        sys.stderr.write("wintermute forwarder: cannot run " + cmd[0] + ": " + str(exc) + "\n")
        os._exit(127)


def _reap(signum: int, frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _init(listener: "_socket.socket | None", path: str) -> None:
    import _signal

    if listener is not None:
        _thread.start_new_thread(_serve, (listener, path))
    _signal.signal(_signal.SIGCHLD, _reap)
    _signal.signal(_signal.SIGTERM, lambda signum, frame: os._exit(0))
    _signal.signal(_signal.SIGINT, lambda signum, frame: os._exit(0))
    while True:
        _signal.pause()


def main(argv: "list[str]") -> None:
    mode, port, path = argv[1], int(argv[2]), argv[3]
    listener = _listen(port, path)
    if mode == "run":
        _run(listener, path, argv[4:])
    _init(listener, path)


if __name__ == "__main__":
    main(sys.argv)
