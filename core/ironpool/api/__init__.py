"""ironpool.api: IronCore's API types (pydantic models), one strategy per kind (its identity,
rules and table columns, :mod:`ironpool.api.strategies`), the resource table, validation,
quantities, selectors and JSON merge patch.

The names are imported on first use (``from ironpool.api import Machine`` works as before): a client
that needs only the errors or the quantities does not pay for every pydantic model at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ironpool.lazy import lazy_exports

if TYPE_CHECKING:
    from ironpool.api.compute import (
        Machine,
        MachineClass,
        MachinePool,
        MachineSpec,
        MachineStatus,
        Reservation,
    )
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
    from ironpool.api.resourcequota import ResourceQuota
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

_MODULES = {
    "apply_merge_patch": "merge_patch", "by_kind": "resources", "by_path": "resources",
    "Condition": "meta", "Event": "core", "FieldSelector": "selectors", "LabelSelector": "selectors",
    "LocalObjectReference": "meta", "LocalUIDReference": "meta", "Machine": "compute",
    "MachineClass": "compute", "MachinePool": "compute", "MachineSpec": "compute",
    "MachineStatus": "compute", "Namespace": "core", "ObjectMeta": "meta", "ObjectReference": "meta",
    "OwnerReference": "meta", "parse_field_selector": "selectors", "parse_label_selector": "selectors",
    "parse_quantity": "quantity", "Quantity": "quantity", "Reservation": "compute", "resolve": "resources",
    "ResourceInfo": "resources", "ResourceList": "quantity", "ResourceQuota": "resourcequota",
    "RESOURCES": "resources", "Secret": "core",
    "SecretKeySelector": "meta", "selector_from_set": "selectors", "spec_of": "validation",
    "Taint": "meta", "tolerates_taints": "meta", "Toleration": "meta", "validate_create": "validation",
    "validate_status_update": "validation", "validate_update": "validation",
    "validate_volume_resize": "validation", "Volume": "storage", "VolumeClass": "storage",
    "VolumePool": "storage", "VolumeSnapshot": "storage", "VolumeSpec": "storage", "VolumeStatus": "storage",
}

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
    "Reservation",
    "ResourceInfo",
    "ResourceList",
    "ResourceQuota",
    "Secret",
    "SecretKeySelector",
    "Taint",
    "Toleration",
    "Volume",
    "VolumeClass",
    "VolumePool",
    "VolumeSnapshot",
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


__getattr__ = lazy_exports(__name__, _MODULES)
