"""Consistent copies of a store while it serves: SQLite's online backup and etcd's snapshot.

* SQLite: :func:`sqlite_snapshot` copies the live file with SQLite's backup API in one step, inside
  one read transaction. In WAL mode a reader never blocks the writer and sees exactly the writes
  committed before it began, so the copy holds every write acknowledged before the snapshot started
  and none half-done, while the apiserver (another process) keeps writing.
* etcd: :func:`etcd_snapshot` streams ``Maintenance.Snapshot`` (what ``etcdctl snapshot save`` does)
  from one member: the whole keyspace at one revision. :func:`etcd_restore` turns such a file into a
  new member's data dir with ``etcdctl snapshot restore`` (Debian's ``etcd-client``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ironpool.store.etcd_client import LONG_CALL_TIMEOUT, EtcdConnection, EtcdTls, rpc
from ironpool.store.interface import StoreError
from ironpool.store.schema import check_not_newer


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot holds: its store's revision, schema version and (SQLite) object count."""

    revision: int
    schema_version: int
    objects: int = -1  # unknown for etcd (the snapshot is the whole keyspace)


def _private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 (a snapshot holds Secrets)."""
    path.unlink(missing_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def sqlite_info(path: Path) -> SnapshotInfo:
    """Revision, schema version and object count of a SQLite store file (opened read-only)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        (rev,) = db.execute("SELECT MAX(rev) FROM events").fetchone()
        row = db.execute("SELECT value FROM meta WHERE name='compacted'").fetchone()
        (objects,) = db.execute("SELECT count(*) FROM objects").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not an ironpool SQLite store: {exc}") from None
    finally:
        db.close()
    return SnapshotInfo(max(int(rev or 0), int(row[0]) if row else 0), int(version), int(objects))


def sqlite_snapshot(source: Path, target: Path) -> SnapshotInfo:
    """Copy the live store file ``source`` to ``target`` (a single self-contained file, mode 0600)."""
    if not source.is_file():
        raise StoreError(f"{source}: no such store file")
    _private_file(target)
    src = sqlite3.connect(source, timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            # pages=-1: the whole file in one step, so one read transaction sees one state of it.
            src.backup(dst, pages=-1)
            # The copy need not be in WAL mode: one file, no -wal or -shm beside it.
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    except sqlite3.Error as exc:
        target.unlink(missing_ok=True)
        raise StoreError(f"{source}: backup failed: {exc}") from None
    finally:
        src.close()
    return sqlite_info(target)


async def etcd_snapshot(endpoints: list[str], tls: EtcdTls | None, target: Path) -> SnapshotInfo:
    """Stream an etcd member's snapshot into ``target`` (mode 0600); its revision as etcd reports it."""
    m = rpc()
    conn = EtcdConnection(endpoints, tls)
    _private_file(target)
    digest = hashlib.sha256()

    async def attempt(_index: int, stub: Any) -> int:
        revision = 0
        with open(target, "wb") as out:  # a retry on another member starts the file again
            async for chunk in stub.Snapshot(m.SnapshotRequest(), timeout=LONG_CALL_TIMEOUT * 30):
                revision = revision or int(chunk.header.revision)
                out.write(chunk.blob)
                digest.update(chunk.blob)
        return revision

    try:
        revision = await conn.call("snapshot", attempt, conn.maintenance)
    except StoreError:
        target.unlink(missing_ok=True)
        raise
    finally:
        await conn.close()
    if target.stat().st_size == 0:
        raise StoreError(f"etcd {','.join(endpoints)}: the snapshot is empty")
    return SnapshotInfo(revision, -1)


@dataclass(frozen=True)
class EtcdMemberSpec:
    """The member a restored snapshot starts as (``etcdctl snapshot restore``'s flags)."""

    name: str = "default"
    initial_cluster: str = "default=http://localhost:2380"
    peer_url: str = "http://localhost:2380"
    cluster_token: str = "etcd-cluster"


def etcd_restore(snapshot: Path, data_dir: Path, member: EtcdMemberSpec) -> None:
    """A new etcd member data dir ``data_dir`` from ``snapshot``; start etcd with ``--data-dir`` there
    and the same name, peer URL and initial cluster (restore each member of a cluster the same way)."""
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        raise StoreError("restoring an etcd snapshot needs etcdctl (Debian package etcd-client)")
    argv = [etcdctl, "snapshot", "restore", str(snapshot), "--data-dir", str(data_dir),
            "--name", member.name, "--initial-cluster", member.initial_cluster,
            "--initial-advertise-peer-urls", member.peer_url,
            "--initial-cluster-token", member.cluster_token]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "ETCDCTL_API": "3"},
                          check=False, timeout=300)
    if done.returncode != 0:
        raise StoreError(f"etcdctl snapshot restore failed: {(done.stderr or done.stdout).strip()[-2000:]}")


def check_restorable(what: str, info: SnapshotInfo) -> None:
    """Refuse a snapshot of a store newer than this code knows (SchemaTooNew names both versions)."""
    check_not_newer(what, info.schema_version)
