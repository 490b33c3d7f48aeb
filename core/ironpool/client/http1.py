"""A lean HTTP/1.1 keep-alive transport for the asyncio client's unary requests.

A controller or the scheduler sends thousands of small requests a second; httpx spends far more
CPU on each (URL parsing, its pool's bookkeeping, anyio layers) than the apiserver spends serving
it. This transport does only what the apiserver needs: HTTP/1.1 with keep-alive, TLS with the
client's SSL context, ``Content-Length`` or chunked bodies. Watch streams stay on httpx.

Failures are raised as the httpx exceptions the failover logic (:mod:`.failover`) already reads:
``ConnectError``/``ConnectTimeout`` (nothing was sent), ``RemoteProtocolError`` (a reused
connection the server had closed: no answer at all), ``ReadError``/``ReadTimeout`` (the answer
was lost: a write may have been applied).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from urllib.parse import urlencode, urlsplit

import httpx

_MAX_HEAD = 64 * 1024
# uvicorn closes a keep-alive connection after 5 s without a request; reusing one that old races it.
_IDLE_REUSE = 4.0


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.used = False  # a request went over it before (then an immediate EOF means: closed idle)
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """Not closed by the server while idle, and not about to be."""
        return (now - self.idle_since < _IDLE_REUSE and not self.reader.at_eof()
                and not self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class Http1Pool:
    """Keep-alive connections to one server (``http://`` or ``https://`` URL)."""

    def __init__(self, server: str, headers: dict[str, str], tls: ssl.SSLContext | bool,
                 timeout: float, max_idle: int = 64) -> None:
        url = urlsplit(server)
        self.https = url.scheme == "https"
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        self.max_idle = max_idle
        self._ssl: ssl.SSLContext | None = None
        if self.https:
            if isinstance(tls, ssl.SSLContext):
                self._ssl = tls
            else:
                self._ssl = ssl.create_default_context()
                if tls is False:
                    self._ssl.check_hostname = False
                    self._ssl.verify_mode = ssl.CERT_NONE
        netloc = url.netloc.rpartition("@")[2]
        lines = [f"Host: {netloc}"] + [f"{k}: {v}" for k, v in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode()
        self._idle: deque[_Conn] = deque()

    async def _open(self) -> _Conn:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self._ssl,
                                        server_hostname=self.host if self._ssl else None),
                self.timeout)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {self.host}:{self.port} timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer)

    async def request(self, method: str, path: str, params: dict[str, str], body: bytes | None,
                      headers: dict[str, str]) -> tuple[int, bytes]:
        """Send one request and read its whole answer: ``(status, body)``."""
        conn = self._reuse() or await self._open()
        target = self.prefix + path + (("?" + urlencode(params)) if params else "")
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        payload = body or b""
        head = f"{method} {target} HTTP/1.1\r\n{extra}Content-Length: {len(payload)}\r\n".encode()
        try:
            conn.writer.write(head + self._head + b"\r\n" + payload)
            status, answer, keep = await asyncio.wait_for(self._answer(conn), self.timeout)
        except TimeoutError as exc:
            conn.close()
            raise httpx.ReadTimeout(f"no answer from {self.host}:{self.port} in {self.timeout}s") from exc
        except httpx.TransportError:
            conn.close()
            raise
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            conn.close()
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
        except BaseException:  # cancelled mid-request: the connection's state is unknown
            conn.close()
            raise
        conn.used = True
        if keep and len(self._idle) < self.max_idle:
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.append(conn)
        else:
            conn.close()
        return status, answer

    def _reuse(self) -> _Conn | None:
        """The most recently used idle connection that is still good (the others are closed)."""
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable(now):
                return conn
            conn.close()
        return None

    async def _answer(self, conn: _Conn) -> tuple[int, bytes, bool]:
        try:
            head = await conn.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial and conn.used:
                raise httpx.RemoteProtocolError("the server closed the connection without an answer") from exc
            raise
        if len(head) > _MAX_HEAD:
            raise httpx.RemoteProtocolError("response headers too large")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length: int | None = None
        chunked, keep = False, True
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and value.strip().lower() == "close":
                keep = False
        if chunked:
            return status, await self._chunks(conn.reader), keep
        if length is None:
            return status, await conn.reader.read(), False  # until the server closes
        return status, await conn.reader.readexactly(length), keep

    @staticmethod
    async def _chunks(reader: asyncio.StreamReader) -> bytes:
        out = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return bytes(out)
            out += await reader.readexactly(size)
            await reader.readexactly(2)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
