"""The sync :class:`~ironpool.client.Client`'s HTTP transport: keep-alive HTTP/1.1 connections from
the standard library's :mod:`http.client`, a few per server, for unary requests and watch streams.

The sync client serves short-lived front ends (an Ansible task, a CLI command, a Pulumi step), which
pay the transport's import at every start: http.client costs ~20 ms to import, httpx 35-115 ms
(it loads its command-line tool's rich and click when they are installed) and urllib3 ~80 ms. The
client needs nothing beyond keep-alive, TLS and reading a stream line by line, which http.client
does; what it adds here is the pool (thread-safe: the Pulumi provider shares one client between its
worker threads) and failures raised as :mod:`.transport_errors`, which :mod:`.failover` reads.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlencode, urlsplit

from ironpool.client.transport_errors import (
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    TransportError,
)

# uvicorn closes a keep-alive connection after 5 s without a request; reusing one that old races it.
_IDLE_REUSE = 4.0
_MAX_IDLE = 32
_STREAM_CONNECT = 10.0
# Not an answer: the connection broke. A watch stream ending this way was cut, not refused.
_BROKEN = (OSError, http.client.HTTPException)


class Stream:
    """The answer of :meth:`ServerConnections.stream`."""

    def __init__(self, server: str, response: http.client.HTTPResponse) -> None:
        self.server = server
        self.response = response
        self.status = response.status

    def read(self) -> bytes:
        """The whole body (an error's Status)."""
        try:
            return self.response.read()
        except _BROKEN as exc:
            raise _failure(self.server, exc) from exc

    def lines(self) -> Iterator[bytes]:
        """The body's lines as they arrive; a stream cut mid-way just ends (the caller resumes), one
        that stalls past the read timeout fails with ReadTimeout."""
        try:
            while line := self.response.readline():
                yield line
        except TimeoutError as exc:
            raise ReadTimeout(f"no event from {self.server} in time") from exc
        except _BROKEN:
            return


class ServerConnections:
    """Keep-alive connections to one server (an ``http://`` or ``https://`` URL, maybe with a path).

    ``tls`` is how to check the server's certificate: a context (a CA of our own), True (the
    system's CAs) or False (no check); it matters only for ``https://``.
    """

    def __init__(self, server: str, headers: dict[str, str], tls: ssl.SSLContext | bool,
                 timeout: float) -> None:
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"apiserver URL {server!r} must be http:// or https:// and name a host")
        self.server = server.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._tls = tls
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._closed = False

    def request(self, method: str, path: str, params: dict[str, str], body: bytes | None,
                headers: dict[str, str]) -> tuple[int, bytes]:
        """Send one request and read its whole answer: ``(status, body)``."""
        conn = self._take() or self._connect(self.timeout)
        try:
            conn.request(method, self._target(path, params), body=body, headers={**self.headers, **headers})
            resp = conn.getresponse()
            content = resp.read()
        except _BROKEN as exc:
            conn.close()
            raise _failure(self.server, exc) from exc
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return resp.status, content

    @contextlib.contextmanager
    def stream(self, method: str, path: str, params: dict[str, str], read_timeout: float | None,
               headers: dict[str, str] | None = None) -> Iterator[Stream]:
        """A streamed answer (a watch) on a connection of its own, closed afterwards; a read that
        waits longer than ``read_timeout`` (None: forever) fails with ReadTimeout."""
        conn = self._connect(min(self.timeout, _STREAM_CONNECT))
        try:
            assert conn.sock is not None  # connected above
            conn.sock.settimeout(read_timeout)
            try:
                conn.request(method, self._target(path, params), headers={**self.headers, **(headers or {})})
                resp = conn.getresponse()
            except _BROKEN as exc:
                raise _failure(self.server, exc) from exc
            yield Stream(self.server, resp)
        finally:
            conn.close()

    def close(self) -> None:
        """Close the idle connections; one in use is closed when its request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _target(self, path: str, params: dict[str, str]) -> str:
        return self._prefix + path + ("?" + urlencode(params) if params else "")

    def _take(self) -> http.client.HTTPConnection | None:
        """An idle connection still fit for a request, or None."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn, since = self._idle.pop()
            if now - since < _IDLE_REUSE and not _closed_by_server(conn):
                return conn
            conn.close()

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl_context())
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        try:
            conn.connect()
        except TimeoutError as exc:
            conn.close()
            raise ConnectTimeout(f"connecting to {self.server} timed out") from exc
        except _BROKEN as exc:
            conn.close()
            raise ConnectError(str(exc) or type(exc).__name__) from exc
        assert conn.sock is not None
        # Small requests and answers: send each at once rather than wait for the last one's ACK.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _ssl_context(self) -> ssl.SSLContext:
        if self._context is None:
            if isinstance(self._tls, ssl.SSLContext):
                self._context = self._tls
            elif self._tls:
                self._context = ssl.create_default_context()
            else:
                # No CA bundle to load: nothing is checked.
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                self._context = context
        return self._context


def _closed_by_server(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection has something to read: the server's close (or stray bytes), which
    makes it unfit for another request."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _failure(server: str, exc: BaseException) -> TransportError:
    """The exception :mod:`.failover` reads for a connection that broke during a request."""
    if isinstance(exc, TimeoutError):
        return ReadTimeout(f"no answer from {server} in time")
    if isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
        return RemoteProtocolError(str(exc) or "the server closed the connection")
    return ReadError(str(exc) or type(exc).__name__)
