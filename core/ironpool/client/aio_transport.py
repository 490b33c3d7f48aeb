"""The asyncio client's HTTP transport: aiohttp's keep-alive connection pool, for unary requests and watches.

A controller or the scheduler sends thousands of small requests a second, so what a request costs
the client matters. Measured on the scheduler benchmark (``bench/scheduler.py --mode api``, 5,000
pools, 2,000 Machines, SQLite, watches still on httpx then; the scheduler's CPU ms per placement,
four runs each, httpx one, on 2 shared cores) and on a micro benchmark (client CPU per GET):

==========================================  ============================  =====================
transport                                   scheduler CPU ms / placement  client CPU µs per GET
==========================================  ============================  =====================
httpx ``AsyncClient``                       2.41                          1,495 - 1,810
httpcore ``AsyncConnectionPool`` directly   1.65 - 2.17 (mean 1.88)       1,194 - 1,288
aiohttp ``ClientSession`` (this module)     1.10 - 1.33 (mean 1.19)       94 - 110
a hand-written HTTP/1.1 pool (removed)      0.95 - 0.99 (mean 0.96)       70 - 82
==========================================  ============================  =====================

(The last column: 3,000 GETs of one small object, 16 in flight, against a local apiserver;
three rounds.)
The hand-written pool was about 20 % cheaper per placement than aiohttp: not enough to keep a
protocol implementation of our own, so the well-kept library carries the requests, and the watch
streams too (:meth:`ServerPool.stream`; one library for both, and a little cheaper per event than
httpx's ``aiter_lines``: 14 against 16-17 µs of client CPU per event, its decoding included).

Failures are raised as the exceptions (:mod:`.transport_errors`) the failover logic (:mod:`.failover`) reads:
``ConnectError``/``ConnectTimeout`` (nothing was sent), ``RemoteProtocolError`` (the server closed
the connection without an answer, as a reused keep-alive connection it had closed does),
``ReadError``/``ReadTimeout`` (the answer was lost: a write may have been applied).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import aiohttp

from ironpool.client import transport_errors as te

# uvicorn closes a keep-alive connection after 5 s without a request; reusing one that old races it.
_IDLE_REUSE = 4.0
_STREAM_CONNECT = 10.0
# One watch event: an object is at most 1.5 MiB as JSON (the apiserver's limit); a line far longer
# is a broken server, not an event.
_MAX_LINE = 64 * 1024 * 1024
# A stream that ends this way was cut (a server restart or timeout close), not refused.
_STREAM_CUT = (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


class Stream:
    """The answer of :meth:`ServerPool.stream`."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.status = response.status

    async def read(self) -> bytes:
        """The whole body (an error's Status)."""
        return await self.response.read()

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines as they arrive; a stream cut mid-way just ends (the caller resumes)."""
        content = self.response.content
        try:
            while line := await content.readline(max_line_length=_MAX_LINE):
                yield line
        except _STREAM_CUT:
            return


class ServerPool:
    """Keep-alive HTTP/1.1 connections to one server (``http://`` or ``https://`` URL).

    The aiohttp session is made on the first request, inside the event loop that uses it.
    """

    def __init__(self, server: str, headers: dict[str, str], tls: ssl.SSLContext | bool,
                 timeout: float) -> None:
        self.server = server.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        # True: the system's CAs (aiohttp's default context); False: no verification.
        self._ssl: ssl.SSLContext | bool = tls
        self._session: aiohttp.ClientSession | None = None
        self._streams: set[aiohttp.ClientResponse] = set()  # open watches, cut by aclose

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=_IDLE_REUSE, ssl=self._ssl)
        session = aiohttp.ClientSession(
            headers=self.headers, connector=connector, skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),  # an apiserver sets none: no jar to consult per request
            timeout=aiohttp.ClientTimeout(total=self.timeout, connect=self.timeout))
        # aiohttp sends a PUT or DELETE whose connection broke once more on its own; whether a
        # request goes again is :mod:`.failover`'s decision (a write whose answer was lost may have
        # been applied). aiohttp has no public switch; its own test client sets this one.
        session._retry_connection = False
        return session

    def _current(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            session = self._session = self._open()
        return session

    async def request(self, method: str, path: str, params: dict[str, str], body: bytes | None,
                      headers: dict[str, str]) -> tuple[int, bytes]:
        """Send one request and read its whole answer: ``(status, body)``."""
        try:
            async with self._current().request(method, self.server + path, params=params or None,
                                               data=body, headers=headers) as resp:
                return resp.status, await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failure(exc) from exc

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, params: dict[str, str],
                     read_timeout: float | None) -> AsyncIterator[Stream]:
        """A streamed answer (a watch): its status, its body or its lines as they come; a read that
        waits longer than ``read_timeout`` fails with ReadTimeout."""
        timeout = aiohttp.ClientTimeout(total=None, connect=min(self.timeout, _STREAM_CONNECT),
                                        sock_read=read_timeout)
        try:
            async with self._current().request(method, self.server + path, params=params or None,
                                               timeout=timeout) as resp:
                self._streams.add(resp)
                try:
                    yield Stream(resp)
                finally:
                    self._streams.discard(resp)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: BaseException) -> te.TransportError:
        """The exception :mod:`.failover` reads for an aiohttp failure."""
        if isinstance(exc, aiohttp.ClientConnectorError):
            return te.ConnectError(str(exc) or type(exc).__name__)
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return te.ConnectTimeout(f"connecting to {self.server} timed out")
        if isinstance(exc, TimeoutError):  # aiohttp's ServerTimeoutError is one too
            return te.ReadTimeout(f"no answer from {self.server} in time")
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return te.RemoteProtocolError(str(exc) or "the server closed the connection")
        return te.ReadError(str(exc) or type(exc).__name__)

    async def aclose(self) -> None:
        """Close every connection (a later request opens new ones); an open watch ends at once, as if
        the server had cut it (closing its session alone leaves a TLS stream waiting for the peer)."""
        for resp in list(self._streams):
            conn = resp.connection
            if conn is not None and conn.transport is not None:
                conn.transport.abort()
            resp.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
