"""MachinePool and VolumePool: a host's offer, registered and reported by its poollet.

Both kinds follow one strategy (taints checked, ``spec.providerID`` fixed once set) and differ only
in their identity and table columns.
"""

from __future__ import annotations

from typing import ClassVar

from ironpool.api.columns import AGE, NAME, Column, cond_status, count, field, free_of, names, taints
from ironpool.api.compute import COMPUTE_GROUP, COMPUTE_VERSION, MachinePool
from ironpool.api.fieldpath import FieldErrors, index, label_value, qualified_name
from ironpool.api.meta import Taint
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import get, immutable
from ironpool.api.storage import STORAGE_GROUP, STORAGE_VERSION, VolumePool
from ironpool.api.strategy import Obj, Strategy


def _taints(taints: list[Taint] | None, path: str, errs: FieldErrors) -> None:
    """Kubernetes' taint rules: a qualified key, a label value, no key and effect twice."""
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(taints or ()):
        p = index(path, i)
        if not t.key:
            errs.required(f"{p}.key")
        else:
            for msg in qualified_name(t.key):
                errs.invalid(f"{p}.key", t.key, msg)
        if t.value:
            for msg in label_value(t.value):
                errs.invalid(f"{p}.value", t.value, msg)
        if (t.key, t.effect) in seen:
            errs.duplicate(p, f"{t.key}:{t.effect}")
        seen.add((t.key, t.effect))


class PoolStrategy(Strategy[MachinePool | VolumePool]):
    """What MachinePool and VolumePool share."""

    def validate(self, obj: MachinePool | VolumePool, errs: FieldErrors) -> None:
        _taints(obj.spec.taints, "spec.taints", errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        if get(old, "spec", "providerID"):
            immutable(old, new, ("spec", "providerID"), errs)


class MachinePoolStrategy(PoolStrategy):
    """A machine pool: one libvirt host's machine capacity."""

    info: ClassVar[ResourceInfo] = ResourceInfo(
        COMPUTE_GROUP, COMPUTE_VERSION, "MachinePool", "machinepools", "machinepool", ("mp",), False,
        MachinePool, True,
    )
    columns = (
        NAME, Column("READY", cond_status("Ready", "status.state")),
        Column("CLASSES", count("status.availableMachineClasses")),
        Column("CPU", free_of("cpu")), Column("MEMORY", free_of("memory")), AGE,
        Column("PROVIDERID", field("spec.providerID"), wide=True),
        Column("STATE", field("status.state"), wide=True),
        Column("TAINTS", taints("spec.taints"), wide=True),
        Column("MACHINECLASSES", names("status.availableMachineClasses"), wide=True),
    )


class VolumePoolStrategy(PoolStrategy):
    """A volume pool: one libvirt storage pool's capacity."""

    info: ClassVar[ResourceInfo] = ResourceInfo(
        STORAGE_GROUP, STORAGE_VERSION, "VolumePool", "volumepools", "volumepool", ("vp",), False,
        VolumePool, True,
    )
    columns = (
        NAME, Column("STATE", field("status.state")),
        Column("CLASSES", count("status.availableVolumeClasses")),
        Column("STORAGE", free_of("storage")), AGE,
        Column("PROVIDERID", field("spec.providerID"), wide=True),
        Column("VOLUMECLASSES", names("status.availableVolumeClasses"), wide=True),
        Column("TAINTS", taints("spec.taints"), wide=True),
    )
