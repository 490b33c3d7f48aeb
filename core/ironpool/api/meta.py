"""Shared building blocks of every API object: ObjectMeta, references, conditions, taints, and the
small helpers every layer needs on objects (their key, the current time as Kubernetes writes it).

Field names are snake_case in Python and camelCase on the wire (the JSON names IronCore and
Kubernetes use); unknown fields are rejected so typos in manifests surface as errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel


def _timestamp(v: Any) -> Any:
    # YAML loaders turn an unquoted RFC 3339 time into a datetime; store the string form.
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return v


Timestamp = Annotated[str, BeforeValidator(_timestamp)]
"""An RFC 3339 time as Kubernetes writes it (``2026-05-01T13:18:48Z``)."""


def now_rfc3339() -> str:
    """The current time as Kubernetes writes timestamps (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_key(obj: Mapping[str, Any] | BaseModel) -> str:
    """``namespace/name`` of a namespaced object, ``name`` of a cluster-scoped one (client-go's
    ``MetaNamespaceKeyFunc``), for objects as JSON dicts or as typed models."""
    if isinstance(obj, BaseModel):
        md: Any = getattr(obj, "metadata", None)
        ns, name = getattr(md, "namespace", None), getattr(md, "name", None)
    else:
        m = obj.get("metadata") or {}
        ns, name = m.get("namespace"), m.get("name")
    return f"{ns}/{name or ''}" if ns else str(name or "")


class ApiModel(BaseModel):
    """Base of all API models: camelCase aliases, unknown fields forbidden."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        revalidate_instances="never",
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (aliases, canonical quantities, unset optional fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OwnerReference(ApiModel):
    """An owner of an object (garbage collection); mirrors Kubernetes' ``OwnerReference``."""

    api_version: str
    """API version of the owner."""
    kind: str
    """Kind of the owner."""
    name: str
    """Name of the owner."""
    uid: str
    """UID of the owner: a new object of the same name is another owner."""
    controller: bool | None = None
    """Whether the owner is the managing controller (at most one owner is)."""
    block_owner_deletion: bool | None = None
    """Whether the owner's deletion in the foreground waits for this object to be gone."""


class ObjectMeta(ApiModel):
    """Kubernetes ``ObjectMeta``; the server-managed fields are set by the apiserver."""

    name: str | None = None
    """Name of the object, unique in its namespace (or cluster-wide for a cluster-scoped kind). Cannot be
    changed."""
    generate_name: str | None = None
    """Prefix the server completes into a unique name when ``name`` is empty."""
    namespace: str | None = None
    """Namespace of the object; empty for cluster-scoped kinds. Cannot be changed."""
    uid: str | None = None
    """Unique id of this object, set by the server at creation. Read-only."""
    resource_version: str | None = None
    """Version of the object in the store, for optimistic concurrency and watches. Opaque to clients; read-
    only."""
    generation: int | None = None
    """Sequence number of the desired state, bumped by the server when the spec changes. Read-only."""
    creation_timestamp: Timestamp | None = None
    """When the object was created (RFC 3339, UTC). Read-only."""
    deletion_timestamp: Timestamp | None = None
    """When deletion was requested; the object goes once its finalizers are removed. Read-only."""
    deletion_grace_period_seconds: int | None = None
    """Seconds the object is allowed to shut down gracefully before it is removed. Read-only."""
    labels: dict[str, str] | None = None
    """Key/value pairs for selecting and grouping objects (label selectors)."""
    annotations: dict[str, str] | None = None
    """Key/value pairs for tools and users; not used for selection."""
    finalizers: list[str] | None = None
    """Names of what must finish before the object is removed; each is removed by its controller."""
    owner_references: list[OwnerReference] | None = None
    """Objects this object depends on; when all of them are gone it is garbage-collected."""
    # Present in objects exported with kubectl; accepted so such manifests apply unchanged.
    managed_fields: list[dict[str, Any]] | None = None
    """Which field manager owns which fields (server-side apply). Maintained by the server; a write may
    replace it."""
    self_link: str | None = None
    """Deprecated and not set; accepted so exported manifests apply unchanged."""


class LocalObjectReference(ApiModel):
    """A reference to an object by name in the same namespace (or cluster scope)."""

    name: str
    """Name of the referenced object."""


class LocalUIDReference(ApiModel):
    """A reference by name and UID (``Volume.spec.claimRef``)."""

    name: str
    """Name of the referenced object."""
    uid: str | None = None
    """UID of the referenced object; a new object of the same name does not match."""


class SecretKeySelector(ApiModel):
    """A key in a Secret (``Machine.spec.ignitionRef``)."""

    name: str
    """Name of the Secret, in the same namespace."""
    key: str | None = None
    """Key in the Secret's data; a default applies where empty (the Machine's ignition: ignition.yaml)."""


class LabelSelectorRequirement(ApiModel):
    """One ``matchExpressions`` term of a label selector."""

    key: str
    """Label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values: In, NotIn, Exists or DoesNotExist."""
    values: list[str] | None = None
    """Values for In and NotIn (not empty); must be empty for Exists and DoesNotExist."""


class LabelSelectorSpec(ApiModel):
    """Kubernetes' ``metav1.LabelSelector`` as objects carry it (``Prefix.spec.parentSelector``);
    :func:`ironpool.api.selectors.compile_selector` turns it into a matcher."""

    match_labels: dict[str, str] | None = None
    """Labels an object must carry with exactly these values."""
    match_expressions: list[LabelSelectorRequirement] | None = None
    """Requirements an object's labels must all meet."""


class ObjectReference(ApiModel):
    """A full reference to another object (``Event.involvedObject``)."""

    api_version: str | None = None
    """API version of the referent."""
    kind: str | None = None
    """Kind of the referent."""
    name: str | None = None
    """Name of the referent."""
    namespace: str | None = None
    """Namespace of the referent."""
    uid: str | None = None
    """UID of the referent."""
    resource_version: str | None = None
    """The referent's resourceVersion the reference was made at."""
    field_path: str | None = None
    """The part of the referent meant, if not all of it (for example spec.volumes[0])."""


def _condition_status(v: Any) -> Any:
    # YAML turns an unquoted ``status: True`` into a boolean; Kubernetes tools accept both.
    if v is True:
        return "True"
    if v is False:
        return "False"
    return v


ConditionStatus = Annotated[Literal["True", "False", "Unknown"], BeforeValidator(_condition_status)]


class Condition(ApiModel):
    """A status condition (``Ready``, ``VolumesReady``, ...)."""

    type: str
    """Type of the condition (Ready, Scheduled, ...), unique among an object's conditions."""
    status: ConditionStatus
    """Status of the condition: True, False or Unknown."""
    reason: str | None = None
    """Machine-readable, CamelCase reason for the last transition."""
    message: str | None = None
    """Human-readable details of the last transition."""
    observed_generation: int | None = None
    """The object's generation the condition was set for."""
    last_update_time: Timestamp | None = None
    """When the condition was last updated."""
    last_transition_time: Timestamp | None = None
    """When the condition last changed from one status to another."""


TaintEffect = Literal["NoSchedule", "NoExecute"]


class Taint(ApiModel):
    """A pool taint; only Machines/Volumes tolerating it are scheduled there."""

    key: str
    """Key of the taint."""
    value: str | None = None
    """Value of the taint."""
    effect: TaintEffect
    """What the taint does to objects that do not tolerate it: NoSchedule keeps new ones off the pool,
    NoExecute evicts bound ones too."""
    # When a NoExecute taint was added (RFC 3339): tolerationSeconds count from here.
    time_added: Timestamp | None = None
    """When a NoExecute taint was added; a toleration's tolerationSeconds count from here."""


class Toleration(ApiModel):
    """Tolerates a matching taint (empty operator means ``Equal``, empty effect matches all)."""

    key: str | None = None
    """Taint key the toleration matches; empty with operator Exists matches every taint."""
    operator: Literal["Equal", "Exists"] | None = None
    """Equal (the default: key and value match) or Exists (the key is enough)."""
    value: str | None = None
    """Taint value the toleration matches with operator Equal."""
    effect: TaintEffect | None = None
    """Taint effect the toleration matches; empty matches every effect."""
    # How long a bound object stays on a pool after a matching NoExecute taint appears (None: forever).
    toleration_seconds: int | None = None
    """How long a bound object stays on a pool after a matching NoExecute taint appears; empty means
    forever."""


class TaintLike(Protocol):
    """What toleration matching reads of a taint: the API model, or the scheduler's own form."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str: ...


class TolerationLike(Protocol):
    """What toleration matching reads of a toleration (API model or the scheduler's own form)."""

    @property
    def key(self) -> str | None: ...
    @property
    def operator(self) -> str | None: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str | None: ...


def toleration_tolerates(tol: TolerationLike, taint: TaintLike) -> bool:
    """Kubernetes' ``ToleratesTaint`` (IronCore copies it verbatim)."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    op = tol.operator or "Equal"
    if op == "Exists":
        return True
    return (tol.value or "") == (taint.value or "")


def tolerates_taints(tolerations: Iterable[TolerationLike] | None,
                     taints: Iterable[TaintLike] | None) -> bool:
    """Every taint is tolerated by some toleration (the scheduler's TaintToleration uses this too)."""
    tols = tuple(tolerations or ())
    return all(any(toleration_tolerates(t, taint) for t in tols) for taint in taints or ())
