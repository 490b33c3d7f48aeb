"""Volume classes offered by the runtime, read from IronCore ``VolumeClass`` manifests.

A manifest file may hold several YAML documents (or a ``kind: List``); documents of other kinds
are skipped so one examples file can carry MachineClasses too. ``capabilities.tps`` (bytes per
second) and ``capabilities.iops`` are Kubernetes quantities, as in IronCore.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

# Kubernetes quantity suffixes. A private parser, because importing ironpool.api would pull the
# whole API model into the runtime process for two integers.
_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY_RE = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>[eE][+-]?[0-9]{1,3}|[A-Za-z]{0,2})$"
)


def parse_quantity(text: str) -> int:
    """A Kubernetes quantity (``"100Mi"``, ``"1k"``, ``"1e3"``) rounded up to an integer."""
    match = _QUANTITY_RE.match(text.strip())
    if not match:
        raise ValueError("expected a number with an optional suffix such as Ki, Mi, Gi, k, M, G")
    number, suffix = Fraction(match["num"]), match["suffix"]
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        value = number * Fraction(10) ** int(suffix[1:])
    elif suffix in _SUFFIXES:
        value = number * _SUFFIXES[suffix]
    else:
        raise ValueError(f"unknown suffix {suffix!r}")
    return math.ceil(value)


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
        value = parse_quantity(str(raw))
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
