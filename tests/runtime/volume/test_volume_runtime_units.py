"""Fast checks without libvirtd: class manifests, request validation, sidecar files, event filters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ironpool.runtime.events import EventRing, RuntimeEvent
from ironpool.runtime.volume.classes import ClassFileError, parse_classes
from ironpool.runtime.volume.records import SnapshotRecord, VolumeRecord
from ironpool.runtime.volume.sidecar import SidecarStore

_ONE_CLASS = "kind: VolumeClass\napiVersion: storage.ironcore.dev/v1alpha1\nmetadata: {name: a}\n"


@pytest.mark.parametrize(
    ("text", "value"),
    [("100Mi", 100 << 20), ("1k", 1000), ("1e3", 1000), ("1.5", 2), ("500m", 1), ("7", 7), ("1Gi", 1 << 30)],
)
def test_quantities(text: str, value: int) -> None:
    assert parse_classes(_ONE_CLASS + f"capabilities: {{tps: '{text}'}}\n")["a"].tps == value


@pytest.mark.parametrize("text", ["", "lots", "1Qi", "1..2", "--1"])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(ClassFileError, match=r"capabilities\.iops: not a quantity"):
        parse_classes(_ONE_CLASS + f"capabilities: {{iops: '{text}'}}\n")


def test_parse_classes_skips_other_kinds_and_reads_lists() -> None:
    text = """
apiVersion: compute.ironcore.dev/v1alpha1
kind: MachineClass
metadata: {name: m}
---
apiVersion: v1
kind: List
items:
- apiVersion: storage.ironcore.dev/v1alpha1
  kind: VolumeClass
  metadata: {name: fast}
  capabilities: {tps: 100Mi, iops: 1k}
  resizePolicy: ExpandOnly
- apiVersion: storage.ironcore.dev/v1alpha1
  kind: VolumeClass
  metadata: {name: plain}
"""
    classes = parse_classes(text)
    assert classes["fast"].tps == 100 << 20 and classes["fast"].iops == 1000
    assert classes["plain"].tps == 0 and classes["plain"].iops == 0
    assert set(classes) == {"fast", "plain"}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("kind: MachineClass\n", ["no VolumeClass"]),
        ("kind: VolumeClass\napiVersion: v1\nmetadata: {name: a}\n", ["apiVersion"]),
        ("kind: VolumeClass\napiVersion: storage.ironcore.dev/v1alpha1\nmetadata: {}\n", ["metadata.name"]),
        (
            "kind: VolumeClass\napiVersion: storage.ironcore.dev/v1alpha1\nmetadata: {name: a}\n"
            "capabilities: {tps: -5}\n",
            ["capabilities.tps", "negative"],
        ),
        (
            "kind: VolumeClass\napiVersion: storage.ironcore.dev/v1alpha1\nmetadata: {name: a}\n---\n"
            "kind: VolumeClass\napiVersion: storage.ironcore.dev/v1alpha1\nmetadata: {name: a}\n",
            ["twice"],
        ),
        ("a: [", ["not valid YAML"]),
    ],
)
def test_bad_class_files(text: str, words: list[str]) -> None:
    with pytest.raises(ClassFileError) as err:
        parse_classes(text)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_sidecar_roundtrip_and_atomic_files(tmp_path: Path) -> None:
    store = SidecarStore(tmp_path / "meta")
    store.ensure()
    vol = VolumeRecord(
        id="a" * 32,
        phase="ready",
        created_at=5,
        class_name="fast",
        storage_bytes=1 << 30,
        labels={"k": "v"},
        annotations={"x": "<&>"},
    )
    snap = SnapshotRecord(id="b" * 32, phase="creating", created_at=6, volume_id="a" * 32, size=7)
    store.write(vol)
    store.write(snap)
    (tmp_path / "meta" / ".tmp-dead.json").write_text("{")  # a crashed write
    (tmp_path / "meta" / f"{'c' * 32}.volume.json").write_text("not json")
    volumes, snapshots, problems = store.load_all()
    assert volumes == [vol] and snapshots == [snap]
    assert len(problems) == 1 and "unreadable" in problems[0]
    assert not (tmp_path / "meta" / ".tmp-dead.json").exists()
    assert json.loads((tmp_path / "meta" / f"{'a' * 32}.volume.json").read_text())["annotations"] == {
        "x": "<&>"
    }
    store.remove("volume", vol.id)
    store.remove("volume", vol.id)  # idempotent
    assert not store.exists("volume", vol.id)


def test_event_filters() -> None:
    log = EventRing(max_events=2)
    for i in range(3):
        log.add(
            RuntimeEvent(f"id{i}", {"n": str(i)}, {}, "Created", "m", "Normal", "Create", event_time=100 + i)
        )
    assert [e.object_id for e in log.list()] == ["id1", "id2"]  # bounded
    assert [e.object_id for e in log.list(label_selector={"n": "2"})] == ["id2"]
    assert [e.object_id for e in log.list(object_id="id1")] == ["id1"]
    assert [e.object_id for e in log.list(from_time=102)] == ["id2"]
    assert [e.object_id for e in log.list(to_time=101)] == ["id1"]


def test_pool_reconnects_after_the_connection_drops() -> None:
    from ironpool.runtime.volume.host import StorageHost
    from ironpool.runtime.volume.pool import StoragePool

    # libvirt's built-in test driver: its "default-pool" is a dir pool, enough for this path.
    pool = StoragePool(StorageHost("test:///default"), "default-pool", Path("/default-pool"))
    pool.ensure()
    before = set(pool.list_volumes())
    pool.host.connection.get().close()  # what a libvirtd restart does to us
    assert set(pool.list_volumes()) == before
    pool.host.close()


def test_pool_of_another_type_is_refused_on_the_test_driver() -> None:
    import libvirt
    from ironpool.runtime.volume.host import StorageHost
    from ironpool.runtime.volume.pool import PoolConfigError, StoragePool

    conn = libvirt.open("test:///default")  # each open of test:///default shares one in-process state
    conn.storagePoolDefineXML(
        "<pool type='logical'><name>vg</name><source><name>vg</name></source>"
        "<target><path>/dev/vg</path></target></pool>",
        0,
    )
    try:
        with pytest.raises(PoolConfigError, match="type 'logical'"):
            StoragePool(StorageHost("test:///default"), "vg", Path("/x")).ensure()
    finally:
        conn.storagePoolLookupByName("vg").undefine()
        conn.close()
