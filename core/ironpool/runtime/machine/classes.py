"""Machine classes offered by the runtime, read from IronCore ``MachineClass`` manifests.

The file is read as :mod:`ironpool.runtime.classfile` describes (the volume runtime reads its
``--classes`` the same way). As over IRI, ``cpu`` is whole cores (rounded up) and ``memory`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ironpool.runtime import classfile
from ironpool.runtime.classfile import ClassFileError

__all__ = ["ClassFileError", "MachineClassSpec", "load_classes", "parse_classes", "quantity"]

KIND = "MachineClass"
GROUP = "compute.ironcore.dev"


@dataclass(frozen=True)
class MachineClassSpec:
    """One class: its name and IRI capabilities (``cpu``, ``memory`` and any extra names)."""

    name: str
    resources: dict[str, int] = field(default_factory=dict)

    @property
    def cpu(self) -> int:
        return self.resources["cpu"]

    @property
    def memory(self) -> int:
        return self.resources["memory"]


def parse_classes(text: str, source: str = "<classes>") -> dict[str, MachineClassSpec]:
    """Parse manifests into classes by name; ClassFileError names the bad manifest and field."""
    classes: dict[str, MachineClassSpec] = {}
    for where, name, doc in classfile.manifests(text, source, KIND, GROUP):
        resources: dict[str, int] = {}
        for key, value in classfile.capabilities(where, doc).items():
            amount = classfile.quantity(where, f"capabilities.{key}", value)
            if amount <= 0:
                raise ClassFileError(f"{where}: capabilities.{key} must be positive, not {value!r}")
            resources[str(key)] = amount
        for required in ("cpu", "memory"):
            if required not in resources:
                raise ClassFileError(f"{where}: capabilities.{required} is required")
        classes[name] = MachineClassSpec(name=name, resources=resources)
    return classes


def load_classes(path: str | Path) -> dict[str, MachineClassSpec]:
    """Read and parse a classes file."""
    return parse_classes(classfile.read_text(path, "machine classes"), str(path))


def quantity(cls: MachineClassSpec, free_cpu: int, free_memory: int) -> int:
    """How many more machines of ``cls`` fit in the free CPUs and memory."""
    if free_cpu <= 0 or free_memory <= 0:
        return 0
    return max(0, min(free_cpu // cls.cpu, free_memory // cls.memory))
