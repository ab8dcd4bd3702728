"""Runs inside a sandbox (stdlib only): relay 127.0.0.1:PORT to the egress proxy's unix socket.

A sandbox has no network of its own, only loopback. This program listens on the sandbox's
loopback and relays every connection to the host's egress proxy through a unix socket mounted
into the sandbox, so HTTP(S)_PROXY=http://127.0.0.1:PORT is the only way out.

    python3 -I -S -c SOURCE run  PORT SOCKET CMD...   listen, run CMD, exit with its status
    python3 -I -S -c SOURCE init PORT SOCKET          container init: listen, reap, stop on TERM

An empty SOCKET means no network: nothing listens. This file is passed as source text with
`-c`, so it must not import anything outside the standard library and must stay compatible
with older Python 3 releases found in sandbox images.
"""

import os
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536
NOT_RUNNING = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
    b"The Wintermute egress proxy is not running, so the network is unavailable.\n"
)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until EOF, then half-close dst."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _relay(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
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
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_relay, args=(client, path), daemon=True).start()


def _listen(port: int, path: str) -> None:
    """Bind before the command starts, so its first request finds the port open."""
    if not path:
        return
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()


def _run(cmd: "list[str]") -> int:
    proc = subprocess.Popen(cmd)
    code = proc.wait()
    return 128 - code if code < 0 else code


def _reap(signum: int, frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _init() -> None:
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(0))
    while True:
        signal.pause()


def main(argv: "list[str]") -> None:
    mode, port, path = argv[1], int(argv[2]), argv[3]
    _listen(port, path)
    if mode == "run":
        sys.stdout.flush()
        os._exit(_run(argv[4:]))
    _init()


if __name__ == "__main__":
    main(sys.argv)
