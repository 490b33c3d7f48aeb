"""Fast checks without a QEMU guest: domain XML, metadata, classes, images, validation, events.

libvirt's built-in ``test:///default`` driver (no daemon) checks that the XML is accepted and that
metadata round-trips through libvirt.
"""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt
import pytest
from ironpool.runtime.errors import InvalidArgument
from ironpool.runtime.events import EventRing, RuntimeEvent
from ironpool.runtime.images import (
    ImageCatalog,
    ImageNotFound,
    InvalidImageName,
    catalog_name,
    open_resolver,
)
from ironpool.runtime.libvirt_util import choose_domain_type
from ironpool.runtime.machine.classes import ClassFileError, parse_classes, quantity
from ironpool.runtime.machine.domain_xml import (
    DomainOptions,
    disk_element,
    domain_element,
    interface_element,
    metadata_xml,
    parse_metadata,
    to_string,
    volume_alias,
)
from ironpool.runtime.machine.model import METADATA_KEY, METADATA_NS, MachineRecord, NicRecord, VolumeRecord
from ironpool.runtime.machine.records import check_id, check_size, device_target
from ironpool.runtime.metadata import check_string_map

NASTY = "<x a='1'>&amp;\"]]></metadata><!--"


def _record() -> MachineRecord:
    return MachineRecord(
        id=uuid.uuid4().hex,
        class_name="tiny",
        labels={"k<&>": NASTY},
        annotations={"a": NASTY},
        cpu=1,
        memory_bytes=128 << 20,
        created_at=1,
        generation=1,
        volumes=[
            VolumeRecord(
                name=NASTY,
                device="oda",
                target="vda",
                kind="local",
                path="/tmp/x y'<.qcow2",
                handle="h",
                attributes={"iops": "100", "tps": "1000"},
            )
        ],
        nics=[NicRecord(name=NASTY, network_id=""), NicRecord(name="n2", network_id="default")],
    )


def test_domain_xml_escapes_user_input_and_round_trips() -> None:
    rec = _record()
    xml = to_string(domain_element(rec, DomainOptions(), Path("/tmp/c.log"), None, Path("/tmp/ign")))
    root = ET.fromstring(xml)  # well-formed despite the metacharacters
    assert root.findtext("name") == f"ironpool-{rec.id}"
    assert root.get("type") == "qemu"
    disk = root.find("devices/disk")
    assert disk is not None and disk.find("source").get("file") == "/tmp/x y'<.qcow2"  # type: ignore[union-attr]
    assert disk.findtext("iotune/total_iops_sec") == "100"
    assert disk.find("alias").get("name") == volume_alias(NASTY)  # type: ignore[union-attr]
    assert root.find("sysinfo/entry").get("name") == "opt/com.coreos/config"  # type: ignore[union-attr]
    meta = root.find(f"metadata/{{{METADATA_NS}}}machine")
    assert meta is not None
    back = parse_metadata(ET.tostring(meta, encoding="unicode"))
    assert back == rec


def test_alias_is_libvirt_safe() -> None:
    alias = volume_alias(NASTY)
    assert alias.startswith("ua-volume-")
    assert all(c.isalnum() or c in "-_" for c in alias)


def test_interfaces() -> None:
    user = interface_element(NicRecord(name="a", network_id="isolated"))
    assert user.get("type") == "user"
    net = interface_element(NicRecord(name="a", network_id="br<0>"))
    assert net.get("type") == "network" and net.find("source").get("network") == "br<0>"  # type: ignore[union-attr]


def test_libvirt_test_driver_accepts_domain_and_metadata() -> None:
    conn = libvirt.open("test:///default")
    try:
        rec = _record()
        rec.volumes[0].path = "/tmp/unused.qcow2"
        xml = to_string(domain_element(rec, DomainOptions(), Path("/tmp/c.log"), None, None))
        dom = conn.defineXML(xml)
        got = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, libvirt.VIR_DOMAIN_AFFECT_CONFIG)
        assert parse_metadata(got) == rec
        rec.annotations = {"new": NASTY}
        dom.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT,
            metadata_xml(rec),
            METADATA_KEY,
            METADATA_NS,
            libvirt.VIR_DOMAIN_AFFECT_CONFIG,
        )
        got = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, libvirt.VIR_DOMAIN_AFFECT_CONFIG)
        assert parse_metadata(got).annotations == {"new": NASTY}
        assert ET.fromstring(to_string(disk_element(rec.volumes[0]))).tag == "disk"
        dom.undefine()
        assert choose_domain_type(conn, "qemu") == "qemu"
        with pytest.raises(ValueError, match="auto, kvm or qemu"):
            choose_domain_type(conn, "xen")
    finally:
        conn.close()


