"""The in-sandbox half of the network allowlist: TCP on the sandbox's own loopback -> UNIX socket.

Run inside the sandbox by the system python3 (``python3 -I -S relay.py SOCKET PORT -- CMD...``),
so it uses the standard library only and never imports pincer. It listens on 127.0.0.1:PORT,
starts CMD (whose HTTP(S)_PROXY points there) and pipes every connection to the host-side proxy
behind SOCKET, which decides what may be reached. It exits with CMD's status. The relay itself
enforces nothing: the sandbox has no other way out, so it needs no trust.
"""

from __future__ import annotations

import os
import socket
import sys
import threading

_CHUNK = 65536


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        conn, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            conn.close()
            upstream.close()
            continue
        threading.Thread(target=_pipe, args=(conn, upstream), daemon=True).start()
        threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()


def _wait(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: relay.py SOCKET PORT -- COMMAND...\n")
        os._exit(2)
    path, port, command = argv[0], int(argv[1]), argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    pid = os.fork()  # before any thread exists
    if pid == 0:
        listener.close()
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
        os._exit(127)
    threading.Thread(target=_wait, args=(pid,), daemon=True).start()
    _serve(listener, path)


if __name__ == "__main__":
    main(sys.argv[1:])
