"""``ironpool backup`` while a client creates Machines, ``ironpool restore`` into a new data dir, and an
apiserver on the restored store: every object acknowledged before the backup began is there (real
apiserver, etcd and CLI processes; SQLite and etcd)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.etcd import EtcdCluster, EtcdMember, etcd_cluster
from tests.helpers.net import free_port

RELEASE_0 = Path(__file__).parent / "datadirs" / "release-0"
CLASSES = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"
MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"


def ironpool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ironpool.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def machine(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"machineClassRef": {"name": "x-small"},
                     "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "64Mi"}}]}}


class Creator:
    """Creates ``total`` Machines from ``writers`` concurrent clients; runs ``backup`` (a command line)
    once ``at`` of them are acknowledged, while the writers go on."""

    def __init__(self, server: ApiServer, total: int, writers: int, at: int) -> None:
        self.server, self.total, self.writers, self.at = server, total, writers, at
        self.acknowledged: dict[str, str] = {}  # name -> uid
        self.before_backup: dict[str, str] = {}
        self.during_backup = 0
        self.backup_output = ""
        self._reached = asyncio.Event()

    async def _write(self, client: httpx.AsyncClient, names: list[str]) -> None:
        for name in names:
            answer = await client.post(MACHINES, json=machine(name))
            assert answer.status_code == 201, answer.text
            self.acknowledged[name] = answer.json()["metadata"]["uid"]
            if len(self.acknowledged) >= self.at:
                self._reached.set()

    async def _backup(self, argv: list[str]) -> None:
        await self._reached.wait()
        self.before_backup = dict(self.acknowledged)  # acknowledged before the backup process started
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "ironpool.cli.main", *argv,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        self.backup_output = out.decode()
        self.during_backup = len(self.acknowledged) - len(self.before_backup)
        assert proc.returncode == 0, self.backup_output

    async def run(self, backup_argv: list[str]) -> None:
        names = [f"m-{i:04d}" for i in range(self.total)]
        async with httpx.AsyncClient(base_url=self.server.url, headers=self.server.headers(),
                                     timeout=60) as client:
            await asyncio.gather(self._backup(backup_argv),
                                 *(self._write(client, names[w::self.writers]) for w in range(self.writers)))


def restored_machines(server: ApiServer) -> dict[str, str]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
        items = client.get(MACHINES).json()["items"]
    return {m["metadata"]["name"]: m["metadata"]["uid"] for m in items}


def seed_class(server: ApiServer) -> None:
    body = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "x-small"}, "capabilities": {"cpu": "1", "memory": "256Mi"}}
    assert httpx.post(f"{server.url}{CLASSES}", json=body, headers=server.headers()).status_code == 201


def check_restored(creator: Creator, restored: dict[str, str]) -> None:
    missing = set(creator.before_backup) - set(restored)
    assert not missing, f"{len(missing)} acknowledged before the backup are missing: {sorted(missing)[:5]}"
    for name, uid in creator.before_backup.items():
        assert restored[name] == uid, name
    # Nothing the client never created, and every restored one as it was acknowledged.
    assert set(restored) <= {f"m-{i:04d}" for i in range(creator.total)}
    for name, uid in restored.items():
        assert creator.acknowledged[name] == uid, name


@pytest.mark.slow
def test_sqlite_backup_while_500_machines_are_created(tmp_path: Path) -> None:
    server = start_apiserver(tmp_path)
    archive = tmp_path / "backup.tar.gz"
    try:
        seed_class(server)
        creator = Creator(server, total=500, writers=8, at=200)
        asyncio.run(creator.run(["backup", str(archive), "--store", f"sqlite://{server.db_path}"]))
        assert len(creator.acknowledged) == 500
    finally:
        stop_apiserver(server)
    print(f"backup: {creator.backup_output.strip()}; {len(creator.before_backup)} acknowledged before it, "
          f"{creator.during_backup} while it ran")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600  # it holds the API's Secrets

    target = tmp_path / "restored"
    done = ironpool("restore", str(archive), "--data-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert "ironpool up --data-dir" in done.stdout
    again = start_apiserver(target, db_path=target / "ironpool.db")
    try:
        check_restored(creator, restored_machines(again))
    finally:
        stop_apiserver(again)


def test_restore_keeps_secrets_and_refuses_a_non_empty_data_dir(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(RELEASE_0, source)
    (source / "pki").mkdir(mode=0o700)
    for name in ("ca.crt", "ca.key"):
        fd = os.open(source / "pki" / name, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, f"{name} of the installation\n".encode())
        os.close(fd)
    archive = tmp_path / "with-secrets.tar.gz"
    done = ironpool("backup", str(archive), "--data-dir", str(source), "--include-secrets")
    assert done.returncode == 0 and "secrets included" in done.stdout, done.stdout + done.stderr

    # A non-empty target is refused, naming it; nothing in it changes.
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    done = ironpool("restore", str(archive), "--data-dir", str(busy))
    assert done.returncode != 0 and f"--data-dir {busy}: it is not empty" in done.stderr, done.stderr
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]

    target = tmp_path / "new"
    done = ironpool("restore", str(archive), "--data-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert (target / "tokens.csv").read_text() == (source / "tokens.csv").read_text()
    for name in ("ca.crt", "ca.key"):
        assert (target / "pki" / name).read_bytes() == (source / "pki" / name).read_bytes()
        assert stat.S_IMODE((target / "pki" / name).stat().st_mode) == 0o600
    assert stat.S_IMODE((target / "ironpool.db").stat().st_mode) == 0o600
    record = json.loads((target / "restore.json").read_text())
    assert record["secrets"] is True and record["backupCreatedAt"]

    # --keep-host-state puts a lost store back into an existing data dir, and never over a store.
    done = ironpool("restore", str(archive), "--data-dir", str(target), "--keep-host-state")
    assert done.returncode != 0 and f"{target / 'ironpool.db'} exists" in done.stderr, done.stderr


@pytest.mark.slow
def test_etcd_backup_while_machines_are_created(tmp_path: Path) -> None:
    with etcd_cluster(1) as cluster:
        url = cluster.url("/backup-test")
        server = start_apiserver(tmp_path, store_url=url)
        archive = tmp_path / "etcd.tar.gz"
        try:
            seed_class(server)
            creator = Creator(server, total=200, writers=8, at=80)
            asyncio.run(creator.run(["backup", str(archive), "--store", url]))
        finally:
            stop_apiserver(server)
    manifest = creator.backup_output
    assert "etcd store" in manifest and "schema version 1" in manifest, manifest

    # A new single-member cluster from the snapshot, on other ports, and an apiserver on it.
    peer = free_port()
    target = tmp_path / "etcd-restored"
    done = ironpool("restore", str(archive), "--data-dir", str(target), "--etcd-name", "m0",
                    "--etcd-initial-cluster", f"m0=http://127.0.0.1:{peer}",
                    "--etcd-initial-advertise-peer-urls", f"http://127.0.0.1:{peer}")
    assert done.returncode == 0, done.stdout + done.stderr
    member = EtcdMember("m0", free_port(), peer, target, tmp_path / "etcd-restored.log")
    restored_cluster = EtcdCluster([member])
    restored_cluster.start(member)
    try:
        restored_cluster.wait_ready()
        (tmp_path / "second").mkdir()
        again = start_apiserver(tmp_path / "second", store_url=restored_cluster.url("/backup-test"))
        try:
            check_restored(creator, restored_machines(again))
        finally:
            stop_apiserver(again)
    finally:
        restored_cluster.stop()
