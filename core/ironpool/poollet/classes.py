"""Map API classes to the classes a runtime supports, as IronCore's class mappers do.

An API class maps to the runtime class of the same name when their capabilities are equal;
otherwise to the one runtime class with identical capabilities. None or several matches mean the
class is not offered by this pool (the reason says which).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ironpool.api.quantity import Quantity, parse_quantity
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb


@dataclass(frozen=True)
class RuntimeClass:
    """One class as the IRI ``Status`` call reports it: capabilities as integers, and a quantity."""

    name: str
    capabilities: Mapping[str, int]
    quantity: int = 0


def machine_runtime_classes(statuses: Iterable[mpb.MachineClassStatus]) -> list[RuntimeClass]:
    """A machine runtime's ``Status`` answer: capabilities are its resources (cpu, memory)."""
    return [RuntimeClass(s.machine_class.name, dict(s.machine_class.capabilities.resources), s.quantity)
            for s in statuses]


def volume_runtime_classes(statuses: Iterable[vpb.VolumeClassStatus]) -> list[RuntimeClass]:
    """A volume runtime's ``Status`` answer: capabilities are tps and iops, the quantity free bytes."""
    return [RuntimeClass(s.volume_class.name, {"tps": s.volume_class.capabilities.tps,
                                               "iops": s.volume_class.capabilities.iops}, s.quantity)
            for s in statuses]


@dataclass(frozen=True)
class ClassMatch:
    """The result of a lookup: the runtime class, or why there is none."""

    runtime_class: RuntimeClass | None
    reason: str = ""


def capabilities_to_iri(capabilities: Mapping[str, Quantity | str | int]) -> dict[str, int]:
    """API capabilities as IRI sends them: ``Quantity.Value()`` (cpu in whole cores, memory in bytes)."""
    return {name: parse_quantity(q).value() for name, q in capabilities.items()}


@dataclass
class ClassMapper:
    """The runtime's classes, refreshed from ``Status``; looks API classes up by name or capabilities."""

    classes: Sequence[RuntimeClass] = field(default_factory=tuple)

    def lookup(self, name: str, capabilities: Mapping[str, int]) -> ClassMatch:
        caps = dict(capabilities)
        for rc in self.classes:
            if rc.name == name and dict(rc.capabilities) == caps:
                return ClassMatch(rc)
        matches = [rc for rc in self.classes if dict(rc.capabilities) == caps]
        if len(matches) == 1:
            return ClassMatch(matches[0])
        if not matches:
            return ClassMatch(None, f"no runtime class has the capabilities of class {name!r} ({caps})")
        names = ", ".join(sorted(rc.name for rc in matches))
        return ClassMatch(None, f"class {name!r} matches several runtime classes ({names})")
