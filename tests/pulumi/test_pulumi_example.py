"""The example program (examples/pulumi) through the mini engine and the real plugin, on a real
``ironpool up``: preview writes nothing, up boots the machines, a second up changes nothing, power
updates in place, a class change replaces, a removed machine is deleted, the Debian machine of
``withSite`` gets the program's cloud-init user data as a NoCloud seed, refresh drops what was
deleted out of band, destroy leaves nothing; then a Machine that cannot be placed fails ``up`` with
the scheduler's reason and succeeds once the pool has room.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import libvirt
import pytest
from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from ironpool.runtime.machine.seed import SEED_TARGET
from pulumi_stack import EXAMPLE, stack_for

from tests.e2e.up_harness import UpInstance, machine_domain, wait_for
from tests.helpers.runtimes import LIBVIRT_URI, build_debian_image

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

# Three cores: the example's two 1-cpu machines plus room for the web machine to become 2-cpu.
UP_ARGS = ["--capacity-cpu", "3", "--capacity-memory", "4Gi"]
MACHINES, VOLUMES, SECRETS = resolve("machines"), resolve("volumes"), resolve("secrets")
MACHINE_CLASSES, VOLUME_CLASSES = resolve("machineclasses"), resolve("volumeclasses")
DECLARED = [(MACHINES, "default", "demo-web"), (MACHINES, "default", "demo-app"),
            (VOLUMES, "default", "demo-data"), (SECRETS, "default", "demo-web-ignition"),
            (SECRETS, "default", "demo-app-ignition"), (MACHINE_CLASSES, None, "demo-x-small"),
            (MACHINE_CLASSES, None, "demo-small"), (VOLUME_CLASSES, None, "demo-fast")]
APP_IGNITION = '"passwd": {"users": [{"name": "core"}]}'


def existing(client: Any) -> dict[str, str]:
    """The example's objects that exist, with their resourceVersions."""
    out = {}
    for info, ns, name in DECLARED:
        with contextlib.suppress(NotFound):
            out[name] = client.get_raw(info, name, ns)["metadata"]["resourceVersion"]
    return out


def storage_capacity(up: UpInstance, client: Any) -> int:
    """The libvirt capacity of the example's data Volume, in bytes."""
    volume_id = client.get_raw(VOLUMES, "demo-data", "default")["status"]["volumeID"]
    conn = libvirt.open(LIBVIRT_URI)
    try:
        pool = conn.storagePoolLookupByName(up.storage_pool)
        pool.refresh(0)
        name = next(v for v in pool.listVolumes() if volume_id.rsplit("/", 1)[-1] in v)
        return int(pool.storageVolLookupByName(name).info()[1])
    finally:
        conn.close()


def domain_of(client: Any, name: str) -> str:
    return machine_domain(client.get_raw(MACHINES, name, "default")["status"]["machineID"])[1]


