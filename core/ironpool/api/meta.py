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
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(ApiModel):
    """Kubernetes ``ObjectMeta``; the server-managed fields are set by the apiserver."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: Timestamp | None = None
    deletion_timestamp: Timestamp | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[OwnerReference] | None = None
    # Present in objects exported with kubectl; accepted so such manifests apply unchanged.
    managed_fields: list[dict[str, Any]] | None = None
    self_link: str | None = None


class LocalObjectReference(ApiModel):
    """A reference to an object by name in the same namespace (or cluster scope)."""

    name: str


class LocalUIDReference(ApiModel):
    """A reference by name and UID (``Volume.spec.claimRef``)."""

    name: str
    uid: str | None = None


class SecretKeySelector(ApiModel):
    """A key in a Secret (``Machine.spec.ignitionRef``)."""

    name: str
    key: str | None = None


class LabelSelectorRequirement(ApiModel):
    """One ``matchExpressions`` term of a label selector."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelectorSpec(ApiModel):
    """Kubernetes' ``metav1.LabelSelector`` as objects carry it (``Prefix.spec.parentSelector``);
    :func:`ironpool.api.selectors.compile_selector` turns it into a matcher."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class ObjectReference(ApiModel):
    """A full reference to another object (``Event.involvedObject``)."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


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
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = None
    last_update_time: Timestamp | None = None
    last_transition_time: Timestamp | None = None


TaintEffect = Literal["NoSchedule", "NoExecute"]


class Taint(ApiModel):
    """A pool taint; only Machines/Volumes tolerating it are scheduled there."""

    key: str
    value: str | None = None
    effect: TaintEffect
    # When a NoExecute taint was added (RFC 3339): tolerationSeconds count from here.
    time_added: Timestamp | None = None


class Toleration(ApiModel):
    """Tolerates a matching taint (empty operator means ``Equal``, empty effect matches all)."""

    key: str | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: str | None = None
    effect: TaintEffect | None = None
    # How long a bound object stays on a pool after a matching NoExecute taint appears (None: forever).
    toleration_seconds: int | None = None


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
