"""Fleet health and maintenance on the multi-host rig (``ironpool.rig``): 3 etcd members, 2 HTTPS
apiservers, 2 schedulers, the controller-manager and 3 hosts joined with ``ironpool join``, every part
its own process, every Machine a real QEMU domain booting the tiny image.

- A host whose processes stop (SIGSTOP: a hung host, which cannot fence itself): its pool turns
  Ready=Unknown and tainted unreachable after the grace period, its Machines are evicted (once its
  published fence time plus the margin has passed) and run on other hosts (same uid); when it
  resumes, the taint goes, the pool is Ready again and its stale domains are removed. (A host cut off
  but alive fences itself first: tests/fleet/test_fencing_fleet.py.)
- ``ironpool drain`` of a pool with 10 running Machines: cordoned, every Machine running on another
  pool (same uid) with its guest booted there (init line on the serial console), the pool empty and
  its domains gone.

The figures (seconds from the stop to the last Machine running elsewhere, drain time) are printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import libvirt
import pytest
from ironpool.rig.rig import Rig

from tests.e2e.up_harness import machine_domain
from tests.helpers.guests import boot_deadline
from tests.helpers.runtimes import LIBVIRT_URI
from tests.helpers.wait import wait_for
from tests.rig.harness import admin_http, started_rig

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.guests]

GRACE = 10.0
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
UNREACHABLE = "pool.ironpool.dev/unreachable"


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    """A rig whose hosts offer room for 12 x-small Machines each and fence themselves after 5 s, and
    whose controller-manager uses a grace period of a few seconds."""
    with started_rig(host_cpu="12", host_memory="8Gi", fence_after=5.0,
                     controller_manager_args=["--pool-monitor-grace-period", str(GRACE),
                                              "--fence-margin", "4",
                                              "--pool-monitor-period", "0.5", "--pool-eviction-rate", "10",
                                              "--pool-eviction-burst", "3"]) as rig:
        yield rig


def tiny_machine(name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"machineClassRef": {"name": "x-small"}, "power": "On", "machinePoolRef": {"name": pool},
                     "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "1Gi"}}]}}


def machines_path(name: str = "") -> str:
    return f"{COMPUTE}/namespaces/default/machines" + (f"/{name}" if name else "")


def get_machine(c: httpx.Client, name: str) -> dict[str, Any]:
    r = c.get(machines_path(name))
    assert r.status_code == 200, r.text
    return dict(r.json())


def pool_of(m: dict[str, Any]) -> str | None:
    return ((m.get("spec") or {}).get("machinePoolRef") or {}).get("name")


def state_of(m: dict[str, Any]) -> str | None:
    return (m.get("status") or {}).get("state")


def create_running(c: httpx.Client, names: list[str], pool: str) -> dict[str, dict[str, Any]]:
    """Create the Machines on ``pool`` and wait until each runs; their objects by name."""
    for name in names:
        r = c.post(machines_path(), json=tiny_machine(name, pool))
        assert r.status_code == 201, r.text

    def all_running() -> dict[str, dict[str, Any]] | None:
        found = {n: get_machine(c, n) for n in names}
        return found if all(state_of(m) == "Running" for m in found.values()) else None

    return wait_for(all_running, boot_deadline(len(names)), f"{len(names)} machines running on {pool}")


def pool_health(c: httpx.Client, name: str) -> tuple[str | None, list[str]]:
    """The pool's Ready status and its taint keys."""
    pool = c.get(f"{COMPUTE}/machinepools/{name}").json()
    ready = next((x.get("status") for x in pool["status"]["conditions"] if x["type"] == "Ready"), None)
    return ready, [t["key"] for t in pool["spec"].get("taints") or []]


def domain_active(conn: libvirt.virConnect, name: str) -> bool:
    try:
        return bool(conn.lookupByName(name).isActive())
    except libvirt.libvirtError:
        return False


def console_text(rig: Rig, m: dict[str, Any]) -> str:
    """What the guest of ``m`` printed on the serial console of its host so far."""
    iri_id, _ = machine_domain(m["status"]["machineID"])
    log = Path(rig.hosts[pool_of(m) or ""].data_dir) / "machine-runtime" / "machines" / iri_id / "console.log"
    return log.read_text(errors="replace") if log.exists() else ""


def booted(rig: Rig, m: dict[str, Any]) -> bool:
    """Whether the tiny guest of ``m`` printed its init line on the serial console of its host."""
    return "ironpool-tiny-image: init started" in console_text(rig, m)


def delete_all(c: httpx.Client, names: list[str]) -> None:
    for name in names:
        c.delete(machines_path(name))
    wait_for(lambda: all(c.get(machines_path(n)).status_code == 404 for n in names), 120, "machines deleted")


