"""``core.ironcore.dev/v1alpha1``: ResourceQuota, as IronCore's
(``ironcore:api/core/v1alpha1/resourcequota_types.go``); the names and rules it is read by are in
:mod:`ironpool.api.quota`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ironpool.api.meta import ApiModel, ObjectMeta
from ironpool.api.quantity import Quantity


class ResourceScopeSelectorRequirement(ApiModel):
    """A requirement on the class of what a quota counts."""

    scope_name: Literal["MachineClass", "VolumeClass", "BucketClass"]
    """The class the requirement is about: MachineClass (Machines), VolumeClass (Volumes) or
    BucketClass (Buckets, which ironpool does not serve)."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the class is compared with ``values``: In, NotIn, Exists or DoesNotExist."""
    values: list[str] | None = None
    """Class names, for In and NotIn."""


class ResourceScopeSelector(ApiModel):
    """Which objects a quota counts: those whose class matches every requirement."""

    match_expressions: list[ResourceScopeSelectorRequirement] | None = None
    """Requirements on the class, all of which must hold."""


class ResourceQuotaSpec(ApiModel):
    """The limits of a quota and what it counts."""

    hard: dict[str, Quantity] | None = None
    """Limits by resource name: requests.cpu, requests.memory, requests.storage,
    count/machines.compute.ironcore.dev, count/volumes.storage.ironcore.dev (IronCore's names)."""
    scope_selector: ResourceScopeSelector | None = None
    """Counts only the objects whose class matches (all of them when empty)."""


class ResourceQuotaStatus(ApiModel):
    """The limits enforced and what the namespace uses of them, kept by the apiserver."""

    hard: dict[str, Quantity] | None = None
    """The limits enforced now."""
    used: dict[str, Quantity] | None = None
    """What the objects the quota counts use, per limited resource."""


class ResourceQuota(ApiModel):
    """Limits on what the Machines and Volumes of a namespace may use together; a write past a limit is
    refused (403 Forbidden)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: ResourceQuotaSpec = Field(default_factory=ResourceQuotaSpec)
    """The limits and what they count."""
    status: ResourceQuotaStatus | None = None
    """The limits enforced and the use of each, kept by the apiserver. Read-only."""
