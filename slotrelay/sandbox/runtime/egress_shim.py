"""In-sandbox end of the egress allow-list: 127.0.0.1:3128 forwarded to the host's proxy socket.

Usage: egress_shim.py SOCKET -- PROGRAM [ARGS...]
The sandbox has no network (only loopback) and no resolver. This shim binds 127.0.0.1:3128
before anything else runs, forks a child that pipes every connection to the unix socket the
host bound into the sandbox, and execs PROGRAM; HTTP(S)_PROXY point at the shim. The host's
proxy decides what gets out. Imports nothing from slotrelay: it is copied into the images.
"""

import os
import socket
import sys
import threading

PORT = 3128


def _pipe(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(listener, path):
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()


def main():
    path = sys.argv[1]
    program = sys.argv[sys.argv.index("--") + 1 :]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PORT))
    listener.listen(64)
    if os.fork() == 0:
        os.setsid()
        _serve(listener, path)
        os._exit(0)
    listener.close()
    os.execvp(program[0], program)


if __name__ == "__main__":
    main()
