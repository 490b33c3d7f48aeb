"""Map API classes to the classes a runtime supports, as IronCore's class mappers do (§3.1).

An API class maps to the runtime class of the same name when their capabilities are equal;
otherwise to the one runtime class with identical capabilities. None or several matches mean the
class is not offered by this pool (the reason says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ironpool.api.quantity import Quantity, parse_quantity


@dataclass(frozen=True)
class RuntimeClass:
    """One class as the IRI ``Status`` call reports it: capabilities as integers, and a quantity."""

    name: str
    capabilities: Mapping[str, int]
    quantity: int = 0


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
