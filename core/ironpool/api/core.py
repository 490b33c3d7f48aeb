"""Core ``v1`` kinds ironpool serves: Secret, Namespace and Event."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ironpool.api.meta import ApiModel, Condition, ObjectMeta, ObjectReference, Timestamp

CORE_GROUP = ""
CORE_VERSION = "v1"
SECRET_TYPE_OPAQUE = "Opaque"
SECRET_TYPE_VOLUME_ENCRYPTION = "storage.ironcore.dev/volume-encryption"


class Secret(ApiModel):
    """Opaque data (e.g. Ignition); ``data`` values are base64, ``stringData`` is write-only."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    data: dict[str, str] | None = None
    string_data: dict[str, str] | None = None
    type: str = SECRET_TYPE_OPAQUE
    immutable: bool | None = None


class NamespaceSpec(ApiModel):
    """Finalizers that must clear before the namespace goes away."""

    finalizers: list[str] | None = None


class NamespaceStatus(ApiModel):
    """The namespace lifecycle phase."""

    phase: Literal["Active", "Terminating"] | None = None
    conditions: list[Condition] | None = None


class Namespace(ApiModel):
    """A namespace for Machines, Volumes, Secrets and Events."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NamespaceSpec | None = None
    status: NamespaceStatus | None = None


class EventSource(ApiModel):
    """The component (and host) that reported an event."""

    component: str | None = None
    host: str | None = None


class Event(ApiModel):
    """A ``core/v1``-style event about another object."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    involved_object: ObjectReference = Field(default_factory=ObjectReference)
    reason: str | None = None
    message: str | None = None
    type: Literal["Normal", "Warning"] | None = None
    count: int | None = None
    first_timestamp: Timestamp | None = None
    last_timestamp: Timestamp | None = None
    event_time: Timestamp | None = None
    source: EventSource | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None
    action: str | None = None