def test_classes_parse_and_quantity() -> None:
    classes = parse_classes("""
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: small}
  capabilities: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: "1"}
- kind: VolumeClass
  metadata: {name: ignored}
""")
    small = classes["small"]
    assert small.cpu == 1 and small.memory == 1 << 30 and small.resources["nvidia.com/gpu"] == 1
    assert quantity(small, free_cpu=3, free_memory=2 << 30) == 2
    assert quantity(small, free_cpu=-1, free_memory=2 << 30) == 0
    for bad, words in (
        ("- {kind: MachineClass, metadata: {name: a}, capabilities: {cpu: '0', memory: 1Gi}}", "positive"),
        ("- {kind: MachineClass, metadata: {name: a}, capabilities: {memory: 1Gi}}", "cpu is required"),
        (
            "- {kind: MachineClass, metadata: {name: a}, capabilities: {cpu: x, memory: 1Gi}}",
            "capabilities.cpu",
        ),
        ("- {kind: MachineClass, capabilities: {cpu: 1, memory: 1Gi}}", "metadata.name"),
        ("[", "YAML"),
    ):
        with pytest.raises(ClassFileError, match=words):
            parse_classes(bad)


def test_image_catalog(tmp_path: Path) -> None:
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "kernel").write_bytes(b"k")
    (tmp_path / "k" / "initrd").write_bytes(b"i")
    (tmp_path / "k" / "cmdline").write_text("console=ttyS0\n")
    (tmp_path / "disk.qcow2").write_bytes(b"q")
    cat = ImageCatalog(tmp_path)
    k = cat.resolve("org/k:latest")
    assert k.boots_kernel and not k.has_disk and k.cmdline == "console=ttyS0"
    assert k.initrd == tmp_path / "k" / "initrd"
    d = cat.resolve("disk")
    assert d.has_disk and not d.boots_kernel and d.format == "qcow2"
    assert cat.names() == ["disk", "k"]
    with pytest.raises(ImageNotFound, match="nope"):
        cat.resolve("nope")
    for bad in ("../x", "a b", "", "x/..", "<x>"):
        with pytest.raises(InvalidImageName):
            catalog_name(bad)


def test_validation() -> None:
    check_id("a" * 32)
    for bad in ("", "A" * 32, "a" * 31, "../" + "a" * 29):
        with pytest.raises(InvalidArgument, match="machine_id"):
            check_id(bad)
    assert device_target("oda", "d") == "vda" and device_target("vdab", "d") == "vdab"
    with pytest.raises(InvalidArgument, match="device"):
        device_target("sda0", "volume.device")
    with pytest.raises(InvalidArgument, match="64 TiB"):
        check_size(1 << 50, "size")
    with pytest.raises(InvalidArgument, match="keys must not be empty"):
        check_string_map({"": "x"}, "labels")


def test_event_ring_filters_and_expires() -> None:
    now = [1000.0]
    ring = EventRing(max_events=3, ttl=10, clock=lambda: now[0])

    def ev(mid: str, t: int, app: str) -> RuntimeEvent:
        return RuntimeEvent(mid, {"app": app}, {}, "R", "m", "Normal", "A", event_time=t)

    for i in range(4):
        ring.add(ev(f"m{i}", 995 + i, "x" if i % 2 else "y"))
    assert [e.object_id for e in ring.list()] == ["m1", "m2", "m3"]  # bounded
    assert [e.object_id for e in ring.list(label_selector={"app": "x"})] == ["m1", "m3"]
    assert [e.object_id for e in ring.list(from_time=997, to_time=997)] == ["m2"]
    assert [e.object_id for e in ring.list(object_id="m3")] == ["m3"]
    now[0] = 1007.5
    assert [e.object_id for e in ring.list()] == ["m3"]  # older than the TTL are gone


