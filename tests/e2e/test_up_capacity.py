"""Twenty small machines at once on one host: all run, allocatable never goes negative, the 21st waits
with a FailedScheduling reason and starts once capacity frees up.

The host has 2 cores, so the pool is sized with ``ironpool up --capacity-cpu 20`` (overcommitting the
TCG guests, which idle in a busybox loop): exactly twenty 1-vCPU/128 MiB machines fit, the 21st
does not (cpu is the limit; memory is ample).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import boot_deadline
from tests.helpers.runtimes import REPO

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.guests]

MACHINES, POOLS = resolve("machines"), resolve("machinepools")
COUNT = 20
CLASSES = """\
apiVersion: compute.ironcore.dev/v1alpha1
kind: MachineClass
metadata: {name: e2e-nano}
capabilities: {cpu: "1", memory: 128Mi}
"""


def machine(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "namespace": "default", "labels": {"e2e": "capacity"}},
        "spec": {"machineClassRef": {"name": "e2e-nano"}, "power": "On",
                 "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "256Mi"}}]},
    }


class PoolSampler(threading.Thread):
    """Samples the pool and its bound machines until stopped; records every violation it sees."""

    def __init__(self, up: UpInstance) -> None:
        super().__init__(daemon=True)
        self.client = up.client()
        self.pool = up.pool
        self.stop_event = threading.Event()
        self.samples = 0
        self.violations: list[str] = []

    def run(self) -> None:
        while not self.stop_event.wait(0.2):
            status = self.client.get_raw(POOLS, self.pool).get("status") or {}
            alloc, cap = status.get("allocatable") or {}, status.get("capacity") or {}
            for key, value in alloc.items():
                if str(value).startswith("-"):
                    self.violations.append(f"allocatable {key}={value}")
            bound = [m for m in self.client.list_raw(MACHINES, "default", label_selector="e2e=capacity").items
                     if (m["spec"].get("machinePoolRef") or {}).get("name") == self.pool]
            if cap.get("cpu") and len(bound) > int(cap["cpu"]):
                self.violations.append(f"{len(bound)} one-cpu machines bound to a pool of {cap['cpu']} cpus")
            self.samples += 1


def test_twenty_machines_run_and_the_21st_waits_for_capacity(make_up: Callable[..., UpInstance]) -> None:
    up = make_up(extra_args=["--capacity-cpu", str(COUNT), "--capacity-memory", "16Gi"])
    classes = up.workdir / "classes.yaml"
    classes.write_text(CLASSES + "---\n" + (REPO / "examples" / "classes" / "volumeclasses.yaml").read_text())
    up.classes = [classes]
    up.start()
    client = up.client()
    sampler = PoolSampler(up)
    sampler.start()
    try:
        names = [f"cap-{i:02d}" for i in range(COUNT)]
        manifest = up.workdir / "twenty.yaml"
        manifest.write_text(yaml.safe_dump_all([machine(n) for n in names]))
        up.cli("apply", "-f", str(manifest))

        def all_running() -> bool:
            items = client.list_raw(MACHINES, "default", label_selector="e2e=capacity").items
            return sum((m.get("status") or {}).get("state") == "Running" for m in items) == COUNT

        wait_for(all_running, boot_deadline(COUNT), f"{COUNT} machines Running", interval=0.5)
        assert len(up.domains()) == COUNT
        pool = client.get_raw(POOLS, up.pool)["status"]
        assert pool["allocatable"]["class/machine.e2e-nano"] == "0"

        # The 21st does not fit: Pending, unbound, with a reason naming what is short.
        client.create_raw(MACHINES, machine("cap-extra"), "default")

        def failed_scheduling() -> dict[str, Any] | None:
            m = client.get_raw(MACHINES, "cap-extra", "default")
            cond = next((c for c in (m.get("status") or {}).get("conditions") or []
                         if c.get("type") == "Scheduled"), None)
            return cond if cond and cond.get("status") == "False" else None

        cond = wait_for(failed_scheduling, 30, "cap-extra's Scheduled=False condition")
        assert cond["reason"] == "FailedScheduling"
        assert "cpu" in cond["message"].lower(), cond["message"]
        extra = client.get_raw(MACHINES, "cap-extra", "default")
        assert not extra["spec"].get("machinePoolRef")
        assert (extra.get("status") or {}).get("state") in (None, "", "Pending")

        # Capacity frees up: one machine goes, the 21st is scheduled and runs.
        gone = client.get_raw(MACHINES, names[0], "default")["status"]["machineID"]
        client.delete_raw(MACHINES, names[0], "default")

        def deleted() -> bool:
            try:
                client.get_raw(MACHINES, names[0], "default")
                return False
            except NotFound:
                return True

        wait_for(deleted, 30, f"{names[0]} to be deleted")
        wait_for(lambda: (client.get_raw(MACHINES, "cap-extra", "default").get("status") or {}).get("state")
                 == "Running", boot_deadline(1), "cap-extra to run once capacity freed up")
        assert machine_domain(gone)[1] not in up.domains()
        assert len(up.domains()) == COUNT
    finally:
        sampler.stop_event.set()
        sampler.join(5)
    assert sampler.samples > 5
    assert not sampler.violations, sampler.violations[:5]
    assert up.stop() == 0
