"""The apiserver's sockets (``ironpool apiserver``'s and ``ironpool up``'s alike) turn Nagle off on
every connection: without TCP_NODELAY a response's second segment waits for the client's delayed ACK,
40 ms on every request."""

from __future__ import annotations

import asyncio
import socket

import pytest
from ironpool.apiserver.serving.listening import ListenError, listen


async def test_accepted_connections_have_tcp_nodelay() -> None:
    [sock] = listen("127.0.0.1", 0)
    accepted: asyncio.Queue[socket.socket] = asyncio.Queue()

    def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.put_nowait(writer.get_extra_info("socket"))

    server = await asyncio.start_server(on_connect, sock=sock)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        conn = await asyncio.wait_for(accepted.get(), 5)
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_every_address_of_a_name_is_served_on_one_port() -> None:
    sockets = listen("localhost", 0)
    try:
        families = {s.family for s in sockets}
        ports = {s.getsockname()[1] for s in sockets}
        assert socket.AF_INET in families
        assert len(ports) == 1 and 0 not in ports
    finally:
        for s in sockets:
            s.close()


def test_a_taken_port_is_refused_naming_the_address() -> None:
    [taken] = listen("127.0.0.1", 0)
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            listen("127.0.0.1", port)
    finally:
        taken.close()
