"""Connection hygiene: how many connections the apiserver keeps, for how long, and how large a
request head may be, so that clients holding sockets open (with no token, or sending a request
line a byte at a time) cannot starve everyone else, ``/healthz`` included.

:class:`GuardedProtocol` is uvicorn's httptools protocol (with the client-certificate identity of
:mod:`.tls`) plus:

- a cap on open connections: past it a new connection is closed at once, so the process never runs
  out of descriptors (the soft descriptor limit is raised to the hard one at start, as Go does);
- a cap on connections that have not authenticated a request yet: past it the oldest such
  connection that is not in the middle of a request is closed, so sockets opened and left silent
  cannot crowd out new clients (a verified client certificate counts as authenticated);
- a cap on each user's connections (a connection belongs to the user its first request
  authenticated as): a request on one past it is answered 429 and the connection closed after the
  answer, so one user holding thousands of watches or idle keep-alive connections leaves room for
  everyone else (health probes, administrators, the pools' heartbeats), as Kubernetes' priority and
  fairness keeps one flow from taking every seat. It is at most half the connection cap;
- a deadline for a request's head: from the connection's start (or a request's first byte) the
  headers must be complete within ``header_timeout`` seconds, else the connection is closed
  (Go's ``ReadHeaderTimeout``); idle keep-alive connections close after ``keep_alive_timeout``;
- a limit on the size of a request's head: past ``max_header_bytes`` the answer is 431 and the
  connection closes (Go's ``MaxHeaderBytes``, 1 MiB).
"""

from __future__ import annotations

import asyncio
import resource
from dataclasses import dataclass, field
from typing import Any

from ironpool.api import errors
from ironpool.apiserver.serving.tls import TlsFiles, TlsIdentityProtocol, TlsIdentityWebSocketProtocol

CONNECTION_EXTENSION = "ironpool.connection"


@dataclass(frozen=True)
class ConnectionLimits:
    """The settings (see the module doc); defaults suit one apiserver on one host."""

    max_connections: int = 8192
    max_unauthenticated: int = 1024
    header_timeout: float = 10.0
    keep_alive_timeout: int = 60
    max_header_bytes: int = 1024 * 1024
    max_per_user: int = 2048

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_unauthenticated", "header_timeout", "keep_alive_timeout",
                     "max_header_bytes", "max_per_user"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass
class ConnectionTable:
    """The connections of one server: all of them, and those not authenticated yet, oldest first."""

    limits: ConnectionLimits
    open: int = 0
    unauthenticated: dict[GuardedProtocol, None] = field(default_factory=dict)
    by_user: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    evicted: int = 0
    timed_out: int = 0
    over_user_limit: int = 0


