"""Two installations on one libvirtd never touch each other's machines and volumes (real libvirt).

Both use what a user gets by default: the pool named after the host, the storage pool named after the
data dir. Restarts, a lost database and a database restored from a backup delete nothing that is not
the installation's own orphan, and ``ironpool down --purge`` removes one installation and nothing else.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import libvirt
import pytest
from ironpool.api.fleet import MACHINE_POOL_LEASE_NAMESPACE
from ironpool.api.resources import resolve
from up_harness import UpInstance, wait_for

from tests.helpers.runtimes import LIBVIRT_URI

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, VOLUMES = resolve("machines"), resolve("volumes")
MACHINE_POOLS, VOLUME_POOLS, LEASES = resolve("machinepools"), resolve("volumepools"), resolve("leases")


def manifest(name: str) -> str:
    return f"""\
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {{name: {name}-data, namespace: default}}
spec:
  volumeClassRef: {{name: fast}}
  resources: {{storage: 64Mi}}
---
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {{name: {name}, namespace: default}}
spec:
  machineClassRef: {{name: x-small}}
  power: "On"
  volumes:
    - {{name: root, localDisk: {{image: tiny, sizeLimit: 64Mi}}}}
    - {{name: data, volumeRef: {{name: {name}-data}}}}
"""


def deploy(up: UpInstance, name: str) -> None:
    path = up.workdir / f"{name}.yaml"
    path.write_text(manifest(name))
    up.cli("apply", "-f", str(path))
    up.wait(f"machine/{name}", "jsonpath={.status.state}=Running")


def host_state(up: UpInstance) -> tuple[set[str], set[str]]:
    """What libvirt holds for ``up``: its domains and the volumes in its storage pool."""
    return set(up.domains()), set(up.storage_volumes())


def gc_condition(up: UpInstance, pools: object) -> dict[str, str] | None:
    pool = up.client().get_raw(pools, up.pool)  # type: ignore[arg-type]
    return next((c for c in (pool.get("status") or {}).get("conditions") or []
                 if c["type"] == "GarbageCollection"), None)


def wait_gc_message(up: UpInstance, pools: object, text: str) -> dict[str, str]:
    def found() -> dict[str, str] | None:
        c = gc_condition(up, pools)
        return c if c is not None and text in c["message"] else None

    return wait_for(found, 30, f"GarbageCollection condition saying {text!r}")


def relists(up: UpInstance, n: int) -> None:
    """Let the poollets relist their runtimes ``n`` more times (``--relist-period`` is 2 s in ``up``):
    observed through the pool's heartbeat Lease, renewed as often (``--heartbeat-interval`` 2 s)."""
    client = up.client()

    def beat() -> str:
        lease = client.get_raw(LEASES, up.pool, MACHINE_POOL_LEASE_NAMESPACE)
        return str(lease["spec"]["renewTime"])

    for _ in range(n):
        last = beat()
        wait_for(lambda last=last: beat() != last, 30, "the next pool heartbeat")  # type: ignore[misc]


def down(up: UpInstance, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ironpool.cli.main", "down", "--data-dir", str(up.data_dir),
                           *args], capture_output=True, text=True, timeout=120, check=False, env=up.env)


def storage_pool_exists(name: str) -> bool:
    conn = libvirt.open(LIBVIRT_URI)
    try:
        return name in conn.listStoragePools() + conn.listDefinedStoragePools()
    finally:
        conn.close()


