"""ironpool.api: IronCore's API types (pydantic models), one strategy per kind (its identity,
rules and table columns, :mod:`ironpool.api.strategies`), the resource table, validation,
quantities, selectors and JSON merge patch."""

from ironpool.api.compute import Machine, MachineClass, MachinePool, MachineSpec, MachineStatus
from ironpool.api.core import Event, Namespace, Secret
from ironpool.api.merge_patch import apply_merge_patch
from ironpool.api.meta import (
    Condition,
    LocalObjectReference,
    LocalUIDReference,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    SecretKeySelector,
    Taint,
    Toleration,
    tolerates_taints,
)
from ironpool.api.quantity import Quantity, ResourceList, parse_quantity
from ironpool.api.resources import RESOURCES, ResourceInfo, by_kind, by_path, resolve
from ironpool.api.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
    selector_from_set,
)
from ironpool.api.storage import Volume, VolumeClass, VolumePool, VolumeSpec, VolumeStatus
from ironpool.api.validation import (
    spec_of,
    validate_create,
    validate_status_update,
    validate_update,
    validate_volume_resize,
)

__all__ = [
    "RESOURCES",
    "Condition",
    "Event",
    "FieldSelector",
    "LabelSelector",
    "LocalObjectReference",
    "LocalUIDReference",
    "Machine",
    "MachineClass",
    "MachinePool",
    "MachineSpec",
    "MachineStatus",
    "Namespace",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "Quantity",
    "ResourceInfo",
    "ResourceList",
    "Secret",
    "SecretKeySelector",
    "Taint",
    "Toleration",
    "Volume",
    "VolumeClass",
    "VolumePool",
    "VolumeSpec",
    "VolumeStatus",
    "apply_merge_patch",
    "by_kind",
    "by_path",
    "parse_field_selector",
    "parse_label_selector",
    "parse_quantity",
    "resolve",
    "selector_from_set",
    "spec_of",
    "tolerates_taints",
    "validate_create",
    "validate_status_update",
    "validate_update",
    "validate_volume_resize",
]
