"""Pure checks of the machine runtime's records: IRI requests to records and back, every check,
the IRI state and observed generation, the index's id semantics. No libvirt, no disk."""

from __future__ import annotations

from pathlib import Path

import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from ironpool.runtime.images import Image, ImageNotFound, catalog_name
from ironpool.runtime.machine import records
from ironpool.runtime.machine.classes import MachineClassSpec
from ironpool.runtime.machine.index import Entry, MachineIndex
from ironpool.runtime.machine.model import MachineRecord, VolumeRecord

CLASSES = {"tiny": MachineClassSpec("tiny", {"cpu": 1, "memory": 128 << 20})}
DISKS = Path("/state/machines/m/disks")
ODD = "v<&>\"'\n]]>"  # what IRI allows in label values and the machine runtime keeps verbatim
IMAGES = {
    "disk": Image(name="disk", path=Path("/images/disk.qcow2"), format="qcow2"),
    "kernel": Image(name="kernel", kernel=Path("/images/kernel/kernel")),
    "kernel2": Image(name="kernel2", kernel=Path("/images/kernel2/kernel")),
}


def _resolve(ref: str, _creds: object, _rec: object) -> Image:
    name = catalog_name(ref)  # InvalidImageName for a bad reference, as the catalog does
    if name not in IMAGES:
        raise ImageNotFound(f"image {ref!r}: not found")
    return IMAGES[name]


LOOKUPS = records.Lookups(
    resolve_image=_resolve,
    file_exists=lambda path: path.startswith("/pool/"),
    network_exists=lambda name: name == "default",
)


def _machine(power: int = mpb.POWER_ON, cls: str = "tiny") -> mpb.Machine:
    spec = mpb.MachineSpec(power=power)  # type: ignore[arg-type]
    setattr(spec, "class", cls)
    return mpb.Machine(spec=spec)


def _plan(machine: mpb.Machine) -> records.MachinePlan:
    cls = records.check_machine(machine, CLASSES)
    return records.plan_machine(machine, "a" * 32, cls, DISKS, LOOKUPS, "/state", now=7)


def _connection(path: str = "/pool/v.qcow2", **attrs: str) -> mpb.VolumeConnection:
    return mpb.VolumeConnection(
        driver="ironpool-local",
        handle="h",
        attributes={"path": path, **attrs},
        effective_storage_bytes=1 << 30,
    )


def test_plan_converts_a_full_request_and_keeps_metadata_verbatim() -> None:
    m = _machine()
    m.metadata.labels["k<&>"] = ODD
    m.metadata.annotations["a"] = ODD
    m.spec.guest_config.hostname = "h"
    m.spec.ignition_data = b"{}"
    m.spec.volumes.add(name="root", local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="reg.io/x/disk:1")))
    m.spec.volumes.add(name="data", device="odc", connection=_connection(iops="100"))
    m.spec.volumes.add(name="scratch", local_disk=mpb.LocalDisk(size_bytes=1 << 20))
    m.spec.network_interfaces.add(name="eth0", network_id="")
    m.spec.network_interfaces.add(name="eth1", network_id="default", ips=["10.0.0.2"])
    plan = _plan(m)
    rec = plan.rec
    assert (rec.id, rec.class_name, rec.cpu, rec.memory_bytes, rec.created_at) == (
        "a" * 32,
        "tiny",
        1,
        128 << 20,
        7,
    )
    assert rec.labels == {"k<&>": ODD} and rec.annotations == {"a": ODD}
    assert (rec.hostname, rec.ignition, rec.generation, rec.owner) == ("h", True, 1, "/state")
    root, data, scratch = rec.volumes
    # devices: given ones are kept, the others get the next free virtio target
    assert [(v.device, v.target) for v in rec.volumes] == [("oda", "vda"), ("odc", "vdc"), ("odb", "vdb")]
    assert root.kind == "local" and root.image == "disk" and root.owned and root.path.startswith(str(DISKS))
    assert root.handle.startswith(f"local:{'a' * 32}:")
    assert plan.images == {"root": IMAGES["disk"]} and plan.boot is None
    assert data.kind == "connection" and data.path == "/pool/v.qcow2" and not data.owned
    assert data.attributes["iops"] == "100" and data.effective_storage_bytes == 1 << 30
    assert scratch.size_bytes == 1 << 20 and scratch.path != root.path
    assert [(n.name, n.network_id, n.ips) for n in rec.nics] == [
        ("eth0", "", []),
        ("eth1", "default", ["10.0.0.2"]),
    ]

    # and back: the IRI message shows what was asked
    view = records.MachineView(rec, mpb.MACHINE_RUNNING, observed_generation=1)
    msg = records.machine_message(view)
    assert dict(msg.metadata.labels) == {"k<&>": ODD} and dict(msg.metadata.annotations) == {"a": ODD}
    assert getattr(msg.spec, "class") == "tiny" and msg.spec.guest_config.hostname == "h"
    assert [v.name for v in msg.spec.volumes] == ["root", "data", "scratch"]
    assert msg.spec.volumes[0].local_disk.image.image == "disk"
    assert msg.spec.volumes[1].connection.attributes["path"] == "/pool/v.qcow2"
    assert msg.status.image_ref == "disk"
    assert [v.state for v in msg.status.volumes] == [mpb.VOLUME_ATTACHED] * 3
    # eth0: user mode (the runtime's default), no SSH forward before the domain runs; eth1: the
    # existing libvirt network its id names (IronCore's providernet), with a MAC stable per machine
    assert [n.mode for n in rec.nics] == ["user", "provider"]
    assert [n.handle for n in msg.status.network_interfaces] == ["", f"provider://default/{rec.nics[1].mac}"]


