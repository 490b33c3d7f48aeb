"""Upgrades keep data: a data dir of the previous release opens and serves its objects; data of a newer
schema is refused naming both versions (SQLite files and etcd keyspaces, real apiserver processes)."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.store.etcd import EtcdStore
from ironpool.store.etcd_schema import SCHEMA_KEY
from ironpool.store.schema import SCHEMA_VERSION, SchemaInvalid, SchemaTooNew
from ironpool.store.sqlite import SQLiteStore

from tests.conftest import start_apiserver, stop_apiserver
from tests.helpers.etcd import EtcdCluster
from tests.helpers.net import free_port

RELEASE_0 = Path(__file__).parent / "datadirs" / "release-0"


def user_version(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def refused(store_url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tokens = tmp_path / "refused-tokens.csv"
    tokens.write_text(f'{secrets.token_hex(8)},admin,1,"system:masters"\n')
    return subprocess.run([sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", store_url,
                           "--listen", f"127.0.0.1:{free_port()}", "--token-file", str(tokens)],
                          capture_output=True, text=True, timeout=60, check=False)


def test_release_0_data_dir_opens_and_serves_its_objects(tmp_path: Path) -> None:
    db = tmp_path / "ironpool.db"
    shutil.copy(RELEASE_0 / "ironpool.db", db)
    assert user_version(db) == 0  # the fixture predates schema versions
    made: list[dict[str, Any]] = json.loads((RELEASE_0 / "objects.json").read_text())
    server = start_apiserver(tmp_path, db_path=db)
    try:
        with httpx.Client(base_url=server.url, headers=server.headers()) as client:
            for entry in made:
                before = entry["object"]
                got = client.get(entry["path"])
                assert got.status_code == 200, (entry["path"], got.text)
                now = got.json()
                for field in ("uid", "name", "namespace", "creationTimestamp", "labels"):
                    assert now["metadata"].get(field) == before["metadata"].get(field), (entry["path"], field)
                assert now.get("spec") == before.get("spec"), entry["path"]
            # It is writable, and revisions go on from the old file's.
            last = max(int(e["object"]["metadata"]["resourceVersion"]) for e in made)
            answer = client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": "after-upgrade"}})
            assert answer.status_code == 201, answer.text
            assert int(answer.json()["metadata"]["resourceVersion"]) > last
    finally:
        stop_apiserver(server)
    assert user_version(db) == SCHEMA_VERSION


def test_newer_sqlite_schema_is_refused_naming_both_versions(tmp_path: Path) -> None:
    db = tmp_path / "ironpool.db"
    shutil.copy(RELEASE_0 / "ironpool.db", db)
    newer = SCHEMA_VERSION + 1
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version={newer}")
        (objects,) = conn.execute("SELECT count(*) FROM objects").fetchone()
    done = refused(f"sqlite://{db}", tmp_path)
    assert done.returncode != 0
    assert f"schema version is {newer}" in done.stderr, done.stderr
    assert f"up to {SCHEMA_VERSION}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # Untouched: still the newer version, every object there.
    assert user_version(db) == newer
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM objects").fetchone()[0] == objects


def test_foreign_sqlite_file_is_refused_not_stamped(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE objects (id INTEGER PRIMARY KEY, body TEXT)")
    with pytest.raises(SchemaInvalid, match="table objects has columns"):
        SQLiteStore(str(db))
    assert user_version(db) == 0


def _put(cluster: EtcdCluster, key: bytes, value: bytes) -> None:
    import grpc
    from aetcd import rpc

    with grpc.insecure_channel(cluster.members[0].endpoint) as channel:
        rpc.KVStub(channel).Put(rpc.PutRequest(key=key, value=value), timeout=5)


def _get(cluster: EtcdCluster, key: bytes) -> bytes | None:
    import grpc
    from aetcd import rpc

    with grpc.insecure_channel(cluster.members[0].endpoint) as channel:
        resp = rpc.KVStub(channel).Range(rpc.RangeRequest(key=key), timeout=5)
    return bytes(resp.kvs[0].value) if resp.kvs else None


def test_etcd_schema_recorded_migrated_and_refused(etcd_cluster: EtcdCluster, tmp_path: Path) -> None:
    fresh, old, newer = (f"/schema-{secrets.token_hex(4)}" for _ in range(3))

    async def scenario() -> None:
        # A new keyspace gets the current version with its first call.
        store = EtcdStore(f"{etcd_cluster.endpoints}{fresh}")
        try:
            await store.create("/registry/namespaces/a", {"metadata": {"name": "a"}})
        finally:
            await store.close()
        assert _get(etcd_cluster, fresh.encode() + SCHEMA_KEY) == str(SCHEMA_VERSION).encode()

        # Release 0's keys (no version key): read as they are, the version recorded.
        _put(etcd_cluster, f"{old}/registry/namespaces/b".encode(), b'{"metadata":{"name":"b"}}')
        store = EtcdStore(f"{etcd_cluster.endpoints}{old}")
        try:
            doc = await store.get("/registry/namespaces/b")
            assert doc is not None and doc["metadata"]["name"] == "b"
        finally:
            await store.close()
        assert _get(etcd_cluster, old.encode() + SCHEMA_KEY) == str(SCHEMA_VERSION).encode()

        # A newer release's keys: refused before any read or write.
        _put(etcd_cluster, newer.encode() + SCHEMA_KEY, str(SCHEMA_VERSION + 1).encode())
        store = EtcdStore(f"{etcd_cluster.endpoints}{newer}")
        try:
            with pytest.raises(SchemaTooNew, match=f"schema version is {SCHEMA_VERSION + 1}"):
                await store.create("/registry/namespaces/c", {"metadata": {"name": "c"}})
        finally:
            await store.close()
        assert _get(etcd_cluster, f"{newer}/registry/namespaces/c".encode()) is None

    asyncio.run(scenario())
    done = refused(etcd_cluster.url(newer), tmp_path)
    assert done.returncode != 0
    assert f"schema version is {SCHEMA_VERSION + 1}" in done.stderr, done.stderr
    assert f"up to {SCHEMA_VERSION}" in done.stderr and "Traceback" not in done.stderr
