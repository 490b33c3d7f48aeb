"""The apiserver socket of ``ironpool up`` turns Nagle off on every connection: without TCP_NODELAY a
response's second segment waits for the client's delayed ACK, 40 ms on every request."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from ironpool.allinone.servers import ApiServerRunner


async def test_accepted_connections_have_tcp_nodelay(tmp_path: Path) -> None:
    sock = ApiServerRunner("sqlite:///unused.db", tmp_path / "tokens.csv", "127.0.0.1", 0)._bind()
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