def test_a_kernel_bundle_boots_and_needs_no_disk() -> None:
    m = _machine()
    m.spec.volumes.add(name="boot", local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="kernel")))
    plan = _plan(m)
    assert plan.boot == IMAGES["kernel"] and plan.rec.boot_image == "kernel"
    assert plan.rec.volumes[0].path == "" and not plan.rec.volumes[0].owned
    m.spec.volumes.add(name="boot2", local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="kernel2")))
    with pytest.raises(InvalidArgument, match=r"volumes\[1\]\.local_disk\.image: only one kernel"):
        _plan(m)
    vrec, image = records.volume_record(
        m.spec.volumes[1], "volume", MachineRecord("b" * 32, "tiny"), DISKS, LOOKUPS
    )
    with pytest.raises(InvalidArgument, match="only boot a machine at creation"):
        records.attachable(vrec, image)


def _volume(**kw: object) -> mpb.Volume:
    return mpb.Volume(name="v", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("machine", "error", "words"),
    [
        (_machine(cls=""), InvalidArgument, "machine.spec.class: must not be empty"),
        (_machine(cls="gold"), NotFound, "'gold' not supported (known: tiny)"),
        (_machine(power=7), InvalidArgument, "machine.spec.power"),
    ],
)
def test_check_machine_refuses(machine: mpb.Machine, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        records.check_machine(machine, CLASSES)


def test_check_machine_metadata_ignition_and_client_id() -> None:
    m = _machine()
    m.metadata.labels["k"] = "a\x00b"
    with pytest.raises(InvalidArgument, match=r"machine\.metadata\.labels\['k'\]: NUL"):
        records.check_machine(m, CLASSES)
    m = _machine()
    m.spec.ignition_data = b"x" * (records.MAX_IGNITION_BYTES + 1)
    with pytest.raises(InvalidArgument, match="ignition_data"):
        records.check_machine(m, CLASSES)
    m = _machine()
    m.metadata.id = "../x"
    with pytest.raises(InvalidArgument, match=r"machine\.metadata\.id"):
        records.check_machine(m, CLASSES)
    m.metadata.id = "c" * 32
    records.check_machine(m, CLASSES)
    assert records.new_machine_id(m) == "c" * 32
    assert len(records.new_machine_id(_machine())) == 32


@pytest.mark.parametrize(
    ("volume", "error", "words"),
    [
        (_volume(), InvalidArgument, "exactly one of local_disk and connection"),
        (_volume(device="<vda/>", local_disk=mpb.LocalDisk()), InvalidArgument, "volume.device"),
        (
            _volume(local_disk=mpb.LocalDisk(size_bytes=-1)),
            InvalidArgument,
            "size_bytes: must not be negative",
        ),
        (_volume(local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="nope"))), NotFound, "image.image"),
        (
            _volume(local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="../x"))),
            InvalidArgument,
            "image.image",
        ),
        (_volume(connection=mpb.VolumeConnection(driver="ceph")), InvalidArgument, "driver 'ceph'"),
        (_volume(connection=_connection(path="rel/v")), InvalidArgument, "absolute file path"),
        (_volume(connection=_connection(format="vmdk")), InvalidArgument, "format: 'vmdk'"),
        (_volume(connection=_connection(iops="fast")), InvalidArgument, "attributes.iops: 'fast'"),
        (_volume(connection=_connection(path="/elsewhere/v")), NotFound, "does not exist"),
    ],
)
def test_volume_record_refuses(volume: mpb.Volume, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words) as err:
        records.volume_record(volume, "volume", MachineRecord("b" * 32, "tiny"), DISKS, LOOKUPS)
    assert str(err.value).startswith("volume")  # the message starts with the field


