"""Volume classes offered by the runtime, read from IronCore ``VolumeClass`` manifests.

A manifest file may hold several YAML documents (or a ``kind: List``); documents of other kinds
are skipped so one examples file can carry MachineClasses too. ``capabilities.tps`` (bytes per
second) and ``capabilities.iops`` are Kubernetes quantities, as in IronCore.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ironpool.api.quantity import parse_quantity

_GROUP = "storage.ironcore.dev"
_KIND = "VolumeClass"


class ClassFileError(ValueError):
    """The classes file cannot be used; the message names the document and field."""


@dataclass(frozen=True)
class VolumeClassSpec:
    """One class: its name and the only two capabilities IRI carries (0 = unlimited)."""

    name: str
    tps: int = 0
    iops: int = 0


def _quantity(doc_label: str, field: str, raw: Any) -> int:
    if raw is None:
        return 0
    try:
        value = parse_quantity(raw).value()
    except (ValueError, TypeError) as exc:
        raise ClassFileError(f"{doc_label}: {field}: not a quantity: {raw!r} ({exc})") from exc
    if value < 0:
        raise ClassFileError(f"{doc_label}: {field}: must not be negative, got {raw!r}")
    return value


def _documents(docs: Iterable[Any]) -> Iterator[Any]:
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from doc["items"]
        elif doc is not None:
            yield doc


def parse_classes(text: str, source: str = "<classes>") -> dict[str, VolumeClassSpec]:
    """Parse manifests into classes by name; raise :class:`ClassFileError` naming the problem."""
    try:
        raw_docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ClassFileError(f"{source}: not valid YAML: {exc}") from exc
    classes: dict[str, VolumeClassSpec] = {}
    for index, doc in enumerate(_documents(raw_docs)):
        label = f"{source} document {index}"
        if not isinstance(doc, dict):
            raise ClassFileError(f"{label}: expected a mapping, got {type(doc).__name__}")
        if doc.get("kind") != _KIND:
            continue
        api_version = str(doc.get("apiVersion", ""))
        if not api_version.startswith(_GROUP + "/"):
            raise ClassFileError(f"{label}: apiVersion: expected {_GROUP}/..., got {api_version!r}")
        name = (doc.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ClassFileError(f"{label}: metadata.name: required")
        label = f"{source} VolumeClass {name!r}"
        if name in classes:
            raise ClassFileError(f"{label}: metadata.name: defined twice")
        caps = doc.get("capabilities") or {}
        if not isinstance(caps, dict):
            raise ClassFileError(f"{label}: capabilities: expected a mapping")
        classes[name] = VolumeClassSpec(
            name=name,
            tps=_quantity(label, "capabilities.tps", caps.get("tps")),
            iops=_quantity(label, "capabilities.iops", caps.get("iops")),
        )
    if not classes:
        raise ClassFileError(f"{source}: no {_KIND} ({_GROUP}) found")
    return classes


def load_classes(path: Path) -> dict[str, VolumeClassSpec]:
    """Read and parse a classes file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ClassFileError(f"{path}: cannot read: {exc.strerror}") from exc
    return parse_classes(text, str(path))
