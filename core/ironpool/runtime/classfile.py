"""Reading a ``--classes`` file, the same way for the machine and the volume runtime.

A file holds IronCore class manifests as a YAML list, a ``kind: List``, several YAML documents, or
any mix of these; manifests of other kinds are skipped, so one file can carry MachineClasses and
VolumeClasses. Each runtime then reads the capabilities of its own kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from ironpool.api.quantity import parse_quantity


class ClassFileError(ValueError):
    """The classes file is unreadable or a manifest in it is invalid; the message names which."""


def read_text(path: str | Path, what: str) -> str:
    """The file's text; ClassFileError naming the file when it cannot be read."""
    p = Path(path)
    try:
        return p.read_text()
    except OSError as exc:
        raise ClassFileError(f"{p}: cannot read {what}: {exc.strerror}") from exc


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
            raise ClassFileError(f"expected class manifests (mappings), found {type(doc).__name__}")


def manifests(text: str, source: str, kind: str, group: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(where, name, manifest)`` for each manifest of ``kind`` in ``text``, checked for a name,
    a unique one, and an ``apiVersion`` in ``group`` when it has one. ``where`` names the manifest
    for error messages."""
    try:
        raw = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ClassFileError(f"{source}: not valid YAML: {exc}") from exc
    try:
        docs = list(_documents(raw))
    except ClassFileError as exc:
        raise ClassFileError(f"{source}: {exc}") from None
    seen: set[str] = set()
    for index, doc in enumerate(docs):
        if doc.get("kind") != kind:
            continue
        where = f"{source}: {kind} #{index}"
        api_version = doc.get("apiVersion")
        if api_version is not None and not str(api_version).startswith(group + "/"):
            raise ClassFileError(f"{where}: apiVersion: expected {group}/..., got {api_version!r}")
        name = (doc.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ClassFileError(f"{where}: metadata.name is required")
        where = f"{source}: {kind} {name!r}"
        if name in seen:
            raise ClassFileError(f"{where}: metadata.name: defined twice")
        seen.add(name)
        yield where, name, doc
    if not seen:
        raise ClassFileError(f"{source}: no {kind} manifests ({group}) found")


def capabilities(where: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``capabilities`` map (empty when absent)."""
    caps = doc.get("capabilities") or {}
    if not isinstance(caps, dict):
        raise ClassFileError(f"{where}: capabilities must be a map")
    return caps


def quantity(where: str, field: str, raw: Any) -> int:
    """A Kubernetes quantity as a whole number (rounded up, as IRI carries them)."""
    try:
        return parse_quantity(raw).value()
    except (ValueError, TypeError) as exc:
        raise ClassFileError(f"{where}: {field}: not a quantity: {raw!r} ({exc})") from exc