def test_duplicates_and_networks() -> None:
    rec = MachineRecord("b" * 32, "tiny")
    vrec, _ = records.volume_record(
        _volume(device="oda", local_disk=mpb.LocalDisk()), "v", rec, DISKS, LOOKUPS
    )
    rec.volumes.append(vrec)
    with pytest.raises(AlreadyExists, match="volume 'v' already exists"):
        records.volume_record(_volume(local_disk=mpb.LocalDisk()), "v", rec, DISKS, LOOKUPS)
    other = mpb.Volume(name="w", device="oda", local_disk=mpb.LocalDisk())
    with pytest.raises(InvalidArgument, match="device 'oda' is already used"):
        records.volume_record(other, "v", rec, DISKS, LOOKUPS)
    # any id the host has no libvirt network of is realised in the host's default mode (user)
    for network_id in ("", "isolated", "user", "br<0>", "ironpool://networks/x"):
        nic = records.nic_record(mpb.NetworkInterface(name="n", network_id=network_id), "n", rec, LOOKUPS)
        assert nic.mode == "user"
    provider = records.nic_record(mpb.NetworkInterface(name="n", network_id="default"), "n", rec, LOOKUPS)
    assert provider.mode == "provider"
    rec.nics.append(records.nic_record(mpb.NetworkInterface(name="n"), "n", rec, LOOKUPS))
    with pytest.raises(AlreadyExists):
        records.nic_record(mpb.NetworkInterface(name="n"), "n", rec, LOOKUPS)
    same_mac = mpb.NetworkInterface(name="m", attributes={"macAddress": rec.nics[0].mac.upper()})
    with pytest.raises(AlreadyExists, match=r"f\.attributes\.macAddress: MAC .* used by .* .n."):
        records.nic_record(same_mac, "f", rec, LOOKUPS)


def test_volume_update_grows_only_and_keeps_kind_and_file() -> None:
    local = VolumeRecord(name="l", device="oda", target="vda", kind="local", size_bytes=1 << 20, path="/d/l")
    conn = VolumeRecord(
        name="c", device="odb", target="vdb", kind="connection", path="/pool/c",
        attributes={"path": "/pool/c"}, effective_storage_bytes=1 << 30,
    )  # fmt: skip
    with pytest.raises(InvalidArgument, match="kind cannot change"):
        records.volume_update(local, _volume(connection=_connection()))
    with pytest.raises(InvalidArgument, match="kind cannot change"):
        records.volume_update(conn, _volume(local_disk=mpb.LocalDisk()))
    with pytest.raises(InvalidArgument, match="cannot shrink from 1048576 to 1024 bytes"):
        records.volume_update(local, _volume(local_disk=mpb.LocalDisk(size_bytes=1024)))
    with pytest.raises(InvalidArgument, match="cannot change the volume file"):
        records.volume_update(conn, _volume(connection=_connection(path="/pool/other")))
    grow = records.volume_update(local, _volume(local_disk=mpb.LocalDisk(size_bytes=2 << 20)))
    assert (grow.size, grow.retune) == (2 << 20, False)
    grow.apply(local)
    assert local.size_bytes == 2 << 20
    same = records.volume_update(conn, _volume(connection=_connection(path="/pool/c")))
    assert not same.retune and same.size == 1 << 30
    tune = records.volume_update(conn, _volume(connection=_connection(path="/pool/c", iops="50", tps="9")))
    assert tune.retune
    assert records.io_tune(tune.attributes or {}, "a") == {"total_iops_sec": 50, "total_bytes_sec": 9}
    tune.apply(conn)
    assert conn.attributes["iops"] == "50"


SHUTOFF = libvirt.VIR_DOMAIN_SHUTOFF


