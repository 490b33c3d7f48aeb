"""Serving HTTPS: the uvicorn settings for a certificate, key and client CA, and the client
certificate's identity handed to the app.

uvicorn does not put the peer certificate into the ASGI scope, so :class:`TlsIdentityProtocol` (its
httptools protocol plus one step) reads it once per connection, after the handshake verified it
against the client CA, and sets ``scope["extensions"]["tls"]["client_subject"]`` to ``(CN, (O,
...))``. A certificate from another CA never gets that far: the handshake fails. A connection that
upgrades to a websocket (a console, ``machines/exec``) leaves that protocol for uvicorn's websocket
one: :class:`TlsIdentityWebSocketProtocol` does the same there.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ironpool.apiserver.serving.certs import subject_identity


@dataclass(frozen=True)
class TlsFiles:
    """The serving certificate and key, and optionally the CA whose client certificates are accepted."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None

    def uvicorn_options(self) -> dict[str, Any]:
        """Keyword arguments for ``uvicorn.Config``."""
        options: dict[str, Any] = {"ssl_certfile": self.cert_file, "ssl_keyfile": self.key_file}
        if self.client_ca_file:
            # Optional: clients without a certificate authenticate with a bearer token instead.
            options.update(ssl_ca_certs=self.client_ca_file, ssl_cert_reqs=ssl.CERT_OPTIONAL)
        return options


def without_session_tickets(context: ssl.SSLContext) -> None:
    """Send no TLS 1.3 session tickets on ``context``'s connections.

    OpenSSL sends them right after the handshake, unasked. A client with a reader thread (the sync
    websockets client of ``ironpool console``) then reads them in that thread while its other thread
    writes the request: one SSL object used by two threads at once, which now and then loses the
    request, and the server sees a connection that never speaks (a few consoles in a thousand,
    opened over TLS in bursts). Resumption buys little here, as clients keep their connections open.
    """
    context.num_tickets = 0


class TlsIdentityProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol that tells the app who the verified client certificate names."""

    _tls: dict[str, Any] | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peercert")
        self._tls = {"client_subject": subject_identity(peer.get("subject", ()))} if peer else None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls is not None:
            scope: dict[str, Any] = self.scope  # type: ignore[assignment]
            scope["extensions"] = {"tls": self._tls}


class TlsIdentityWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websocket protocol that tells the app who the verified client certificate names,
    and whoever counted the connection before its upgrade (:attr:`on_lost`) that it ended."""

    _tls: dict[str, Any] | None = None
    on_lost: Callable[[], None] | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.on_lost is not None:
            self.on_lost()
            self.on_lost = None
        super().connection_lost(exc)

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peercert")
        self._tls = {"client_subject": subject_identity(peer.get("subject", ()))} if peer else None

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope: Any = getattr(self, "scope", None)  # unset when the handshake was refused
        if self._tls is not None and scope is not None:
            scope["extensions"]["tls"] = self._tls  # before the app's task first runs


def client_subject(scope: Any) -> tuple[str, tuple[str, ...]] | None:
    """The verified client certificate's ``(CN, (O, ...))`` of a request scope, if it had one."""
    tls = (scope.get("extensions") or {}).get("tls")
    return tls.get("client_subject") if tls else None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
