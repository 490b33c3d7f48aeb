"""The asyncio client's unary transport (aiohttp's pool, :mod:`ironpool.client.aio_transport`) against small
servers that answer in the ways HTTP/1.1 allows: Content-Length, chunked, close after the answer,
close while idle, TLS; and its failures as the exceptions the failover logic reads."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from ironpool.client import transport_errors as te
from ironpool.client.aio_transport import ServerPool

from tests.helpers.wait import eventually

Answer = Callable[[bytes], bytes]


async def serve(answer: Answer, tls: ssl.SSLContext | None = None,
                close_after: bool = False) -> tuple[asyncio.Server, int, list[bytes]]:
    """A server answering each request with ``answer(request head)``; the heads it saw (and one
    ``b"CONNECT"`` marker per connection it accepted)."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(b"CONNECT")
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                seen.append(head + body)
                writer.write(answer(head))
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    return server, server.sockets[0].getsockname()[1], seen


def ok(body: bytes, extra: bytes = b"") -> Answer:
    return lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def idle_connected(pool: ServerPool) -> int:
    """Idle connections in the pool whose socket is still open (aiohttp keeps no public count)."""
    connector = pool._session.connector if pool._session is not None else None
    conns = getattr(connector, "_conns", {})
    return sum(1 for idle in conns.values() for proto, _ in idle if proto.is_connected())


@pytest.fixture
async def closing() -> AsyncIterator[list[asyncio.Server]]:
    servers: list[asyncio.Server] = []
    yield servers
    for server in servers:
        server.close()


async def test_keep_alive_content_length_params_and_headers(closing: list[asyncio.Server]) -> None:
    server, port, seen = await serve(ok(b'{"a":1}'))
    closing.append(server)
    pool = ServerPool(f"http://127.0.0.1:{port}", {"Authorization": "Bearer t"}, True, 5)
    for _ in range(3):
        assert await pool.request("POST", "/x", {"watch": "true", "q": "a b"}, b'{"k":2}',
                                  {"Content-Type": "application/json"}) == (200, b'{"a":1}')
    assert seen.count(b"CONNECT") == 1  # one connection carried all three
    first = seen[1].decode()
    assert first.startswith("POST /x?watch=true&q=a+b HTTP/1.1\r\n")
    assert "Authorization: Bearer t\r\n" in first and f"Host: 127.0.0.1:{port}\r\n" in first
    assert first.endswith('\r\n\r\n{"k":2}')
    await pool.aclose()


async def test_chunked_answers_and_connection_close(closing: list[asyncio.Server]) -> None:
    chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" \
              b"4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\nTrailer: z\r\n\r\n"
    server, port, seen = await serve(lambda head: chunked, close_after=True)
    closing.append(server)
    pool = ServerPool(f"http://127.0.0.1:{port}", {}, True, 5)
    assert await pool.request("GET", "/", {}, None, {}) == (404, b'{"a":1}')
    assert await pool.request("GET", "/", {}, None, {}) == (404, b'{"a":1}')
    assert seen.count(b"CONNECT") == 2  # "Connection: close": not kept
    await pool.aclose()


async def test_a_connection_the_server_closed_while_idle_is_not_reused(closing: list[asyncio.Server]) -> None:
    server, port, seen = await serve(ok(b"{}"), close_after=True)  # closes without saying so
    closing.append(server)
    pool = ServerPool(f"http://127.0.0.1:{port}", {}, True, 5)
    assert await pool.request("POST", "/a", {}, b"{}", {}) == (200, b"{}")
    # The close arrives while the connection idles in the pool: the handler has ended.
    await eventually(lambda: not idle_connected(pool), 5, "the server's close")
    assert await pool.request("POST", "/b", {}, b"{}", {}) == (200, b"{}")  # a fresh one, no error
    assert seen.count(b"CONNECT") == 2 and len(seen) == 4
    await pool.aclose()


async def test_failures_are_the_exceptions_failover_reads(closing: list[asyncio.Server]) -> None:
    server, port, _ = await serve(ok(b"{}"))
    server.close()
    await server.wait_closed()
    with pytest.raises(te.ConnectError):
        await ServerPool(f"http://127.0.0.1:{port}", {}, True, 5).request("GET", "/", {}, None, {})
    silent, port, _ = await serve(lambda head: b"")  # reads the request, never answers
    closing.append(silent)
    with pytest.raises(te.ReadTimeout):
        await ServerPool(f"http://127.0.0.1:{port}", {}, True, 0.2).request("POST", "/", {}, b"", {})


async def test_tls_with_the_clients_context(closing: list[asyncio.Server], tmp_path: Path) -> None:
    from ironpool.apiserver.serving.certs import CertificateAuthority, CertPaths

    ca = CertificateAuthority.ensure(tmp_path)
    cert, key = ca.issue("server", ip_addresses=["127.0.0.1"], server=True)
    paths = ca.write(CertPaths(tmp_path / "s.crt", tmp_path / "s.key"), cert, key)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(paths.cert, paths.key)
    server, port, _ = await serve(ok(b'{"tls":true}'), tls=serving)
    closing.append(server)
    trusting = ssl.create_default_context(cafile=str(ca.paths.cert))
    pool = ServerPool(f"https://127.0.0.1:{port}", {}, trusting, 5)
    assert await pool.request("GET", "/", {}, None, {}) == (200, b'{"tls":true}')
    await pool.aclose()
    with pytest.raises(te.ConnectError):  # the system's CAs do not know this one
        await ServerPool(f"https://127.0.0.1:{port}", {}, True, 5).request("GET", "/", {}, None, {})



async def test_a_stream_yields_lines_as_they_come_and_a_cut_just_ends_it(
        closing: list[asyncio.Server]) -> None:
    big = b'{"type":"ADDED","object":{"x":"' + b"y" * 300_000 + b'"}}\n'  # past aiohttp's default line limit
    cut = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           + b"%x\r\n%s\r\n" % (len(big), big) + b"6\r\n{\"a\":\r\n")  # the second line never ends
    server, port, _ = await serve(lambda head: cut, close_after=True)
    closing.append(server)
    pool = ServerPool(f"http://127.0.0.1:{port}", {}, True, 5)
    async with pool.stream("GET", "/w", {"watch": "true"}, 5) as stream:
        assert stream.status == 200
        lines = [line async for line in stream.lines()]
    assert lines in ([big], [big, b'{"a":'])  # what arrived; no error for the cut
    await pool.aclose()


async def test_a_stream_that_stalls_past_its_read_timeout_fails_as_read_timeout(
        closing: list[asyncio.Server]) -> None:
    server, port, _ = await serve(lambda head: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    closing.append(server)
    pool = ServerPool(f"http://127.0.0.1:{port}", {}, True, 5)
    with pytest.raises(te.ReadTimeout):
        async with pool.stream("GET", "/w", {}, 0.3) as stream:
            async for _ in stream.lines():
                pass
    await pool.aclose()


async def test_a_write_whose_connection_broke_is_not_sent_again(closing: list[asyncio.Server]) -> None:
    server, port, seen = await serve(lambda head: b"", close_after=True)  # reads it, answers nothing
    closing.append(server)
    pool = ServerPool(f"http://127.0.0.1:{port}", {}, True, 5)
    for method in ("PUT", "DELETE"):
        with pytest.raises(te.TransportError):
            await pool.request(method, "/x", {}, b"{}", {})
    # once each: failover, not the library, decides whether a write whose answer was lost goes again
    assert [h.split(b" ", 1)[0] for h in seen if h != b"CONNECT"] == [b"PUT", b"DELETE"]
    await pool.aclose()