def test_example_program_lifecycle(up_instance: UpInstance, tmp_path: Path) -> None:
    up, client = up_instance, up_instance.client()
    stack = stack_for(EXAMPLE, up, tmp_path)

    # preview: the plan, with the pool each new Machine would land on; nothing is written.
    before = existing(client)
    preview = stack.preview()
    assert preview.error is None, preview.error
    assert set(preview.ops().values()) == {"create"} and len(preview.ops()) == 7
    assert preview.outputs["web_planned_pool"] == up.pool and preview.outputs["app_planned_pool"] == up.pool
    assert preview.outputs["web_placement"].startswith("fits")  # (with 1 more of this run)
    assert preview.outputs["web_pool"] == "<unknown>"  # decided by `up`, not by the preview
    assert existing(client) == before == {}
    assert not stack.state_file.exists()

    # up: both machines run on the pool, with the volume attached to web.
    first = stack.up()
    assert first.error is None, first.error
    assert set(first.ops().values()) == {"create"}
    assert first.outputs["web_pool"] == first.outputs["app_pool"] == up.pool
    assert first.outputs["web_state"] == first.outputs["app_state"] == "Running"
    web_domain, app_domain = domain_of(client, "demo-web"), domain_of(client, "demo-app")
    domains = up.domains()
    assert domains.get(web_domain) == domains.get(app_domain) == libvirt.VIR_DOMAIN_RUNNING
    assert client.get_raw(VOLUMES, "demo-data", "default")["spec"]["claimRef"]["name"] == "demo-web"
    assert len(up.storage_volumes()) == 1
    web_out = stack.resource("demo-web")["outputs"]  # type: ignore[index]
    assert web_out["volume_states"] == {"root": "Attached", "demo-data": "Attached"}

    # Secrets stay secret: the token is in no serialized provider and nowhere in the state; the
    # inline Ignition is in no output (only its digest is).
    token = up.token()
    state_text = stack.state_file.read_text()
    assert token not in state_text
    for entry in stack.state()["resources"].values():
        for props in (entry["inputs"], entry["outputs"]):
            assert token.encode() not in base64.b64decode(props["__provider"])
        assert APP_IGNITION not in json.dumps(entry["outputs"])
    app_out = stack.resource("demo-app")["outputs"]  # type: ignore[index]
    assert app_out["ignition_sha256"] and "ignition" not in app_out
    app_secret = client.get_raw(SECRETS, "demo-app-ignition", "default")
    assert APP_IGNITION in base64.b64decode(app_secret["data"]["ignition.yaml"]).decode()

    # A second up changes nothing.
    second = stack.up()
    assert second.error is None, second.error
    assert set(second.ops().values()) == {"same"}, second.log
    assert existing(client) == existing(client)

    # Power Off: updated in place, the same domain really shuts off.
    web_uid = client.get_raw(MACHINES, "demo-web", "default")["metadata"]["uid"]
    off = stack.up(webPower="Off")
    assert off.error is None, off.error
    assert off.ops()["demo-web"] == "update" and off.ops()["demo-app"] == "same"
    assert off.outputs["web_state"] == "Shutdown"
    assert client.get_raw(MACHINES, "demo-web", "default")["metadata"]["uid"] == web_uid
    assert up.domains().get(web_domain) == libvirt.VIR_DOMAIN_SHUTOFF

    # The data Volume grows in place, on disk too.
    grown = stack.up(webPower="Off", dataSize="2Gi")
    assert grown.error is None, grown.error
    assert grown.ops()["demo-data"] == "update" and grown.ops()["demo-web"] == "same"
    assert storage_capacity(up, client) == 2 << 30

    # A new class replaces the Machine (deleted first: the name stays); the old domain is gone.
    bigger = stack.up(webPower="Off", webClass="demo-small", dataSize="2Gi")
    assert bigger.error is None, bigger.error
    assert bigger.ops()["demo-web"] == "replace", bigger.log
    web = client.get_raw(MACHINES, "demo-web", "default")
    assert web["metadata"]["uid"] != web_uid and web["spec"]["machineClassRef"]["name"] == "demo-small"
    assert web_domain not in up.domains()
    web_domain = domain_of(client, "demo-web")
    assert up.domains().get(web_domain) == libvirt.VIR_DOMAIN_SHUTOFF

    # Dropping app from the program deletes it, its domain and its Ignition Secret.
    fewer = stack.up(webPower="Off", webClass="demo-small", dataSize="2Gi", withApp=False)
    assert fewer.error is None, fewer.error
    assert fewer.ops()["demo-app"] == "delete"
    assert "demo-app" not in existing(client) and "demo-app-ignition" not in existing(client)
    assert app_domain not in up.domains()

    # withSite: a Debian machine with cloud-init user data the program writes, which reaches the
    # guest as a NoCloud seed disk, not through fw_cfg (its boot is not waited for here: the Ansible
    # example test boots a Debian guest and checks what its seed made of it). Dropped again at once.
    build_debian_image()
    site = stack.up(webPower="Off", webClass="demo-small", dataSize="2Gi", withApp=False, withSite=True,
                    sshKey="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake+ForThe+Test ironpool-test")
    assert site.error is None, site.error
    assert site.ops()["demo-site"] == "create", site.log
    secret = client.get_raw(SECRETS, "demo-site-ignition", "default")
    user_data = base64.b64decode(secret["data"]["ignition.yaml"])
    assert user_data.startswith(b"#cloud-config\n") and b"ironpool-test" in user_data
    conn = libvirt.open(LIBVIRT_URI)
    try:
        xml = ET.fromstring(conn.lookupByName(domain_of(client, "demo-site")).XMLDesc(0))
    finally:
        conn.close()
    assert xml.find(f"devices/disk/target[@dev='{SEED_TARGET}']") is not None
    assert xml.find("sysinfo") is None  # no fw_cfg Ignition
    without = stack.up(webPower="Off", webClass="demo-small", dataSize="2Gi", withApp=False)
    assert without.ops()["demo-site"] == "delete", without.log

    # Deleted out of band: refresh drops it from the state; the next up creates it again.
    client.delete_raw(MACHINES, "demo-web", "default")
    wait_for(lambda: web_domain not in up.domains(), 60, "demo-web's domain to go")
    wait_for(lambda: "demo-web" not in existing(client), 60, "demo-web to be deleted")
    refreshed = stack.refresh()
    assert refreshed.ops()["demo-web"] == "deleted"
    assert stack.resource("demo-web") is None and stack.resource("demo-data") is not None
    again = stack.up(webPower="Off", webClass="demo-small", dataSize="2Gi", withApp=False)
    assert again.error is None, again.error
    assert again.ops()["demo-web"] == "create"

    # destroy: no object, domain or volume is left.
    gone = stack.destroy()
    assert set(gone.ops().values()) == {"delete"}
    assert existing(client) == {}
    assert up.domains() == {}
    assert up.storage_volumes() == []
    assert stack.state()["resources"] == {}


