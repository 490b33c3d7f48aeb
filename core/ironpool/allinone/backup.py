"""``ironpool backup`` and ``ironpool restore``: a consistent copy of the store, taken while it serves,
and a new data dir made from it.

A backup is one gzip-compressed tar file, mode 0600 (it holds the Secrets of the API, and with
``--include-secrets`` the installation's admin tokens and CA key):

- ``ironpool-backup.json``: what it is (:class:`Manifest`);
- ``ironpool.db`` (SQLite, the online backup of the live file) or ``etcd.snapshot`` (etcd's snapshot);
- ``secrets/tokens.csv`` and ``secrets/pki/*`` with ``--include-secrets`` (an ``ironpool up`` data dir).

The installation's identity, its cluster uid, is the uid of its ``kube-system`` namespace and thus
always in the store: a restored installation knows the domains and volumes its poollets labelled.

A restore writes into a new, empty data dir and records ``restore.json`` there (when the backup was
taken, when it was restored), which ``ironpool up`` reads: its collectors then say, with each orphan
they report, that it may have been made after the backup (see :mod:`ironpool.poollet.collector`).
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import os
import shutil
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ironpool import __version__
from ironpool.allinone.datadir import DataDir, DataDirError
from ironpool.store.etcd_client import EtcdTls
from ironpool.store.schema import SCHEMA_VERSION
from ironpool.store.snapshot import (
    EtcdMemberSpec,
    check_restorable,
    etcd_restore,
    etcd_snapshot,
    sqlite_info,
    sqlite_snapshot,
)

MANIFEST = "ironpool-backup.json"
FORMAT = 1
RESTORE_RECORD = "restore.json"


class BackupError(Exception):
    """A backup or restore cannot be done; the message names what and why."""


@dataclass(frozen=True)
class Manifest:
    """``ironpool-backup.json``: the kind of store, when, at which revision and schema version."""

    format: int
    store: str  # "sqlite" or "etcd"
    created_at: str  # RFC 3339, UTC
    revision: int
    schema_version: int  # -1: not known (an etcd keyspace without ironpool's version key)
    ironpool_version: str
    secrets: bool
    source: str
    objects: int = -1

    @classmethod
    def parse(cls, raw: bytes, where: str) -> Manifest:
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT:
                raise BackupError(f"{where}: backup format {data.get('format')!r} is not {FORMAT}, "
                                  "the one this ironpool reads")
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (ValueError, TypeError, AttributeError) as exc:
            raise BackupError(f"{where}: {MANIFEST} is unreadable: {exc}") from None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o600) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _secret_files(dirs: DataDir) -> list[tuple[str, Path]]:
    """The installation's tokens and PKI (CA, serving certificate) as ``(archive name, path)``."""
    if not dirs.tokens.is_file():
        raise BackupError(f"--include-secrets: {dirs.tokens} does not exist (is {dirs.root} an "
                          "`ironpool up` data dir?)")
    files = [("secrets/tokens.csv", dirs.tokens)]
    if dirs.pki.is_dir():
        files += [(f"secrets/pki/{p.name}", p) for p in sorted(dirs.pki.iterdir())
                  if p.is_file() and not p.name.endswith(".tmp")]
    return files


def _write_archive(target: Path, manifest: Manifest, store_file: tuple[str, Path],
                   secrets: list[tuple[str, Path]]) -> None:
    """The archive, written beside ``target`` first and renamed over it when whole."""
    tmp = target.with_name(f".{target.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz", compresslevel=6) as tar:
            _add_bytes(tar, MANIFEST, json.dumps(asdict(manifest), indent=2).encode() + b"\n", 0o644)
            tar.add(store_file[1], store_file[0])
            for name, path in secrets:
                tar.add(path, name)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def backup_sqlite(target: Path, db: Path, *, secrets_of: DataDir | None = None) -> Manifest:
    """Back the SQLite store ``db`` up into ``target`` while it serves; with ``secrets_of``, also
    that data dir's tokens and PKI."""
    secrets = _secret_files(secrets_of) if secrets_of is not None else []
    with tempfile.TemporaryDirectory(prefix="ironpool-backup-", dir=target.parent) as scratch:
        copy = Path(scratch) / "ironpool.db"
        try:
            info = sqlite_snapshot(db, copy)
        except Exception as exc:
            raise BackupError(str(exc)) from None
        manifest = Manifest(FORMAT, "sqlite", _now(), info.revision, info.schema_version, __version__,
                            bool(secrets), str(db.absolute()), info.objects)
        _write_archive(target, manifest, ("ironpool.db", copy), secrets)
    return manifest


async def backup_etcd(target: Path, endpoints: list[str], prefix: str, tls: EtcdTls | None) -> Manifest:
    """Back an etcd cluster up into ``target``: one member's snapshot of the whole keyspace, with the
    schema version recorded under ``prefix``."""
    from ironpool.store.etcd_client import EtcdConnection
    from ironpool.store.etcd_schema import SCHEMA_KEY, read_version

    where = f"etcd://{','.join(endpoints)}{prefix}"
    conn = EtcdConnection(endpoints, tls)
    try:
        version, mod = await read_version(conn, prefix.encode() + SCHEMA_KEY, where)
    except Exception as exc:
        raise BackupError(f"{where}: {exc}") from None
    finally:
        await conn.close()
    with tempfile.TemporaryDirectory(prefix="ironpool-backup-", dir=target.parent) as scratch:
        copy = Path(scratch) / "etcd.snapshot"
        try:
            info = await etcd_snapshot(endpoints, tls, copy)
        except Exception as exc:
            raise BackupError(f"{where}: {exc}") from None
        manifest = Manifest(FORMAT, "etcd", _now(), info.revision, version if mod else -1, __version__,
                            False, where)
        await asyncio.to_thread(_write_archive, target, manifest, ("etcd.snapshot", copy), [])
    return manifest


