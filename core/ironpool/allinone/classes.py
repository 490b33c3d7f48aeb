"""The classes ``ironpool up`` offers: read from manifests, handed to the runtimes, seeded into the API.

One set of MachineClass/VolumeClass manifests feeds both sides, so API classes and runtime classes
agree by name (the poollet maps them by name first). Seeding creates what is missing and leaves an
existing class alone: a class edited through the API is not reset by a restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ironpool.api.errors import AlreadyExists, ApiError
from ironpool.api.resources import by_kind
from ironpool.client.rest import AsyncClient

_SUFFIXES = (".yaml", ".yml", ".json")


class ClassesError(Exception):
    """The class manifests cannot be used; the message names the file or directory."""


@dataclass
class ClassSet:
    """MachineClass and VolumeClass manifests, in file order."""

    machine: list[dict[str, Any]] = field(default_factory=list)
    volume: list[dict[str, Any]] = field(default_factory=list)

    def names(self, kind: str) -> list[str]:
        docs = self.machine if kind == "MachineClass" else self.volume
        return [str(d["metadata"]["name"]) for d in docs]


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _SUFFIXES)
        if found:
            return found
        raise ClassesError(f"--classes {path}: no .yaml, .yml or .json files in this directory")
    raise ClassesError(f"--classes {path}: no such file or directory")


def load_class_manifests(paths: list[Path]) -> ClassSet:
    """Every MachineClass and VolumeClass of ``paths`` (files or directories); other kinds are refused."""
    out = ClassSet()
    seen: set[tuple[str, str]] = set()
    for path in paths:
        for f in _files(path):
            try:
                docs = [d for d in yaml.safe_load_all(f.read_text()) if d is not None]
            except (OSError, yaml.YAMLError) as exc:
                raise ClassesError(f"--classes {f}: {exc}") from exc
            for i, doc in enumerate(docs):
                where = f"--classes {f} (document {i})"
                if not isinstance(doc, dict):
                    raise ClassesError(f"{where}: expected a manifest, got {type(doc).__name__}")
                kind = doc.get("kind")
                name = (doc.get("metadata") or {}).get("name")
                if kind not in ("MachineClass", "VolumeClass"):
                    raise ClassesError(f"{where}: kind {kind!r} is not a MachineClass or VolumeClass")
                if not isinstance(name, str) or not name:
                    raise ClassesError(f"{where}: metadata.name is required")
                try:
                    by_kind(str(doc.get("apiVersion", "")), kind)
                except ApiError as exc:
                    raise ClassesError(f"{where}: apiVersion: {exc}") from None
                if (kind, name) in seen:
                    raise ClassesError(f"{where}: {kind} {name!r} is defined twice")
                seen.add((kind, name))
                (out.machine if kind == "MachineClass" else out.volume).append(doc)
    if not out.machine:
        raise ClassesError("--classes: no MachineClass found; the machine runtime needs at least one")
    if not out.volume:
        raise ClassesError("--classes: no VolumeClass found; the volume runtime needs at least one")
    return out


def write_runtime_files(classes: ClassSet, directory: Path) -> tuple[Path, Path]:
    """The runtimes' ``--classes`` files: ``machineclasses.yaml`` and ``volumeclasses.yaml``."""
    machine, volume = directory / "machineclasses.yaml", directory / "volumeclasses.yaml"
    for target, docs in ((machine, classes.machine), (volume, classes.volume)):
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        tmp.replace(target)
    return machine, volume


async def seed_classes(client: AsyncClient, classes: ClassSet) -> list[str]:
    """Create the classes missing from the API; returns ``Kind/name`` of those created."""
    created: list[str] = []
    for doc in [*classes.machine, *classes.volume]:
        info = by_kind(str(doc.get("apiVersion", "")), str(doc["kind"]))
        body = {k: v for k, v in doc.items() if k != "status"}
        try:
            await client.create_raw(info, body)
        except AlreadyExists:
            continue
        created.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return created
