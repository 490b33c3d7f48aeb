"""What an apiserver is told at start about guarding itself: connection hygiene, in-flight and watch
limits per user, who may read ``/metrics``, and how requests are authorized."""

from __future__ import annotations

from dataclasses import dataclass, field

from ironpool.apiserver.serving.connections import ConnectionLimits
from ironpool.apiserver.serving.inflight import DEFAULT_PER_USER
from ironpool.apiserver.serving.watch_slots import DEFAULT_WATCHES_PER_USER

AUTHORIZATION_MODES = ("RBAC", "AlwaysAllow")


@dataclass(frozen=True)
class ServerOptions:
    """The apiserver's settings beyond store, tokens and TLS.

    ``authorization_mode``: ``RBAC`` (the default) authorizes pool identities by the pool graph and
    everyone else by Roles and bindings; ``AlwaysAllow`` lets every authenticated user do everything
    but still narrows pool identities (what ironpool did before RBAC). ``public_metrics`` serves
    ``/metrics`` without authentication (for a scraper without a token). ``memory_limit``: see
    :mod:`.serving.inflight` (None: 80 % of the cgroup's memory limit, if there is one).
    ``machinepoollet_token``: the bearer token the apiserver presents to the machinepoollets' endpoints
    when it relays a console (``machines/exec``; None: consoles are refused with a 503 saying so).
    ``stream_ping_interval``: seconds between the websocket pings that keep a console alive while it
    is idle, on both legs (client and poollet); a peer that misses a pong for as long is dropped.
    ``cluster_ca_pem``: the CA published, unauthenticated, as ``kube-public/cluster-info`` for joining
    hosts to discover and pin by hash (:mod:`.endpoints.cluster_info`; None: not published).
    """

    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    inflight_per_user: int = DEFAULT_PER_USER
    watches_per_user: int = DEFAULT_WATCHES_PER_USER
    public_metrics: bool = False
    memory_limit: int | None = None  # bytes of resident memory past which API requests get 429
    authorization_mode: str = "RBAC"
    machinepoollet_token: str | None = None
    stream_ping_interval: float = 20.0
    cluster_ca_pem: bytes | None = None

    def __post_init__(self) -> None:
        if self.authorization_mode not in AUTHORIZATION_MODES:
            raise ValueError(f"authorization mode must be one of {', '.join(AUTHORIZATION_MODES)}, "
                             f"got {self.authorization_mode!r}")
        if self.inflight_per_user <= 0:
            raise ValueError(f"the in-flight limit per user must be positive, got {self.inflight_per_user}")
        if self.stream_ping_interval <= 0:
            raise ValueError(f"the stream ping interval must be positive, got {self.stream_ping_interval}")
        if self.watches_per_user <= 0:
            raise ValueError(f"the watch limit per user must be positive, got {self.watches_per_user}")
