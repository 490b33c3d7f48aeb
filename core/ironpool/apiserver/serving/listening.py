"""Where the apiserver listens and the uvicorn server that serves there.

:func:`listen` binds the sockets before the server starts, so a taken port is a clear error at once
and port 0 is known before anyone is told where to connect. :class:`UvicornServer` is uvicorn's
server that says when it accepts connections and, in a process that runs other parts beside the
apiserver (``ironpool up``), leaves SIGINT and SIGTERM to that process.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Generator

import uvicorn


class ListenError(Exception):
    """The apiserver cannot listen where it was told; the message names the address and why."""


def listen(host: str, port: int) -> list[socket.socket]:
    """Bound (not yet listening) TCP sockets for every address ``host`` names, all on one port (port 0:
    a free one, the same for each). Raises :class:`ListenError`."""
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, _, _, _, address in addresses:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP; without
            # it Nagle holds back a response's second segment until the client's delayed ACK, 40 ms a
            # request.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and len({a[0] for a in addresses}) > 1:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # its IPv4 twin has its own
            bound_port = sockets[0].getsockname()[1] if len(sockets) > 1 else port
            sock.bind((address[0], bound_port, *address[2:]))
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sockets


class UvicornServer(uvicorn.Server):
    """uvicorn's server, telling ``on_started`` once it accepts connections; with ``signals`` False
    it installs no signal handlers (its owner stops it through :attr:`should_exit`)."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None = None,
                 signals: bool = True) -> None:
        super().__init__(config)
        self.on_started = on_started
        self.signals = signals

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if self.signals:
            with super().capture_signals():
                yield
        else:
            yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            self.on_started()
