"""Volume classes offered by the runtime, read from IronCore ``VolumeClass`` manifests.

The file is read as :mod:`ironpool.runtime.classfile` describes (the machine runtime reads its
``--classes`` the same way). ``capabilities.tps`` (bytes per second) and ``capabilities.iops`` are
Kubernetes quantities, as in IronCore; 0 or absent means unlimited.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ironpool.runtime import classfile
from ironpool.runtime.classfile import ClassFileError

__all__ = ["ClassFileError", "VolumeClassSpec", "load_classes", "parse_classes"]

KIND = "VolumeClass"
GROUP = "storage.ironcore.dev"


@dataclass(frozen=True)
class VolumeClassSpec:
    """One class: its name and the only two capabilities IRI carries (0 = unlimited)."""

    name: str
    tps: int = 0
    iops: int = 0


def _limit(where: str, caps: dict[str, object], key: str) -> int:
    raw = caps.get(key)
    if raw is None:
        return 0
    value = classfile.quantity(where, f"capabilities.{key}", raw)
    if value < 0:
        raise ClassFileError(f"{where}: capabilities.{key}: must not be negative, got {raw!r}")
    return value


def parse_classes(text: str, source: str = "<classes>") -> dict[str, VolumeClassSpec]:
    """Parse manifests into classes by name; raise :class:`ClassFileError` naming the problem."""
    classes: dict[str, VolumeClassSpec] = {}
    for where, name, doc in classfile.manifests(text, source, KIND, GROUP):
        caps = classfile.capabilities(where, doc)
        classes[name] = VolumeClassSpec(
            name=name, tps=_limit(where, caps, "tps"), iops=_limit(where, caps, "iops")
        )
    return classes


def load_classes(path: Path) -> dict[str, VolumeClassSpec]:
    """Read and parse a classes file."""
    return parse_classes(classfile.read_text(path, "volume classes"), str(path))