def test_two_installations_on_one_libvirtd_keep_to_their_own(make_up: Callable[..., UpInstance]) -> None:
    a = make_up(default_names=True, extra_args=["--gc-grace", "0"])
    b = make_up(default_names=True, extra_args=["--gc-grace", "0"])
    assert a.pool == b.pool and a.storage_pool != b.storage_pool
    a.start()
    backup = a.workdir / "backup.db"  # a database from before a's machine existed, for the restore below
    with sqlite3.connect(a.data_dir / "ironpool.db") as src, sqlite3.connect(backup) as dst:
        src.backup(dst)
    deploy(a, "alpha")
    b.start()
    deploy(b, "beta")
    a_host, b_host = host_state(a), host_state(b)
    assert len(a_host[0]) == 1 and len(b_host[0]) == 1 and a_host[0] != b_host[0]
    assert len(a_host[1]) == 1 and len(b_host[1]) == 1
    assert [m["metadata"]["name"] for m in a.client().list_raw(MACHINES, "default").items] == ["alpha"]
    assert [m["metadata"]["name"] for m in b.client().list_raw(MACHINES, "default").items] == ["beta"]

    # b loses its database and starts afresh: beta's domain and volume are another installation's
    # now (another cluster uid). With no grace period at all, it still deletes nothing and says so.
    b.stop()
    for suffix in ("", "-wal", "-shm"):
        (b.data_dir / f"ironpool.db{suffix}").unlink(missing_ok=True)
    b.start()
    wait_gc_message(b, MACHINE_POOLS, "1 machine(s) of other installations or pools left alone")
    wait_gc_message(b, VOLUME_POOLS, "1 volume(s) of other installations or pools left alone")
    relists(b, 3)
    assert host_state(b) == b_host and host_state(a) == a_host
    # ... and a, restarted beside it, touches nothing of b's either.
    a.stop()
    a.start()
    relists(a, 3)
    assert host_state(a) == a_host and host_state(b) == b_host
    assert a.process is not None and a.process.poll() is None
    assert b.process is not None and b.process.poll() is None

    # a's database restored from the backup: alpha is a's own orphan now. Inside the grace period it
    # is only reported ...
    a.stop()
    (a.data_dir / "ironpool.db").write_bytes(backup.read_bytes())
    for suffix in ("-wal", "-shm"):
        (a.data_dir / f"ironpool.db{suffix}").unlink(missing_ok=True)
    a.extra_args = ["--gc-grace", "600"]
    a.start()
    wait_gc_message(a, MACHINE_POOLS, "1 orphaned machine(s) wait out the 600s grace period")
    wait_gc_message(a, VOLUME_POOLS, "1 orphaned volume(s) wait out the 600s grace period")
    relists(a, 3)
    assert host_state(a) == a_host
    # ... and collected once it is over (the volume as soon as its domain let go of it).
    a.stop()
    a.extra_args = ["--gc-grace", "0"]
    a.start()
    wait_for(lambda: host_state(a) == (set(), set()), 90, "a's orphans collected")
    wait_gc_message(a, VOLUME_POOLS, "1 collected since start")
    assert a.process is not None and a.process.poll() is None
    assert host_state(b) == b_host

    # down --purge removes b entirely: its process, domain, volume, storage pool and data dir.
    proc = down(b, "--purge", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"storage pool {b.storage_pool}" in proc.stdout and "purged." in proc.stdout
    assert b.process is not None and b.process.wait(5) == 0
    assert b.domains() == {} and not storage_pool_exists(b.storage_pool) and not b.data_dir.exists()
    assert f"removed client config {b.config_path}" in proc.stdout and not b.config_path.exists()
    # a is untouched, and stops cleanly without purging.
    assert a.process.poll() is None and storage_pool_exists(a.storage_pool)
    proc = down(a)
    assert proc.returncode == 0 and "stopped ironpool up" in proc.stdout, proc.stdout + proc.stderr
    assert a.process.wait(5) == 0 and storage_pool_exists(a.storage_pool) and a.data_dir.exists()
    assert a.config_path.exists()


def test_storage_pool_of_another_installation_is_refused(make_up: Callable[..., UpInstance],
                                                         tmp_path: Path) -> None:
    a = make_up()
    a.start()
    b = make_up(extra_args=["--storage-pool", a.storage_pool])
    b.storage_pool = a.storage_pool
    with pytest.raises(AssertionError) as failed:
        b.start()
    message = str(failed.value)
    assert f"storage pool {a.storage_pool!r} belongs to another installation" in message
    assert str(a.data_dir) in message and "--share-storage-pool" in message
    assert a.process is not None and a.process.poll() is None
    b.storage_pool = f"{a.storage_pool}-unused"  # b's cleanup must not remove a's pool
