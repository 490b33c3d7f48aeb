"""Open gRPC channels to an IRI endpoint: ``unix://``, ``tcp://`` or ``ssh://``.

``connect()`` returns a blocking ``grpc.Channel``, ``connect_aio()`` a ``grpc.aio.Channel``. For
``ssh://`` the returned channel owns an :class:`~ironpool.iri.ssh.SSHTunnel`; closing the
channel closes the tunnel too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import grpc.aio

from ironpool.iri.endpoint import Endpoint, parse_endpoint
from ironpool.iri.ssh import SSHOptions, SSHTunnel

ChannelOptions = Sequence[tuple[str, Any]]

# Messages carry ignition data and domain details; gRPC's default 4 MiB is tight for that.
# IRI endpoints are local or tunnelled: never route them through an HTTP proxy from the env.
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.enable_http_proxy", 0),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
)


def _target(endpoint: Endpoint, ssh_options: SSHOptions | None) -> tuple[str, SSHTunnel | None]:
    if endpoint.scheme == "ssh":
        tunnel = SSHTunnel(endpoint, ssh_options).start()
        return tunnel.grpc_target, tunnel
    return endpoint.grpc_target, None


def _as_endpoint(endpoint: str | Endpoint) -> Endpoint:
    return endpoint if isinstance(endpoint, Endpoint) else parse_endpoint(endpoint)


def connect(
    endpoint: str | Endpoint,
    *,
    ssh_options: SSHOptions | None = None,
    options: ChannelOptions = (),
) -> grpc.Channel:
    """An insecure (as IronCore's) blocking channel to ``endpoint``.

    Raises :class:`~ironpool.iri.endpoint.EndpointError` for a malformed endpoint and
    :class:`~ironpool.iri.ssh.SSHTunnelError` when the SSH session cannot be set up.
    """
    ep = _as_endpoint(endpoint)
    target, tunnel = _target(ep, ssh_options)
    channel = grpc.insecure_channel(target, options=[*DEFAULT_CHANNEL_OPTIONS, *options])
    return channel if tunnel is None else TunnelChannel(channel, tunnel)


def connect_aio(
    endpoint: str | Endpoint,
    *,
    ssh_options: SSHOptions | None = None,
    options: ChannelOptions = (),
) -> grpc.aio.Channel:
    """Like :func:`connect`, for ``grpc.aio``. The SSH handshake blocks; call it off the loop
    (``asyncio.to_thread``) if that matters."""
    ep = _as_endpoint(endpoint)
    target, tunnel = _target(ep, ssh_options)
    channel = grpc.aio.insecure_channel(target, options=[*DEFAULT_CHANNEL_OPTIONS, *options])
    return channel if tunnel is None else AioTunnelChannel(channel, tunnel)


_DEFAULT_PORTS = {"ws": 80, "http": 80, "wss": 443, "https": 443}


def reachable_url(channel: object, url: str) -> str:
    """``url`` as this client can reach it.

    A runtime's ``Exec`` URL names an address of the runtime's host (often its loopback). Over
    ``ssh://`` that address means nothing here, so a TCP forward through the same SSH session is
    opened and the URL is rewritten to it. For other channels ``url`` is returned unchanged.
    """
    tunnel = getattr(channel, "tunnel", None)
    if not isinstance(tunnel, SSHTunnel):
        return url
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"url {url!r}: no host")
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    if port is None:
        raise ValueError(f"url {url!r}: no port and unknown scheme {parts.scheme!r}")
    local_host, local_port = tunnel.forward_tcp(parts.hostname, port)
    return urlunsplit(parts._replace(netloc=f"{local_host}:{local_port}"))


class TunnelChannel(grpc.Channel):
    """A ``grpc.Channel`` that closes its SSH tunnel when closed."""

    def __init__(self, channel: grpc.Channel, tunnel: SSHTunnel) -> None:
        self._channel = channel
        self.tunnel = tunnel

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._channel.unsubscribe(callback)

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.unary_unary(method, *args, **kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.unary_stream(method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_stream(method, *args, **kwargs)

    def close(self) -> None:
        try:
            self._channel.close()
        finally:
            self.tunnel.close()

    def __enter__(self) -> TunnelChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AioTunnelChannel(grpc.aio.Channel):
    """A ``grpc.aio.Channel`` that closes its SSH tunnel when closed."""

    def __init__(self, channel: grpc.aio.Channel, tunnel: SSHTunnel) -> None:
        self._channel = channel
        self.tunnel = tunnel

    async def __aenter__(self) -> AioTunnelChannel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, grace: float | None = None) -> None:
        try:
            await self._channel.close(grace)
        finally:
            self.tunnel.close()

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._channel.channel_ready()

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.unary_unary(method, *args, **kwargs)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.unary_stream(method, *args, **kwargs)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_unary(method, *args, **kwargs)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._channel.stream_stream(method, *args, **kwargs)
