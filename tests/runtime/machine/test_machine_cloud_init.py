"""cloud-init beside Ignition, on real libvirt and QEMU through the runtime's IRI.

- A Debian 12 guest booted from ``ironpool image build debian-12`` gets its user data, hostname,
  instance id and static address from the NoCloud seed: checked over SSH through the user-mode
  forward on 127.0.0.1, with the key the user data handed over.
- The tiny image shows what reaches the guest either way: Ignition still arrives through fw_cfg,
  and with user data there is no fw_cfg entry but one more virtio disk (the seed).

Traffic goes only to 127.0.0.1; addresses are from 198.18.0.0/15, which nothing here routes.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import MACHINE_NAME_LABEL, MACHINE_UID_LABEL
from ironpool.runtime.machine.seed import SEED_TARGET
from machine_runtime_helpers import CLASSES_YAML, RuntimeProc, machine_request, remove_test_domains

from tests.helpers import ssh
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI, build_debian_image, build_tiny_image, require_libvirt
from tests.helpers.wait import wait_for

# The image is built first when its recipe changed (a minute or two), and an emulated Debian guest
# on a host busy with other guests can take minutes to boot.
pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.timeout(1800)]

CLASSES = CLASSES_YAML + """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: debian}
  capabilities: {cpu: "1", memory: 512Mi}
