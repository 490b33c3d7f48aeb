"""MachineClass: a size of machine (its ``capabilities``), cluster-scoped and immutable once made."""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, field, mapping
from ironpool.api.compute import COMPUTE_GROUP, COMPUTE_VERSION, MachineClass
from ironpool.api.fieldpath import FieldErrors, child
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable, non_negative, positive
from ironpool.api.strategy import Obj, Strategy


class MachineClassStrategy(Strategy[MachineClass]):
    """cpu and memory are required and positive; other capabilities are counts of at least zero."""

    info = ResourceInfo(COMPUTE_GROUP, COMPUTE_VERSION, "MachineClass", "machineclasses", "machineclass",
                        ("mc",), False, MachineClass, False)
    name_is_dns_label = True
    columns = (
        NAME, Column("CPU", field("capabilities.cpu")), Column("MEMORY", field("capabilities.memory")), AGE,
        Column("CAPABILITIES", mapping("capabilities"), wide=True),
    )

    def validate(self, obj: MachineClass, errs: FieldErrors) -> None:
        caps = obj.capabilities
        positive(caps, "cpu", "capabilities", errs)
        positive(caps, "memory", "capabilities", errs)
        for k, q in caps.items():
            if k not in ("cpu", "memory"):
                non_negative(q, child("capabilities", k), errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        immutable(old, new, ("capabilities",), errs)
