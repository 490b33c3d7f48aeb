"""VolumeSnapshot: a point-in-time copy of a namespace's Volume (IronCore's
``ValidateVolumeSnapshot``/``ValidateVolumeSnapshotUpdate``): ``spec.volumeRef`` names the Volume
and never changes; the status is the volumepoollet's."""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable, ref_name
from ironpool.api.storage import STORAGE_GROUP, STORAGE_VERSION, VolumeSnapshot
from ironpool.api.strategy import Obj, Strategy


class VolumeSnapshotStrategy(Strategy[VolumeSnapshot]):
    """A snapshot must name its Volume, and keeps naming the same one."""

    info = ResourceInfo(STORAGE_GROUP, STORAGE_VERSION, "VolumeSnapshot", "volumesnapshots", "volumesnapshot",
                        (), True, VolumeSnapshot, True)
    # IronCore's table: Name, VolumeRef, State, Age.
    columns = (
        NAME, Column("VOLUMEREF", field("spec.volumeRef.name")), Column("STATE", field("status.state")), AGE,
        Column("SIZE", field("status.size"), wide=True),
        Column("SNAPSHOTID", field("status.snapshotID"), wide=True),
    )

    def validate(self, obj: VolumeSnapshot, errs: FieldErrors) -> None:
        ref = obj.spec.volume_ref
        # IronCore's types allow a nil volumeRef but its poollet cannot act on one ("volumeRef is
        # required"): refused here, where the user sees it.
        if ref is None:
            errs.required("spec.volumeRef", "must name the Volume to snapshot")
        else:
            ref_name(ref.name, "spec.volumeRef.name", errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        immutable(old, new, ("spec", "volumeRef"), errs)