def read_manifest(archive: Path) -> Manifest:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(MANIFEST)
            if member is None:
                raise KeyError(MANIFEST)
            return Manifest.parse(member.read(), str(archive))
    except FileNotFoundError:
        raise BackupError(f"{archive}: no such file") from None
    except (tarfile.TarError, KeyError, OSError) as exc:
        raise BackupError(f"{archive}: not an ironpool backup ({exc})") from None


def _require_empty(target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"--data-dir {target}: it is not empty; restore into a new or empty "
                          "directory (a restore never overwrites a data dir), or, to put a lost store "
                          "back beside this host's machines and volumes, use --keep-host-state")


def _require_no_store(dirs: DataDir, names: list[str]) -> None:
    """A data dir whose store (and, if the backup has them, secrets) is gone, its host parts kept."""
    if not dirs.root.is_dir():
        raise BackupError(f"--data-dir {dirs.root}: --keep-host-state needs the existing data dir")
    for name in names:
        path = dirs.root / name
        if path.exists():
            raise BackupError(f"--data-dir {dirs.root}: {path} exists; a restore never overwrites a "
                              "store or its secrets: move it away first")


def _extract(tar: tarfile.TarFile, name: str, to: Path, mode: int) -> None:
    member = tar.extractfile(name)
    if member is None:
        raise BackupError(f"{name} is missing from the backup")
    fd = os.open(to, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(member, out)


def restore(archive: Path, target: Path, member: EtcdMemberSpec | None = None, *,
            keep_host_state: bool = False) -> Manifest:
    """Bring ``archive`` back into the new data dir ``target``: an ``ironpool up`` data dir (SQLite),
    or an etcd member's data dir (etcd). Refuses a target that is not empty, and a backup of a newer
    schema than this ironpool knows.

    ``keep_host_state``: ``target`` is the existing data dir of an ``ironpool up`` whose store was
    lost; its host parts (the machine runtime's disks, the storage pool's folder, images) stay, so the
    restored installation adopts the domains and volumes there. Nothing that exists is overwritten."""
    manifest = read_manifest(archive)
    if keep_host_state and manifest.store != "sqlite":
        raise BackupError("--keep-host-state applies to an `ironpool up` (SQLite) backup; an etcd "
                          "member is restored into a new data dir")
    with tarfile.open(archive, "r:gz") as tar:
        secrets = [m.name for m in tar.getmembers() if m.name.startswith("secrets/") and m.isfile()]
    if keep_host_state:
        names = ["ironpool.db", "ironpool.db-wal", "ironpool.db-shm", RESTORE_RECORD]
        _require_no_store(DataDir(target.absolute()), names + [n.removeprefix("secrets/") for n in secrets])
    else:
        _require_empty(target)
    check_restorable(str(archive), _as_info(manifest))
    with tarfile.open(archive, "r:gz") as tar:
        if manifest.store == "sqlite":
            _restore_sqlite(tar, manifest, archive, target)
        elif manifest.store == "etcd":
            with tempfile.TemporaryDirectory(prefix="ironpool-restore-") as scratch:
                snapshot = Path(scratch) / "etcd.snapshot"
                _extract(tar, "etcd.snapshot", snapshot, 0o600)
                if target.exists():
                    target.rmdir()  # etcdctl makes the folder itself and refuses an existing one
                try:
                    etcd_restore(snapshot, target, member or EtcdMemberSpec())
                except Exception as exc:
                    raise BackupError(str(exc)) from None
        else:
            raise BackupError(f"{archive}: unknown store kind {manifest.store!r}")
    return manifest


def _as_info(manifest: Manifest) -> Any:
    from ironpool.store.snapshot import SnapshotInfo

    return SnapshotInfo(manifest.revision, manifest.schema_version, manifest.objects)


def _restore_sqlite(tar: tarfile.TarFile, manifest: Manifest, archive: Path, target: Path) -> None:
    dirs = DataDir(target.absolute())
    try:
        dirs.prepare()
    except DataDirError as exc:
        raise BackupError(str(exc)) from None
    _extract(tar, "ironpool.db", dirs.db, 0o600)
    info = sqlite_info(dirs.db)
    if info.schema_version > SCHEMA_VERSION:
        check_restorable(str(archive), info)
    if manifest.secrets:
        for member in tar.getmembers():
            name = member.name
            if not name.startswith("secrets/") or not member.isfile():
                continue
            rel = Path(name.removeprefix("secrets/"))
            if rel.is_absolute() or ".." in rel.parts or len(rel.parts) > 2:
                raise BackupError(f"{archive}: unexpected member {name!r}")
            _extract(tar, name, dirs.root / rel, 0o600)
    record = {"restoredAt": _now(), "backupCreatedAt": manifest.created_at, "backup": str(archive.absolute()),
              "revision": manifest.revision, "secrets": manifest.secrets}
    (dirs.root / RESTORE_RECORD).write_text(json.dumps(record, indent=2) + "\n")


def read_restore_record(dirs: DataDir) -> dict[str, Any] | None:
    """``restore.json`` of a restored data dir, or None."""
    try:
        data = json.loads((dirs.root / RESTORE_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
