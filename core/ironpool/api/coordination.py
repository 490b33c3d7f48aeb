"""``coordination.k8s.io/v1`` Lease: who holds a lock and until when (leader election, heartbeats).

The same shape as Kubernetes' Lease, so client-go style leader election reads it as it would there:
the holder renews ``renewTime`` well within ``leaseDurationSeconds``; a candidate that sees the
lease unrenewed for that long takes it over with a compare-and-swap on the resourceVersion and
bumps ``leaseTransitions``. Times are ``MicroTime`` (RFC 3339 with microseconds).
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import Field

from ironpool.api.meta import ApiModel, ObjectMeta

COORDINATION_GROUP = "coordination.k8s.io"
COORDINATION_VERSION = "v1"
_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def now_micro() -> str:
    """The current time as Kubernetes writes a ``MicroTime`` (``2026-05-01T13:18:48.123456Z``)."""
    return datetime.now(UTC).strftime(_MICRO)


def parse_micro(value: str) -> datetime:
    """A ``MicroTime`` (or a plain RFC 3339 time with seconds) as an aware datetime; ValueError if not."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


class LeaseSpec(ApiModel):
    """The lock: its holder, for how long a renewal holds, and when it was taken and renewed."""

    holder_identity: str | None = None
    """Who holds the lease."""
    lease_duration_seconds: int | None = None
    """How long the lease lasts after each renewal."""
    acquire_time: str | None = None
    """When the holder acquired the lease."""
    renew_time: str | None = None
    """When the holder last renewed the lease."""
    lease_transitions: int | None = None
    """How many times the lease has changed holders."""
    preferred_holder: str | None = None
    """Who should hold the lease next."""
    strategy: str | None = None
    """How the next holder is chosen."""


class Lease(ApiModel):
    """A Lease (namespaced)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: LeaseSpec | None = None
    """The lease: who holds it and until when."""