def test_a_stopped_host_loses_its_machines_to_others_and_cleans_up_when_it_returns(rig: Rig) -> None:
    conn = libvirt.open(LIBVIRT_URI)
    names = ["hf-1", "hf-2"]
    with admin_http(rig, timeout=30) as c:
        before = create_running(c, names, "host1")
        uids = {n: m["metadata"]["uid"] for n, m in before.items()}
        old_domains = {n: machine_domain(m["status"]["machineID"])[1] for n, m in before.items()}
        assert all(domain_active(conn, d) for d in old_domains.values())

        host = rig.hosts["host1"]
        stopped = time.monotonic()
        host.proc.signal(signal.SIGSTOP)
        try:
            def unknown_and_tainted() -> bool:
                ready, taints = pool_health(c, "host1")
                return ready == "Unknown" and UNREACHABLE in taints

            wait_for(unknown_and_tainted, GRACE + 30, "host1 Ready=Unknown and tainted unreachable")
            unknown_after = time.monotonic() - stopped

            def moved() -> dict[str, dict[str, Any]] | None:
                now = {n: get_machine(c, n) for n in names}
                ok = all(pool_of(m) not in (None, "host1") and state_of(m) == "Running" for m in now.values())
                return now if ok else None

            after = wait_for(moved, GRACE + boot_deadline(len(names)),
                             "the machines of host1 running on other hosts")
            moved_after = time.monotonic() - stopped
            for n, m in after.items():
                assert m["metadata"]["uid"] == uids[n]  # the same Machines, placed again
                assert domain_active(conn, machine_domain(m["status"]["machineID"])[1])
            wait_for(lambda: all(booted(rig, m) for m in after.values()), boot_deadline(len(after)),
                     "the moved guests booted on their new hosts")
            # host1 is stopped, not gone: its domains still run until it returns.
            assert all(domain_active(conn, d) for d in old_domains.values())
        finally:
            host.proc.signal(signal.SIGCONT)

        def back() -> bool:
            ready, taints = pool_health(c, "host1")
            return ready == "True" and UNREACHABLE not in taints

        wait_for(back, 60, "host1 Ready again without the unreachable taint")
        wait_for(lambda: not any(domain_active(conn, d) for d in old_domains.values()), 90,
                 "host1's stale domains removed")
        print(f"\nhost stop: Ready=Unknown after {unknown_after:.1f}s, machines running elsewhere after "
              f"{moved_after:.1f}s (grace {GRACE:.0f}s)")
        delete_all(c, names)
    conn.close()


def test_drain_moves_ten_running_machines_off_a_pool(rig: Rig) -> None:
    conn = libvirt.open(LIBVIRT_URI)
    names = [f"dr-{i}" for i in range(10)]
    with admin_http(rig, timeout=30) as c:
        before = create_running(c, names, "host2")
        old_domains = [machine_domain(m["status"]["machineID"])[1] for m in before.values()]
        started = time.monotonic()
        drained = subprocess.run(
            [sys.executable, "-m", "ironpool.cli.main", "drain", "host2", "--timeout", "240", "-o", "json"],
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "IRONPOOL_CONFIG": str(rig.admin_config)})
        seconds = time.monotonic() - started
        assert drained.returncode == 0, drained.stdout + drained.stderr
        report = json.loads(drained.stdout)
        assert report["complete"] and len(report["machines"]) == 10
        assert "machinepool/host2 cordoned" in drained.stderr
        for m in report["machines"]:
            assert m["result"] == "moved" and m["pool"] in ("host1", "host3") and m["state"] == "Running", m
        moved = {name: get_machine(c, name) for name in names}
        for name, m in before.items():
            now = moved[name]
            assert now["metadata"]["uid"] == m["metadata"]["uid"] and pool_of(now) != "host2"
            assert domain_active(conn, machine_domain(now["status"]["machineID"])[1])
        try:
            wait_for(lambda: all(booted(rig, m) for m in moved.values()), boot_deadline(len(moved)),
                     "the 10 moved guests booted on their new hosts")
        except pytest.fail.Exception:  # say where each late guest's boot stands
            late = {n: console_text(rig, m).splitlines()[-8:] for n, m in moved.items() if not booted(rig, m)}
            pytest.fail(f"not booted on their new hosts in time; the last lines of their consoles: {late}")
        booted_after = time.monotonic() - started
        left = c.get(machines_path(), params={"fieldSelector": "spec.machinePoolRef.name=host2"}).json()
        assert left["items"] == []
        pool = c.get(f"{COMPUTE}/machinepools/host2").json()
        assert "pool.ironpool.dev/unschedulable" in [t["key"] for t in pool["spec"]["taints"]]
        wait_for(lambda: not any(domain_active(conn, d) for d in old_domains), 60, "host2's domains removed")
        print(f"\ndrain of 10 running machines: {seconds:.1f}s (all guests booted elsewhere after "
              f"{booted_after:.1f}s)")
        uncordoned = subprocess.run(
            [sys.executable, "-m", "ironpool.cli.main", "uncordon", "host2"], capture_output=True, text=True,
            timeout=60, check=False, env={**os.environ, "IRONPOOL_CONFIG": str(rig.admin_config)})
        assert uncordoned.returncode == 0 and "uncordoned" in uncordoned.stdout, uncordoned.stderr
        delete_all(c, names)
    conn.close()
