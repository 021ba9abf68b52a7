"""`python -m uvicorn`, with the listening socket that `--workers` binds marked as TCP.

    python benchmarks/uvicorn_tcp.py app:create_app --factory --workers 2 ...

uvicorn 0.54 binds the socket it hands to its workers with `socket.socket(family)`, whose
`proto` reads 0; asyncio sets TCP_NODELAY only on accepted sockets whose `proto` is
IPPROTO_TCP, so Nagle's algorithm stays on. uvicorn writes an answer's head and body apart, so
on a keep-alive connection each answer after the first waits for the client's delayed ACK:
about 44 ms here (uvicorn issue #3149, fix pending in #3154/#3155, which pass IPPROTO_TCP when
they bind). One process (`--workers 1`) binds through asyncio and is not affected. This wrapper
re-wraps the bound socket's descriptor with IPPROTO_TCP, as those fixes do, so that several
workers are measured as they will be served once the fix ships. `benchmarks/workers.py` also
measures the release as it is, for the record.
"""

from __future__ import annotations

import socket
import sys

import uvicorn.config
from uvicorn.main import main

_bind_socket = uvicorn.config.Config.bind_socket


def bind_tcp_socket(self: uvicorn.config.Config) -> socket.socket:
    sock = _bind_socket(self)
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
        return socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    return sock


# A worker, started by multiprocessing's spawn, imports this module again as `__mp_main__`:
# the patch is then made there too, where nothing binds.
uvicorn.config.Config.bind_socket = bind_tcp_socket  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