"""
# SSH with the cloud-init key follows within a minute of the start on a quiet host (TCG, one vCPU);
# measured 4-9 minutes at a load average of 9-14 on two cores.
DEBIAN_SSH_DEADLINE = 1200


def user_data(public_key: str) -> bytes:
    return (
        "#cloud-config\n"
        "disable_root: false\n"
        f"ssh_authorized_keys: [{json.dumps(public_key)}]\n"
        "write_files:\n"
        "  - path: /etc/ironpool-test\n"
        "    content: handed over by the NoCloud seed\n"
    ).encode()


@pytest.fixture(scope="module")
def images(test_session: str) -> Path:
    require_libvirt()
    try:
        out = build_tiny_image()
        return build_debian_image(out)
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def runtime(images: Path, test_session: str) -> Iterator[RuntimeProc]:
    workdir = qemu_tmpdir("ici-")
    proc = RuntimeProc(workdir=workdir, images=images, classes=CLASSES)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        remove_test_domains(test_session)
        shutil.rmtree(workdir, ignore_errors=True)


def domain_xml(machine_id: str) -> ET.Element:
    conn = libvirt.open(LIBVIRT_URI)
    try:
        return ET.fromstring(conn.lookupByName(f"ironpool-{machine_id}").XMLDesc(0))
    finally:
        conn.close()


def console(runtime: RuntimeProc, machine_id: str) -> str:
    path = runtime.console_log(machine_id)
    return path.read_text(errors="replace") if path.exists() else ""


def disks(runtime: RuntimeProc, machine_id: str) -> list[str]:
    """The virtio disks the tiny guest listed last (``ironpool-tiny-image: disks: vda=... vdb=...``)."""
    listed = [line for line in console(runtime, machine_id).splitlines()
              if "ironpool-tiny-image: disks:" in line]
    names = listed[-1].split("disks:", 1)[1].split() if listed else []
    return [] if names == ["none"] else names


def user_nic(address: str) -> mpb.NetworkInterface:
    return mpb.NetworkInterface(name="eth0", network_id="test://cloud-init", ips=[address.split("/")[0]],
                                attributes={"addresses": json.dumps([address])})


def test_debian_guest_gets_user_data_hostname_instance_id_and_static_address(
    runtime: RuntimeProc, test_session: str, tmp_path: Path
) -> None:
    key, public = ssh.keypair(tmp_path)
    labels = {MACHINE_UID_LABEL: "0b5e1c2d-uid-of-the-machine", MACHINE_NAME_LABEL: "web-7"}
    req = machine_request(test_session, cls="debian", image="debian-12", labels=labels)
    req.machine.spec.ignition_data = user_data(public)
    req.machine.spec.guest_config.hostname = "deb-guest"
    req.machine.spec.network_interfaces.append(user_nic("198.18.9.5/24"))
    mid = runtime.stub.CreateMachine(req).machine.metadata.id

    # The seed: a read-only virtio disk, its file readable by nobody but its owner.
    by_target = {t.get("dev"): d for d in domain_xml(mid).iter("disk") if (t := d.find("target")) is not None}
    seed = by_target.get(SEED_TARGET)
    assert seed is not None, list(by_target)
    assert seed.find("target[@bus='virtio']") is not None and seed.find("readonly") is not None
    seed_file = Path(seed.find("source").get("file", ""))  # type: ignore[union-attr]
    assert seed_file.name == "seed.iso"
    assert stat.S_IMODE(os.stat(seed_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(seed_file.parent).st_mode) == 0o711

    runtime.wait_state(mid, "MACHINE_RUNNING", timeout=60)
    m = runtime.machine(mid)
    assert m is not None
    endpoint = m.status.network_interfaces[0].handle.removeprefix("user://")
    out = ssh.wait_run(
        endpoint, key,
        "hostname; cat /etc/ironpool-test; echo; cloud-init query instance_id; "
        "ip -4 -o addr show scope global; python3 -c 'print(\"python\", 1 + 1)'",
        DEBIAN_SSH_DEADLINE, "SSH into the Debian guest with the key from its user data",
    )
    lines = out.splitlines()
    assert lines[0] == "deb-guest", out
    assert lines[1] == "handed over by the NoCloud seed", out
    assert lines[2] == "0b5e1c2d-uid-of-the-machine", out
    # The allocated address, set statically from network-config: an address from DHCP would have
    # a lease time instead of "valid_lft forever".
    addr_line = next(line for line in lines if "inet " in line)
    assert "inet 198.18.9.5/24" in addr_line and "valid_lft forever" in addr_line, out
    assert "python 2" in out

    runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: runtime.machine(mid) is None, 60, "the Debian machine deleted")


def test_tiny_guest_gets_ignition_through_fw_cfg_and_user_data_as_a_seed_disk(
    runtime: RuntimeProc, test_session: str, tmp_path: Path
) -> None:
    _key, public = ssh.keypair(tmp_path)
    ign = runtime.stub.CreateMachine(_with_data(machine_request(test_session), ssh.ignition(public)))
    cfg = runtime.stub.CreateMachine(_with_data(machine_request(test_session), user_data(public)))
    ign_id, cfg_id = ign.machine.metadata.id, cfg.machine.metadata.id
    wait_for(lambda: "disks:" in console(runtime, ign_id) and "disks:" in console(runtime, cfg_id), 90,
             "both tiny guests listing their disks")
    # The seed is one more virtio disk (the guest lists them as they appear: wait for the last).
    wait_for(lambda: len(disks(runtime, cfg_id)) == len(disks(runtime, ign_id)) + 1, 30,
             f"the seed disk among {disks(runtime, cfg_id)} (Ignition guest: {disks(runtime, ign_id)})")
    assert '"sshAuthorizedKeys"' in console(runtime, ign_id)  # the tiny init prints the Ignition it read
    assert "ignition" not in console(runtime, cfg_id).split("init started", 1)[1]  # no fw_cfg entry
    assert domain_xml(ign_id).find("sysinfo") is not None and domain_xml(cfg_id).find("sysinfo") is None
    for mid in (ign_id, cfg_id):
        runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: runtime.machine(ign_id) is None and runtime.machine(cfg_id) is None, 60,
             "the tiny machines deleted")


def _with_data(req: mpb.CreateMachineRequest, data: bytes) -> mpb.CreateMachineRequest:
    req.machine.spec.ignition_data = data
    return req
