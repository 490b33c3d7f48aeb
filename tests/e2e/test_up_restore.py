"""A restored ``ironpool up`` on real libvirt: it adopts the domain and volume of a Machine the backup
knows, and what was made after the backup is reported as orphaned, not deleted, for the grace period."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
from ironpool.api.fleet import MACHINE_POOL_LEASE_NAMESPACE
from ironpool.api.resources import resolve
from up_harness import UpInstance, wait_for

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, EVENTS = resolve("machines"), resolve("events")
MACHINE_POOLS, VOLUME_POOLS, LEASES = resolve("machinepools"), resolve("volumepools"), resolve("leases")


def declare(up: UpInstance, name: str) -> str:
    """A Machine with a data Volume, Running; its ``status.machineID``."""
    path = up.workdir / f"{name}.yaml"
    path.write_text(f"""\
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {{name: {name}-data, namespace: default}}
spec: {{volumeClassRef: {{name: fast}}, resources: {{storage: 64Mi}}}}
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
""")
    up.cli("apply", "-f", str(path))
    up.wait(f"machine/{name}", "jsonpath={.status.state}=Running")
    return str(up.client().get_raw(MACHINES, name, "default")["status"]["machineID"])


def ironpool(up: UpInstance, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ironpool.cli.main", *args], capture_output=True, text=True,
                          timeout=120, check=False, env=up.env)


def host_state(up: UpInstance) -> tuple[set[str], set[str]]:
    return set(up.domains()), set(up.storage_volumes())


def gc_message(up: UpInstance, pools: object, text: str) -> str:
    def found() -> str | None:
        pool = up.client().get_raw(pools, up.pool)  # type: ignore[arg-type]
        for c in (pool.get("status") or {}).get("conditions") or []:
            if c["type"] == "GarbageCollection" and text in c["message"]:
                return str(c["message"])
        return None

    return wait_for(found, 60, f"GarbageCollection condition saying {text!r}")


def relists(up: UpInstance, n: int) -> None:
    """``n`` more relists of the poollets (each heartbeat of the pool's Lease follows one)."""
    client = up.client()

    def beat() -> str:
        return str(client.get_raw(LEASES, up.pool, MACHINE_POOL_LEASE_NAMESPACE)["spec"]["renewTime"])

    for _ in range(n):
        last = beat()
        wait_for(lambda last=last: beat() != last, 30, "the next pool heartbeat")  # type: ignore[misc]


def test_restored_up_adopts_what_the_backup_knows_and_deletes_nothing(
        make_up: Callable[..., UpInstance]) -> None:
    up = make_up(extra_args=["--gc-grace", "600"])
    up.start()
    alpha_id = declare(up, "alpha")
    archive = up.workdir / "backup.tar.gz"
    done = ironpool(up, "backup", str(archive), "--data-dir", str(up.data_dir), "--include-secrets")
    assert done.returncode == 0, done.stdout + done.stderr
    declare(up, "beta")  # made after the backup
    before = host_state(up)
    assert len(before[0]) == 2 and len(before[1]) == 2, before
    up.stop()

    # The store and the secrets are lost; the host's machines, disks and volumes are not.
    for name in ("ironpool.db", "ironpool.db-wal", "ironpool.db-shm", "tokens.csv"):
        (up.data_dir / name).unlink(missing_ok=True)
    for path in (up.data_dir / "pki").iterdir():
        path.unlink()
    done = ironpool(up, "restore", str(archive), "--data-dir", str(up.data_dir), "--keep-host-state")
    assert done.returncode == 0, done.stdout + done.stderr
    up.start()

    # alpha is adopted: Running on the same runtime machine, no new domain.
    client = up.client()
    wait_for(lambda: client.get_raw(MACHINES, "alpha", "default").get("status", {}).get("state") == "Running",
             120, "alpha Running again")
    assert client.get_raw(MACHINES, "alpha", "default")["status"]["machineID"] == alpha_id
    assert [m["metadata"]["name"] for m in client.list_raw(MACHINES, "default").items] == ["alpha"]
    # beta's domain and volume are this installation's orphans now: reported, with the backup's time ...
    message = gc_message(up, MACHINE_POOLS, "1 orphaned machine(s) wait out the 600s grace period")
    gc_message(up, VOLUME_POOLS, "1 orphaned volume(s) wait out the 600s grace period")
    orphan_events = [e["message"] for e in client.list_raw(EVENTS, "default").items
                     if e["reason"] == "OrphanFound"]
    assert any("restored from a backup taken at" in m and "beta" in m for m in orphan_events), orphan_events
    log = (up.data_dir / "logs" / "ironpool.log").read_text()
    assert "restored from a backup taken at" in log and "is orphaned" in log
    # ... and not deleted: after several relists libvirt holds exactly what it held before.
    relists(up, 3)
    assert host_state(up) == before, message
    assert up.process is not None and up.process.poll() is None
