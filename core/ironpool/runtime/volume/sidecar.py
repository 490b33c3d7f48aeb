"""Per-object metadata files ("sidecars") that let a restarted runtime rebuild its state.

libvirt storage volumes have no ``<metadata>`` element, so each volume's IRI metadata (labels,
annotations, class, requested size, creation time) lives in ``<pool>/.ironpool-meta/<id>.volume.json``
(snapshots: ``<id>.snapshot.json``). One hidden folder keeps the pool's volume list clean: libvirt
lists every entry of a ``dir`` pool, so sidecars next to the qcow2 files would show up as volumes.

Ordering makes crashes recoverable: a sidecar is written with ``phase: creating`` BEFORE the
libvirt volume exists and flipped to ``ready`` after; deletion flips it to ``deleting`` first and
removes it AFTER the volume. Writes go to a temporary file, are fsynced and renamed into place, so
a reader never sees a half-written file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from .records import SnapshotRecord, VolumeRecord

SCHEMA_VERSION = 1
META_DIR_NAME = ".ironpool-meta"


class SidecarError(Exception):
    """A sidecar file exists but cannot be read back (corrupt or from a newer schema)."""


class SidecarStore:
    """Reads and writes sidecars in one folder."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def ensure(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _path(self, kind: str, object_id: str) -> Path:
        return self.directory / f"{object_id}.{kind}.json"

    def write(self, record: VolumeRecord | SnapshotRecord) -> None:
        kind = "volume" if isinstance(record, VolumeRecord) else "snapshot"
        payload = json.dumps({"schema": SCHEMA_VERSION, "kind": kind, **asdict(record)}, sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._path(kind, record.id))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        self._sync_dir()

    def _sync_dir(self) -> None:
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def remove(self, kind: Literal["volume", "snapshot"], object_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(kind, object_id).unlink()
        self._sync_dir()

    def exists(self, kind: Literal["volume", "snapshot"], object_id: str) -> bool:
        return self._path(kind, object_id).exists()

    def _load(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SidecarError(f"{path}: unreadable: {exc}") from exc
        if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
            schema = data.get("schema") if isinstance(data, dict) else "?"
            raise SidecarError(f"{path}: unknown schema {schema}")
        data.pop("schema")
        data.pop("kind", None)
        return data

    def load_all(self) -> tuple[list[VolumeRecord], list[SnapshotRecord], list[str]]:
        """Every sidecar in the folder, plus messages about files that could not be read."""
        volumes: list[VolumeRecord] = []
        snapshots: list[SnapshotRecord] = []
        problems: list[str] = []
        for path in sorted(self.directory.glob("*.json")):
            if path.name.startswith(".tmp-"):
                # A write that crashed before its rename: never visible, safe to drop.
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            try:
                data = self._load(path)
                if path.name.endswith(".volume.json"):
                    volumes.append(VolumeRecord(**data))
                elif path.name.endswith(".snapshot.json"):
                    snapshots.append(SnapshotRecord(**data))
            except (SidecarError, TypeError) as exc:
                problems.append(str(exc))
        return volumes, snapshots, problems