UNPLACEABLE = '''
import pulumi
import ironpool_pulumi as ironpool

config = pulumi.Config()
late = ironpool.Machine("late", machine_class="small", power="Off", wait_for="scheduled",
                        wait_timeout=config.get_int("timeout") or 8)
pulumi.export("planned_pool", late.planned_pool)
pulumi.export("placement", late.placement)
pulumi.export("pool", late.machine_pool)
'''


def test_unplaceable_machine_fails_up_with_the_reason_and_succeeds_after_capacity_grows(
        up_instance: UpInstance, tmp_path: Path) -> None:
    up, client = up_instance, up_instance.client()
    program = tmp_path / "program"
    program.mkdir()
    shutil.copy(EXAMPLE / "Pulumi.yaml", program / "Pulumi.yaml")
    (program / "__main__.py").write_text(UNPLACEABLE)
    stack = stack_for(program, up, tmp_path)
    # Two cpus of the pool's three are taken out of band, so a 2-cpu Machine does not fit
    # ("0/1 pools: 1 have too little cpu").
    blocker = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
               "metadata": {"name": "blocker", "namespace": "default"},
               "spec": {"machineClassRef": {"name": "small"}, "power": "Off"}}
    client.create_raw(MACHINES, blocker, "default")
    wait_for(lambda: client.get_raw(MACHINES, "blocker", "default")["spec"].get("machinePoolRef"), 30,
             "the blocker to be scheduled")

    preview = stack.preview()
    assert preview.error is None
    assert preview.outputs["planned_pool"] == ""
    assert "too little cpu" in preview.outputs["placement"], preview.outputs

    failed = stack.up()
    assert failed.error is not None
    assert "too little cpu" in failed.error and "did not become ready within 8s" in failed.error, failed.error
    assert "deleted again" in failed.error
    assert failed.seconds < 8 + 30
    assert stack.resource("late") is None
    with pytest.raises(NotFound):
        client.get_raw(MACHINES, "late", "default")

    # More capacity: ironpool up restarted with a fourth cpu; the same program now succeeds.
    up.stop()
    up.extra_args = ["--capacity-cpu", "4", "--capacity-memory", "4Gi"]
    up.start()
    done = stack.up(timeout=120)  # also the deletion's timeout: this Machine takes ~12s to stop
    assert done.error is None, done.error
    assert done.ops() == {"late": "create"} and done.outputs["pool"] == up.pool
    assert stack.destroy().ops() == {"late": "delete"}
    client.delete_raw(MACHINES, "blocker", "default")
    wait_for(lambda: not client.list_raw(MACHINES, "default").items, 60, "the machines to be gone")
