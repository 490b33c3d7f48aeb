"""Volume: a disk in a volume pool, namespaced; also the rules of a Machine's ephemeral volume
template (:func:`validate_volume_spec`) and IronCore's ``VolumeResizePolicy`` check."""

from __future__ import annotations

from typing import Any

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.fieldpath import FieldErrors, validate_labels
from ironpool.api.quantity import Quantity
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import get, immutable, ref_name, set_once, tolerations
from ironpool.api.storage import STORAGE_GROUP, STORAGE_VERSION, Volume, VolumeSpec
from ironpool.api.strategy import Obj, Strategy
from ironpool.api.subresources import PoolBinding


class VolumeStrategy(Strategy[Volume]):
    """IronCore's volume validation; class, encryption fixed, pool set once."""

    info = ResourceInfo(STORAGE_GROUP, STORAGE_VERSION, "Volume", "volumes", "volume", ("vol",), True,
                        Volume, True)
    subresources = (
        PoolBinding(pool_kind="VolumePool", pool_ref="volumePoolRef", class_ref="volumeClassRef"),
    )
    columns = (
        NAME, Column("VOLUMECLASS", field("spec.volumeClassRef.name")),
        Column("POOL", field("spec.volumePoolRef.name")), Column("STATE", field("status.state")),
        Column("SIZE", field("spec.resources.storage")), AGE,
        Column("CLAIMER", field("spec.claimRef.name"), wide=True),
        Column("VOLUMEID", field("status.volumeID"), wide=True),
        Column("IMAGE", field("spec.dataSource.osImage.image"), wide=True),
    )

    def validate(self, obj: Volume, errs: FieldErrors) -> None:
        validate_volume_spec(obj.spec, "spec", errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        immutable(old, new, ("spec", "volumeClassRef"), errs)
        set_once(old, new, ("spec", "volumePoolRef"), errs)
        immutable(old, new, ("spec", "encryption"), errs)


def validate_volume_spec(spec: VolumeSpec, path: str, errs: FieldErrors) -> None:
    """A volume's spec at ``path`` (``spec``, or a Machine's ephemeral volume template)."""
    if spec.volume_class_ref is not None:
        ref_name(spec.volume_class_ref.name, f"{path}.volumeClassRef.name", errs)
        if spec.volume_pool_selector:
            validate_labels(spec.volume_pool_selector, f"{path}.volumePoolSelector", errs)
        if spec.volume_pool_ref is not None:
            ref_name(spec.volume_pool_ref.name, f"{path}.volumePoolRef.name", errs)
        storage = (spec.resources or {}).get("storage")
        if storage is None:
            errs.required(f"{path}.resources.storage", "must specify storage")
        elif storage.sign() <= 0:
            errs.invalid(f"{path}.resources.storage", str(storage), "must be greater than zero")
        tolerations(spec.tolerations, f"{path}.tolerations", errs)
        if spec.image_pull_secret is not None:
            ref_name(spec.image_pull_secret.name, f"{path}.imagePullSecret.name", errs)
    else:
        why = "must not specify if volume class is empty"
        if spec.volume_pool_selector is not None:
            errs.forbidden(f"{path}.volumePoolSelector", why)
        if spec.volume_pool_ref is not None:
            errs.forbidden(f"{path}.volumePoolRef", why)
        if spec.resources is not None:
            errs.forbidden(f"{path}.resources", why)
        if spec.tolerations is not None:
            errs.forbidden(f"{path}.tolerations", why)
        if spec.data_source is not None and spec.data_source.os_image is not None:
            errs.forbidden(f"{path}.dataSource.osImage", why)
    if spec.claim_ref is not None:
        if spec.unclaimable:
            errs.forbidden(f"{path}.claimRef", "cannot specify unclaimable and claimRef")
        else:
            ref_name(spec.claim_ref.name, f"{path}.claimRef.name", errs)
    if spec.encryption is not None:
        ref_name(spec.encryption.secret_ref.name, f"{path}.encryption.secretRef.name", errs)
    ds = spec.data_source
    if ds is not None:
        if ds.volume_snapshot_ref is not None:
            if ds.os_image is not None:
                errs.forbidden(f"{path}.dataSource.osImage", "must only specify one volume data source")
            ref_name(ds.volume_snapshot_ref.name, f"{path}.dataSource.volumeSnapshotRef.name", errs)
        if ds.os_image is not None and not ds.os_image.image:
            errs.required(f"{path}.dataSource.osImage.image")


def resize_errors(volume_class: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> FieldErrors:
    """IronCore's ``VolumeResizePolicy`` admission: may ``old`` (a stored Volume) become ``new``?

    With the class's ``resizePolicy`` ``Static`` the size is fixed; with ``ExpandOnly`` it may
    only grow. The errors name ``spec.resources.storage``.
    """
    errs = FieldErrors()
    before = (get(old, "spec", "resources") or {}).get("storage")
    after = (get(new, "spec", "resources") or {}).get("storage")
    if before is None or after is None:
        return errs
    q_before, q_after = Quantity(str(before)), Quantity(str(after))
    if q_before == q_after:
        return errs
    policy = volume_class.get("resizePolicy") or "Static"
    class_name = get(volume_class, "metadata", "name")
    if policy == "Static":
        errs.forbidden("spec.resources.storage",
                       f"volume class {class_name!r} has resize policy Static: the size cannot change")
    elif q_after < q_before:
        errs.forbidden("spec.resources.storage",
                       f"volume class {class_name!r} has resize policy ExpandOnly: "
                       f"cannot shrink from {q_before} to {q_after}")
    return errs