def test_driver_on_the_libvirt_test_driver_makes_overlay_disks(tmp_path: Path) -> None:
    """Disk images become qcow2 overlays (grown to size_bytes); empty disks get their size."""
    import json
    import subprocess

    from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
    from ironpool.runtime.machine.classes import MachineClassSpec
    from ironpool.runtime.machine.driver import MachineDriver
    from ironpool.runtime.machine.host import Host

    images = tmp_path / "images"
    images.mkdir()
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(images / "base.qcow2"), "16M"], check=True)
    host = Host("test:///default")
    driver = MachineDriver(
        host,
        {"c": MachineClassSpec("c", {"cpu": 1, "memory": 64 << 20})},
        open_resolver(images, tmp_path / "cache"),
        tmp_path / "st",
    )
    driver.start()
    try:
        spec = mpb.MachineSpec(power=mpb.POWER_OFF)
        setattr(spec, "class", "c")
        spec.volumes.add(
            name="root",
            device="oda",
            local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="base"), size_bytes=32 << 20),
        )
        spec.volumes.add(name="scratch", device="odb", local_disk=mpb.LocalDisk(size_bytes=8 << 20))
        view = driver.create_machine(mpb.Machine(spec=spec))
        root, scratch = view.rec.volumes
        info = json.loads(
            subprocess.run(
                ["qemu-img", "info", "--output=json", "-U", root.path],
                capture_output=True,
                check=True,
                text=True,
            ).stdout
        )
        assert info["virtual-size"] == 32 << 20
        assert info["backing-filename"] == str(images / "base.qcow2")
        assert root.size_bytes == 32 << 20 and scratch.size_bytes == 8 << 20
        assert view.state == mpb.MACHINE_SUSPENDED
        driver.update_annotations(view.rec.id, {"x": NASTY})
        assert driver.list_machines(label_selector={})[0].rec.annotations == {"x": NASTY}
        driver.delete_machine(view.rec.id)
    finally:
        driver.close()
        host.conn.close()


def test_observed_generation_follows_the_applied_power_on_the_test_driver(tmp_path: Path) -> None:
    """``status.observed_generation`` is what the runtime has applied, whatever a poollet annotation
    says: a power change converging in the background keeps it one behind until it is done."""
    from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
    from ironpool.runtime.errors import NotFound
    from ironpool.runtime.machine.classes import MachineClassSpec
    from ironpool.runtime.machine.driver import MachineDriver
    from ironpool.runtime.machine.host import Host
    from ironpool.runtime.machine.records import machine_message

    from tests.helpers.wait import wait_for

    host = Host("test:///default")
    classes = {"c": MachineClassSpec("c", {"cpu": 1, "memory": 64 << 20})}
    # The test driver ignores the ACPI button: the grace period ends in a destroy.
    images = open_resolver(tmp_path, None)
    driver = MachineDriver(host, classes, images, tmp_path / "st", shutdown_timeout=0.2)
    driver.start()
    try:
        spec = mpb.MachineSpec(power=mpb.POWER_ON)
        setattr(spec, "class", "c")
        machine = mpb.Machine(spec=spec)
        machine.metadata.annotations["machinepoollet.ironcore.dev/irimachine-generation"] = "9"
        view = driver.create_machine(machine)
        mid = view.rec.id
        assert view.state == mpb.MACHINE_RUNNING
        assert machine_message(view).status.observed_generation == 1  # not the annotation's 9
        entry = driver.index.get(mid)
        with entry.lock:  # the background convergence waits for this lock
            driver.update_power(mid, mpb.POWER_OFF)
            pending = driver.get(mid)
            assert (pending.rec.generation, pending.observed_generation) == (2, 1)
        wait_for(lambda: driver.get(mid).observed_generation == 2, 10, "the power change to be applied")
        assert driver.get(mid).state == mpb.MACHINE_SUSPENDED
        # ids the runtime never issued are NOT_FOUND whatever their shape
        for never_issued in ("<a>&", "not-an-id", "f" * 32):
            with pytest.raises(NotFound, match="not found"):
                driver.devices.detach_volume(never_issued, "x")
        with pytest.raises(NotFound, match="volume 'x' not found on machine"):
            driver.devices.detach_volume(mid, "x")
        driver.delete_machine(mid)
        wait_for(lambda: not driver.list_machines(mid), 10, "the machine to be torn down")
    finally:
        driver.close()
        host.conn.close()
