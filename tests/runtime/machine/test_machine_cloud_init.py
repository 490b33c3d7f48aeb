"""cloud-init beside Ignition, on real libvirt and QEMU through the runtime's IRI, with the tiny
image: Ignition still arrives through fw_cfg, and with user data there is no fw_cfg entry but one
more virtio disk (the seed). What a Debian guest makes of its seed (user data, hostname, instance
id, static address) is checked end to end in tests/ansible/test_playbooks.py, on the example.
"""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.machine.seed import SEED_TARGET
from machine_runtime_helpers import CLASSES_YAML, RuntimeProc, machine_request, running_runtime

from tests.helpers import ssh
from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import LIBVIRT_URI, build_tiny_image, require_libvirt
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]


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
        return build_tiny_image()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def runtime(images: Path, test_session: str) -> Iterator[RuntimeProc]:
    with running_runtime("ici-", test_session, images=images, classes=CLASSES_YAML) as proc:
        yield proc


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


def test_tiny_guest_gets_ignition_through_fw_cfg_and_user_data_as_a_seed_disk(
    runtime: RuntimeProc, test_session: str, tmp_path: Path
) -> None:
    _key, public = ssh.keypair(tmp_path)
    ign = runtime.stub.CreateMachine(_with_data(machine_request(test_session), ssh.ignition(public)))
    cfg = runtime.stub.CreateMachine(_with_data(machine_request(test_session), user_data(public)))
    ign_id, cfg_id = ign.machine.metadata.id, cfg.machine.metadata.id
    # The seed: a read-only virtio disk, its file readable by nobody but its owner.
    by_target = {t.get("dev"): d for d in domain_xml(cfg_id).iter("disk")
                 if (t := d.find("target")) is not None}
    seed = by_target.get(SEED_TARGET)
    assert seed is not None, list(by_target)
    assert seed.find("target[@bus='virtio']") is not None and seed.find("readonly") is not None
    seed_file = Path(seed.find("source").get("file", ""))  # type: ignore[union-attr]
    assert seed_file.name == "seed.iso"
    assert stat.S_IMODE(os.stat(seed_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(seed_file.parent).st_mode) == 0o711
    wait_for(lambda: "disks:" in console(runtime, ign_id) and "disks:" in console(runtime, cfg_id),
             GUEST_SECONDS,
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
