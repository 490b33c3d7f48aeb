"""How a request failed on the way, as both clients' transports report it and :mod:`.failover` reads it.

The classes say what the caller may assume: with :class:`ConnectError` (and its
:class:`ConnectTimeout`) nothing was sent, so any request may go to another server; with
:class:`RemoteProtocolError` the server closed the connection without an answer (as a reused
keep-alive connection it had closed does); with :class:`ReadError` (and :class:`ReadTimeout`) the
answer was lost, so a write may have been applied.
"""

from __future__ import annotations


class TransportError(Exception):
    """A request got no HTTP answer."""


class ConnectError(TransportError):
    """No connection could be made (refused, unresolvable, TLS handshake failed): nothing was sent."""


class ConnectTimeout(ConnectError):
    """Connecting took longer than the timeout: nothing was sent."""


class RemoteProtocolError(TransportError):
    """The server closed the connection before answering."""


class ReadError(TransportError):
    """The connection failed after the request was sent: the answer was lost."""


class ReadTimeout(ReadError):
    """No answer came within the timeout."""