def raise_descriptor_limit(wanted: int) -> int:
    """Raise the soft limit on open files towards ``wanted`` (at most the hard limit); the limit
    now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def effective_limits(limits: ConnectionLimits) -> ConnectionLimits:
    """``limits`` with the connection cap lowered to fit the descriptors this process may open
    (a margin is left for the store, watches of the store, logs and the listening sockets)."""
    available = raise_descriptor_limit(limits.max_connections + 256)
    cap = max(64, min(limits.max_connections, available - 256))
    unauthenticated = min(limits.max_unauthenticated, cap)
    per_user = max(1, min(limits.max_per_user, cap // 2))
    return ConnectionLimits(cap, unauthenticated, limits.header_timeout, limits.keep_alive_timeout,
                            limits.max_header_bytes, per_user)


class ConnectionTicket:
    """What a request's handler holds of its connection: it tells the connection that a request on
    it authenticated, and as whom."""

    __slots__ = ("_protocol",)

    def __init__(self, protocol: GuardedProtocol) -> None:
        self._protocol = protocol

    def authenticated(self, user: str) -> None:
        self._protocol.mark_authenticated(user)


def mark_authenticated(scope: Any, user: str) -> None:
    """Record that the request of ``scope`` authenticated as ``user``: its connection no longer
    counts against the unauthenticated cap, and counts as one of ``user``'s. Raises TooManyRequests
    (and the connection closes after the answer) when ``user`` holds more than its share."""
    ticket = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    if ticket is not None:
        ticket.authenticated(user)


class GuardedProtocol(TlsIdentityProtocol):
    """The apiserver's HTTP protocol (see the module doc). ``table`` is set on a subclass made per
    server by :func:`guarded_protocol`."""

    table: ConnectionTable
    _counted = False
    _user: str | None = None  # whom the connection is counted for
    _head_bytes = 0
    _head_done = True
    _request_done = True  # the request's body was received whole (its parser said message complete)
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._ticket = ConnectionTicket(self)
        table = self.table
        if table.open >= table.limits.max_connections:
            table.refused += 1
            transport.abort()
            return
        table.open += 1
        self._counted = True
        if self._tls is None:
            table.unauthenticated[self] = None
            if len(table.unauthenticated) > table.limits.max_unauthenticated:
                self._evict_one()
        self._start_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        self._stop_head_timer()
        super().connection_lost(exc)

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            self.table.open -= 1
            self.table.unauthenticated.pop(self, None)
            if self._user is not None:
                left = self.table.by_user[self._user] - 1
                if left:
                    self.table.by_user[self._user] = left
                else:
                    del self.table.by_user[self._user]

    def handle_websocket_upgrade(self) -> None:
        # The transport goes to the websocket protocol, and this one never hears of its end: that
        # protocol tells. Not an idle unauthenticated connection any more either (its request
        # authenticates in the app, or is refused), so never the one evicted for being one.
        self.table.unauthenticated.pop(self, None)
        super().handle_websocket_upgrade()
        upgraded = self.transport.get_protocol()
        if isinstance(upgraded, TlsIdentityWebSocketProtocol):
            upgraded.on_lost = self._uncount
        else:  # another websocket protocol: no count is better than one never released
            self._uncount()

    def mark_authenticated(self, user: str) -> None:
        table = self.table
        if self._user is None:
            if not self._counted:
                return  # closed already (or never counted): nothing to account
            table.unauthenticated.pop(self, None)
            self._user = user
            table.by_user[user] = table.by_user.get(user, 0) + 1
        limit = table.limits.max_per_user
        if table.by_user[self._user] > limit:
            table.over_user_limit += 1
            if self.cycle is not None:
                self.cycle.keep_alive = False  # answer this request, then close
            raise errors.TooManyRequests(
                f"too many connections open for user {self._user!r} (limit {limit}); reuse connections "
                "or close some, and try again later", retry_after_seconds=1)

    def _evict_one(self) -> None:
        """Close the oldest unauthenticated connection that is not handling a request."""
        for proto in self.table.unauthenticated:
            if proto is not self and (proto.cycle is None or proto.cycle.response_complete):
                self.table.evicted += 1
                del self.table.unauthenticated[proto]
                proto.transport.abort()
                return
        # Every other one is busy with a request: refuse this one instead.
        self.table.refused += 1
        self.table.unauthenticated.pop(self, None)
        self.transport.abort()

    # -- the request head ----------------------------------------------------------------------

    def _start_head(self) -> None:
        self._head_done = False
        self._head_bytes = 0
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.table.limits.header_timeout, self._head_timeout)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if not self._head_done and not self.transport.is_closing():
            self.table.timed_out += 1
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._head_done and self._request_done and (self.cycle is None or self.cycle.response_complete):
            # The first bytes of the next request on a kept-alive connection. Not before the last
            # request's body ended: an early answer (413) leaves the rest of it still arriving.
            self._start_head()
        if not self._head_done:
            self._head_bytes += len(data)
            if self._head_bytes > self.table.limits.max_header_bytes:
                self._refuse_large_head()
                return
        super().data_received(data)

    def _refuse_large_head(self) -> None:
        self._stop_head_timer()
        self._head_done = True
        message = f"request header fields larger than {self.table.limits.max_header_bytes} bytes"
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: " + str(len(message)).encode() + b"\r\nconnection: close\r\n\r\n"
            + message.encode()
        )
        self.transport.close()

    def on_message_begin(self) -> None:
        self._request_done = False
        super().on_message_begin()
        scope: dict[str, Any] = self.scope  # type: ignore[assignment]
        scope.setdefault("extensions", {})[CONNECTION_EXTENSION] = self._ticket

    def on_headers_complete(self) -> None:
        self._head_done = True
        self._stop_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._request_done = True
        super().on_message_complete()


def guarded_protocol(limits: ConnectionLimits) -> tuple[type[GuardedProtocol], ConnectionTable]:
    """A protocol class for one server with its own connection table."""
    table = ConnectionTable(limits)
    cls = type("ApiServerProtocol", (GuardedProtocol,), {"table": table})
    return cls, table


def uvicorn_options(tls: TlsFiles | None, limits: ConnectionLimits) -> tuple[dict[str, Any], ConnectionTable]:
    """``uvicorn.Config`` keyword arguments for the apiserver's protocol, timeouts and TLS files, and
    the table of its connections."""
    protocol, table = guarded_protocol(effective_limits(limits))
    options: dict[str, Any] = {"http": protocol, "ws": TlsIdentityWebSocketProtocol,
                               "timeout_keep_alive": limits.keep_alive_timeout}
    if tls is not None:
        options.update(tls.uvicorn_options())
    return options, table