@pytest.mark.parametrize(
    ("power", "domain", "error", "terminating", "state"),
    [
        (records.POWER_ON, None, "", False, mpb.MACHINE_PENDING),  # no domain (yet)
        (records.POWER_ON, (libvirt.VIR_DOMAIN_RUNNING, 1), "", False, mpb.MACHINE_RUNNING),
        (records.POWER_ON, (libvirt.VIR_DOMAIN_SHUTDOWN, 1), "", False, mpb.MACHINE_RUNNING),
        (records.POWER_ON, (libvirt.VIR_DOMAIN_PAUSED, 1), "", False, mpb.MACHINE_SUSPENDED),
        (records.POWER_ON, (libvirt.VIR_DOMAIN_CRASHED, 0), "", False, mpb.MACHINE_TERMINATED),
        (
            records.POWER_ON,
            (SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_FAILED),
            "no image",
            False,
            mpb.MACHINE_PENDING,
        ),
        (records.POWER_ON, (SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_CRASHED), "", False, mpb.MACHINE_TERMINATED),
        (records.POWER_ON, (SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_UNKNOWN), "", False, mpb.MACHINE_PENDING),
        (records.POWER_OFF, (SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN), "", False, mpb.MACHINE_SUSPENDED),
        (records.POWER_OFF, (libvirt.VIR_DOMAIN_RUNNING, 1), "", True, mpb.MACHINE_TERMINATING),
    ],
)
def test_machine_state(
    power: int, domain: tuple[int, int] | None, error: str, terminating: bool, state: int
) -> None:
    rec = MachineRecord("a" * 32, "tiny", power=power)
    assert records.machine_state(rec, domain, error, terminating) == state


def test_lifecycle_events() -> None:
    assert records.lifecycle_event(libvirt.VIR_DOMAIN_EVENT_STARTED, 0) == ("Started", "Normal", "Start")
    stopped = libvirt.VIR_DOMAIN_EVENT_STOPPED
    assert records.lifecycle_event(stopped, libvirt.VIR_DOMAIN_EVENT_STOPPED_FAILED) == (
        "StartFailed", "Warning", "Stop",
    )  # fmt: skip
    assert records.lifecycle_event(
        libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_CRASHED
    )[:2] == ("Crashed", "Warning")
    assert records.lifecycle_event(999, 0) == ("DomainEvent", "Normal", "Event")


def test_observed_generation_is_what_is_applied_whatever_the_annotations_say() -> None:
    """The poollet writes the generation it expects into an annotation; the runtime reports what it
    has applied, so the poollet's check can see a change that is not done yet."""
    rec = MachineRecord("a" * 32, "tiny", generation=1)
    rec.annotations["machinepoollet.ironcore.dev/irimachine-generation"] = "9"
    entry = Entry(rec)
    assert entry.observed_generation == 1
    rec.generation = 2  # a power change, converging in the background
    entry.power_changed()
    assert entry.observed_generation == 1
    rec.generation = 3  # a volume attached meanwhile is applied, but the power change still is not
    assert entry.observed_generation == 1
    rec.generation = 4  # another power change before the first converged
    entry.power_changed()
    assert entry.observed_generation == 1
    entry.power_pending = 0  # the convergence of generation 4 finished
    assert entry.observed_generation == 4
    msg = records.machine_message(
        records.MachineView(rec, mpb.MACHINE_RUNNING, "", entry.observed_generation)
    )
    assert (msg.metadata.generation, msg.status.observed_generation) == (4, 4)
    entry.power_changed()
    msg = records.machine_message(
        records.MachineView(rec, mpb.MACHINE_RUNNING, "", entry.observed_generation)
    )
    assert msg.status.observed_generation == 3 < int(msg.metadata.annotations[
        "machinepoollet.ironcore.dev/irimachine-generation"])  # fmt: skip


def test_index_answers_not_found_for_any_id_it_never_issued() -> None:
    index = MachineIndex()
    entry = Entry(MachineRecord("a" * 32, "tiny", labels={"k": ODD}))
    index.add(entry)
    assert index.get("a" * 32) is entry
    for never_issued in ("f" * 32, "not-an-id", "<a>&", "x" * 1000, "\x00"):
        with pytest.raises(NotFound, match="not found"):
            index.get(never_issued)
        assert index.select(never_issued) == []
    with pytest.raises(InvalidArgument, match="machine_id: must not be empty"):
        index.get("")
    assert index.select(label_selector={"k": ODD}) == [entry]
    assert index.select(label_selector={"k": ODD[:-1]}) == []
    entry.rec.deleted_at = 1
    with pytest.raises(FailedPrecondition, match="being deleted"):
        index.get_live("a" * 32)
    with pytest.raises(AlreadyExists), index.reserve("a" * 32):
        pass
    with index.reserve("b" * 32), pytest.raises(AlreadyExists), index.reserve("b" * 32):
        pass
