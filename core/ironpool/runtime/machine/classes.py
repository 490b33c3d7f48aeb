"""Machine classes offered by the runtime, read from IronCore ``MachineClass`` manifests.

The file is a YAML list of manifests, a ``kind: List``, or several YAML documents; documents of
other kinds are skipped. As over IRI, ``cpu`` is whole cores (rounded up) and ``memory`` bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ironpool.api.quantity import Quantity


class ClassFileError(ValueError):
    """The classes file is unreadable or a manifest in it is invalid."""


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


def _documents(raw: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for doc in raw:
        if doc is None:
            continue
        if isinstance(doc, list):
            yield from _documents(doc)
        elif isinstance(doc, dict) and doc.get("kind") == "List":
            yield from _documents(doc.get("items") or [])
        elif isinstance(doc, dict):
            yield doc
        else:
            raise ClassFileError(f"expected MachineClass manifests, found {type(doc).__name__}")


def parse_classes(text: str, source: str = "<classes>") -> dict[str, MachineClassSpec]:
    """Parse manifests into classes by name; ClassFileError names the bad manifest and field."""
    try:
        raw = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ClassFileError(f"{source}: not valid YAML: {exc}") from exc
    classes: dict[str, MachineClassSpec] = {}
    for i, doc in enumerate(_documents(raw)):
        if doc.get("kind") != "MachineClass":
            continue
        name = (doc.get("metadata") or {}).get("name")
        where = f"{source}: MachineClass #{i}"
        if not isinstance(name, str) or not name:
            raise ClassFileError(f"{where}: metadata.name is required")
        where = f"{source}: MachineClass {name!r}"
        if name in classes:
            raise ClassFileError(f"{where}: duplicate name")
        caps = doc.get("capabilities")
        if not isinstance(caps, dict):
            raise ClassFileError(f"{where}: capabilities must be a map")
        resources: dict[str, int] = {}
        for key, value in caps.items():
            try:
                amount = Quantity(str(value)).value()
            except ValueError as exc:
                raise ClassFileError(f"{where}: capabilities.{key}: {exc}") from exc
            if amount <= 0:
                raise ClassFileError(f"{where}: capabilities.{key} must be positive, not {value!r}")
            resources[str(key)] = amount
        for required in ("cpu", "memory"):
            if required not in resources:
                raise ClassFileError(f"{where}: capabilities.{required} is required")
        classes[name] = MachineClassSpec(name=name, resources=resources)
    if not classes:
        raise ClassFileError(f"{source}: no MachineClass manifests found")
    return classes


def load_classes(path: str | Path) -> dict[str, MachineClassSpec]:
    """Read and parse a classes file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ClassFileError(f"{p}: cannot read machine classes: {exc.strerror}") from exc
    return parse_classes(text, str(p))


def quantity(cls: MachineClassSpec, free_cpu: int, free_memory: int) -> int:
    """How many more machines of ``cls`` fit in the free CPUs and memory."""
    if free_cpu <= 0 or free_memory <= 0:
        return 0
    return max(0, min(free_cpu // cls.cpu, free_memory // cls.memory))
