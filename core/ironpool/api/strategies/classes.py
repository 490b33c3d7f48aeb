"""MachineClass and VolumeClass: what sizes of machine and kinds of volume exist, cluster-scoped.

Both follow one strategy: required capabilities are positive, and capabilities never change once
made (a VolumeClass's ``resizePolicy`` may).
"""

from __future__ import annotations

from typing import ClassVar

from ironpool.api.columns import AGE, NAME, Column, field, mapping
from ironpool.api.compute import COMPUTE_GROUP, COMPUTE_VERSION, MachineClass
from ironpool.api.fieldpath import FieldErrors, child
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable, non_negative, positive
from ironpool.api.storage import STORAGE_GROUP, STORAGE_VERSION, VolumeClass
from ironpool.api.strategy import Obj, Strategy


class ClassStrategy(Strategy[MachineClass | VolumeClass]):
    """What MachineClass and VolumeClass share."""

    name_is_dns_label = True
    #: Capabilities every class of the kind must state, greater than zero.
    required: ClassVar[tuple[str, ...]] = ()

    def validate(self, obj: MachineClass | VolumeClass, errs: FieldErrors) -> None:
        for key in self.required:
            positive(obj.capabilities, key, "capabilities", errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        immutable(old, new, ("capabilities",), errs)


class MachineClassStrategy(ClassStrategy):
    """cpu and memory are required; other capabilities are counts of at least zero."""

    info: ClassVar[ResourceInfo] = ResourceInfo(
        COMPUTE_GROUP, COMPUTE_VERSION, "MachineClass", "machineclasses", "machineclass", ("mc",), False,
        MachineClass, False,
    )
    required = ("cpu", "memory")
    columns = (
        NAME, Column("CPU", field("capabilities.cpu")), Column("MEMORY", field("capabilities.memory")), AGE,
        Column("CAPABILITIES", mapping("capabilities"), wide=True),
    )

    def validate(self, obj: MachineClass | VolumeClass, errs: FieldErrors) -> None:
        super().validate(obj, errs)
        for k, q in obj.capabilities.items():
            if k not in self.required:
                non_negative(q, child("capabilities", k), errs)


class VolumeClassStrategy(ClassStrategy):
    """tps and iops are required."""

    info: ClassVar[ResourceInfo] = ResourceInfo(
        STORAGE_GROUP, STORAGE_VERSION, "VolumeClass", "volumeclasses", "volumeclass", ("vc",), False,
        VolumeClass, False,
    )
    required = ("tps", "iops")
    columns = (
        NAME, Column("TPS", field("capabilities.tps")), Column("IOPS", field("capabilities.iops")), AGE,
        Column("RESIZEPOLICY", field("resizePolicy"), wide=True),
    )
