"""End to end on real libvirtd: ``ironpool up``, the example manifests, power, deletion, clean stop."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import libvirt
import pytest
from ironpool.api.errors import NotFound
from ironpool.api.quantity import parse_quantity
from ironpool.api.resources import resolve
from ironpool.poollet.capacity import HostResources, fits, local_host_resources
from ironpool.runtime.machine import vcpu_slice
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import LIBVIRT_URI, REPO, assert_vcpu_slice
from tests.helpers.ssh import SSH_OPTIONS

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, VOLUMES, POOLS = resolve("machines"), resolve("volumes"), resolve("machinepools")
MiB = 1 << 20
EXAMPLE = REPO / "examples" / "manifests"


def condition(obj: dict, ctype: str) -> dict | None:  # type: ignore[type-arg]
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == ctype), None)


def test_example_machine_runs_powers_off_and_on_and_is_deleted(make_up: Callable[..., UpInstance]) -> None:
    up = make_up()
    up.start()
    out = up.output()
    shown_paths = (up.url, str(up.data_dir / "tokens.csv"), "iri-machine.sock", "iri-volume.sock")
    for shown in (*shown_paths, str(up.data_dir)):
        assert shown in out, f"the summary should show {shown}"
    assert oct((up.data_dir / "tokens.csv").stat().st_mode & 0o777) == "0o600"
    client = up.client()
    # Once `up` says it is up, its pool is ready to place on: Ready, with capacity and allocatable.
    status = client.get_raw(POOLS, up.pool).get("status") or {}
    assert (condition({"status": status}, "Ready") or {}).get("status") == "True", status
    assert status.get("capacity") and status.get("allocatable"), status

    # The client configuration `up` wrote is all the CLI needs.
    classes = up.cli("get", "machineclasses").stdout
    assert "x-small" in classes and "small" in classes

    # The example as its README gives it: root's SSH key in the Ignition Secret, then the manifests;
    # the Machine runs with its disk and NIC attached and answers `ironpool ssh`.
    secret = subprocess.run(["bash", str(EXAMPLE / "web-ignition.sh")], env=up.env, capture_output=True,
                            text=True, timeout=60, check=True).stdout
    (up.workdir / "web-ignition.yaml").write_text(secret)
    up.cli("apply", "-f", str(up.workdir / "web-ignition.yaml"), "-f", str(EXAMPLE / "network.yaml"),
           "-f", str(EXAMPLE / "web.yaml"))
    up.wait("machine/web", "running")
    uname = wait_for(lambda: (p := up.cli("ssh", "web", *SSH_OPTIONS, "--", "uname", "-a", check=False))
                     .returncode == 0 and p.stdout, 90, "`ironpool ssh web` to log in with the example's key")
    assert uname.startswith("Linux ironpool-tiny")
    web = client.get_raw(MACHINES, "web", "default")
    assert web["spec"]["machinePoolRef"]["name"] == up.pool
    iri_id, domain = machine_domain(web["status"]["machineID"])
    assert up.domains().get(domain) == libvirt.VIR_DOMAIN_RUNNING
    assert_vcpu_slice(domain, vcpu_slice.DEFAULT_NS)  # what `up`'s runtime asks at each start
    wait_for(lambda: "ironpool-tiny-image: init started" in up.console_log(iri_id), GUEST_SECONDS,
             "the guest's init line on the serial console")

    # The data volume: Available, claimed by the machine, attached; one storage volume in the pool.
    vol = wait_for(lambda: (v := client.get_raw(VOLUMES, "web-data", "default"))["status"].get("state")
                   == "Available" and v, 30, "volume web-data Available")
    assert vol["spec"]["claimRef"]["name"] == "web"
    assert (condition(web, "VolumesReady") or {}).get("status") == "True"
    attached = {v["name"]: v["state"] for v in web["status"]["volumes"]}
    assert attached == {"root": "Attached", "data": "Attached"}
    assert len(up.storage_volumes()) == 1

    # The pool: capacity is the host, allocatable's class counts are the host minus the running machine.
    host = local_host_resources()
    cap = client.get_raw(POOLS, up.pool)["status"]["capacity"]
    assert int(cap["cpu"]) == host.cpu == os.cpu_count()
    assert parse_quantity(cap["memory"]).value() == host.memory
    free = HostResources(host.cpu - 1, host.memory - 256 * MiB)
    assert int(cap["class/machine.x-small"]) == fits(host, {"cpu": 1, "memory": 256 * MiB})
    wait_for(lambda: int(client.get_raw(POOLS, up.pool)["status"]["allocatable"]["class/machine.x-small"])
             == fits(free, {"cpu": 1, "memory": 256 * MiB}), 15, "allocatable to count the running machine")
    pool = client.get_raw(POOLS, up.pool)
    cap, alloc = pool["status"]["capacity"], pool["status"]["allocatable"]
    assert int(cap["class/machine.small"]) == fits(host, {"cpu": 2, "memory": 1024 * MiB})
    assert int(alloc["class/machine.small"]) == fits(free, {"cpu": 2, "memory": 1024 * MiB})
    assert int(alloc["cpu"]) == host.cpu  # shared figures: the scheduler subtracts bound machines once

    # Power Off: the domain shuts off and the state says Shutdown; On: Running again.
    client.patch_raw(MACHINES, "web", {"spec": {"power": "Off"}}, "default")
    up.wait("machine/web", "jsonpath={.status.state}=Shutdown")
    assert up.domains().get(domain) == libvirt.VIR_DOMAIN_SHUTOFF
    client.patch_raw(MACHINES, "web", {"spec": {"power": "On"}}, "default")
    up.wait("machine/web", "jsonpath={.status.state}=Running")
    assert up.domains().get(domain) == libvirt.VIR_DOMAIN_RUNNING
    assert_vcpu_slice(domain, vcpu_slice.DEFAULT_NS)  # what `up`'s runtime asks at each start

    # Deleting the Machine removes the domain and its disks within 30 s, then the object.
    machine_dir = up.data_dir / "machine-runtime" / "machines" / iri_id
    disks = [p for p in machine_dir.rglob("*") if p.suffix in (".qcow2", ".raw", ".img")]
    assert disks, f"the root disk should be a file under {machine_dir}"
    client.delete_raw(MACHINES, "web", "default")

    def machine_gone() -> bool:
        try:
            client.get_raw(MACHINES, "web", "default")
            return False
        except NotFound:
            return True

    wait_for(machine_gone, 30, "machine web to disappear")
    assert domain not in up.domains()
    assert not any(p.exists() for p in disks)

    # The volume is released, then deleting it removes the storage volume.
    wait_for(lambda: not client.get_raw(VOLUMES, "web-data", "default")["spec"].get("claimRef"), 30,
             "web-data's claimRef to clear")
    client.delete_raw(VOLUMES, "web-data", "default")
    wait_for(lambda: not up.storage_volumes(), 30, "the storage volume to be removed")

    # Ctrl-C stops cleanly: exit 0, sockets gone.
    assert up.stop() == 0, up.output()
    assert not list(Path(up.data_dir / "sockets").iterdir())
    libvirt.open(LIBVIRT_URI).close()
