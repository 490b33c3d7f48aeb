"""VolumeClass: a kind of volume (its ``capabilities`` and ``resizePolicy``), cluster-scoped."""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable, positive
from ironpool.api.storage import STORAGE_GROUP, STORAGE_VERSION, VolumeClass
from ironpool.api.strategy import Obj, Strategy


class VolumeClassStrategy(Strategy[VolumeClass]):
    """tps and iops are required and positive; the capabilities never change (the policy may)."""

    info = ResourceInfo(STORAGE_GROUP, STORAGE_VERSION, "VolumeClass", "volumeclasses", "volumeclass",
                        ("vc",), False, VolumeClass, False)
    name_is_dns_label = True
    columns = (
        NAME, Column("TPS", field("capabilities.tps")), Column("IOPS", field("capabilities.iops")), AGE,
        Column("RESIZEPOLICY", field("resizePolicy"), wide=True),
    )

    def validate(self, obj: VolumeClass, errs: FieldErrors) -> None:
        positive(obj.capabilities, "tps", "capabilities", errs)
        positive(obj.capabilities, "iops", "capabilities", errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        immutable(old, new, ("capabilities",), errs)
