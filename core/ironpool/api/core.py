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
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    data: dict[str, str] | None = None
    """Secret data by key, each value base64-encoded."""
    string_data: dict[str, str] | None = None
    """Write-only convenience: plain-text values merged into data on write (never returned)."""
    type: str = SECRET_TYPE_OPAQUE
    """Type of the Secret, for how its data is used (Opaque, kubernetes.io/dockerconfigjson, ...)."""
    immutable: bool | None = None
    """When true, data cannot be changed after creation (the Secret can only be deleted)."""


class NamespaceSpec(ApiModel):
    """Finalizers that must clear before the namespace goes away."""

    finalizers: list[str] | None = None
    """What must finish before the namespace is removed (``kubernetes``: its content is deleted first)."""


class NamespaceStatus(ApiModel):
    """The namespace lifecycle phase."""

    phase: Literal["Active", "Terminating"] | None = None
    """Active, or Terminating while its content is being deleted."""
    conditions: list[Condition] | None = None
    """Conditions of the namespace's deletion."""


class Namespace(ApiModel):
    """A namespace for Machines, Volumes, Secrets and Events."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: NamespaceSpec | None = None
    """Desired state of the namespace."""
    status: NamespaceStatus | None = None
    """Observed state of the namespace. Read-only."""


class EventSource(ApiModel):
    """The component (and host) that reported an event."""

    component: str | None = None
    """Component that reported the event."""
    host: str | None = None
    """Host the component runs on."""


class Event(ApiModel):
    """A ``core/v1``-style event about another object."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    involved_object: ObjectReference = Field(default_factory=ObjectReference)
    """The object the event is about."""
    reason: str | None = None
    """Short, machine-readable reason for the event (CamelCase)."""
    message: str | None = None
    """Human-readable description of what happened."""
    type: Literal["Normal", "Warning"] | None = None
    """Normal or Warning."""
    count: int | None = None
    """How many times this event has occurred."""
    first_timestamp: Timestamp | None = None
    """When the event was first recorded."""
    last_timestamp: Timestamp | None = None
    """When the event was last recorded."""
    event_time: Timestamp | None = None
    """When the event was first observed, with microseconds (the events.k8s.io form)."""
    source: EventSource | None = None
    """The component and host that reported the event."""
    reporting_component: str | None = None
    """Name of the controller that reported the event."""
    reporting_instance: str | None = None
    """Instance of that controller (for example the pool it serves)."""
    action: str | None = None
    """What action was taken or failed, machine-readable."""
