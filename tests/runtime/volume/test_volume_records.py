"""Pure checks of the volume runtime's records: request checks, id lookups, IRI messages."""

from __future__ import annotations

import pytest
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.runtime.errors import InvalidArgument, NotFound
from ironpool.runtime.volume import records
from ironpool.runtime.volume.classes import VolumeClassSpec
from ironpool.runtime.volume.records import CreateVolumeArgs, SnapshotRecord, VolumeRecord

CLASSES = {"fast": VolumeClassSpec("fast", tps=100, iops=7), "plain": VolumeClassSpec("plain")}
ODD = "v<&>\"']]>\n é"


def _args(**kw: object) -> CreateVolumeArgs:
    base: dict[str, object] = {
        "class_name": "fast",
        "storage_bytes": 1 << 30,
        "labels": {},
        "annotations": {},
    }
    return CreateVolumeArgs(**{**base, **kw})  # type: ignore[arg-type]


def test_create_args_from_the_request_ignore_a_client_id() -> None:
    spec = vpb.VolumeSpec(resources=vpb.VolumeResources(storage_bytes=5))
    setattr(spec, "class", "fast")
    spec.volume_data_source.snapshot_data_source.snapshot_id = "s"
    spec.encryption.secret_data["encryptionKey"] = b"x"
    vol = vpb.Volume(spec=spec)
    vol.metadata.id = "<mine>"
    vol.metadata.labels["a"] = ODD
    args = records.create_args(vol)
    assert args == CreateVolumeArgs("fast", 5, {"a": ODD}, {}, "", "s", encryption={"encryptionKey": b"x"})


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        (_args(class_name=""), InvalidArgument, "volume.spec.class: required"),
        (_args(class_name="<gold/>"), InvalidArgument, "unknown volume class '<gold/>' (known: fast, plain)"),
        (_args(storage_bytes=0), InvalidArgument, "storage_bytes: must be greater than 0"),
        (_args(labels={"": "x"}), InvalidArgument, "volume.metadata.labels: keys must not be empty"),
        (_args(annotations={"a": "\x00"}), InvalidArgument, "volume.metadata.annotations['a']: NUL"),
        (_args(image="i", snapshot_id="s"), InvalidArgument, "either an image or a snapshot"),
    ],
)
def test_volume_class_refuses(args: CreateVolumeArgs, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as err:
        records.volume_class(args, CLASSES)
    assert words in str(err.value)


def test_an_encryption_key_is_required_and_kept_out_of_reprs() -> None:
    spec = vpb.VolumeSpec(resources=vpb.VolumeResources(storage_bytes=5))
    setattr(spec, "class", "fast")
    spec.encryption.secret_data["other"] = b"x"
    with pytest.raises(InvalidArgument) as err:
        records.volume_class(records.create_args(vpb.Volume(spec=spec)), CLASSES)
    assert "volume.spec.encryption.secret_data: needs a non-empty 'encryptionKey'" in err.value.message
    args = _args(encryption={"encryptionKey": b"very-secret-key"})
    assert "very-secret-key" not in repr(args)
    assert records.volume_class(args, CLASSES) == CLASSES["fast"]


def test_labels_and_annotations_are_any_text() -> None:
    """What the machine runtime accepts; the volume runtime once refused non-Kubernetes label values."""
    args = _args(labels={"name": "<evil>&'", "a<b": ODD, "k": "a" * 64}, annotations={"]]>": ODD})
    assert records.volume_class(args, CLASSES) == CLASSES["fast"]


def test_lookup_is_not_found_for_any_id_never_issued() -> None:
    objects = {"a" * 32: "vol"}
    assert records.lookup(objects, "a" * 32, "volume_id", "volume") == "vol"
    for never_issued in ("0" * 32, "x" * 100, "<a>", "a/b", "../etc", "\x00"):
        with pytest.raises(NotFound, match=r"^volume_id: volume .* not found$"):
            records.lookup(objects, never_issued, "volume_id", "volume")
    with pytest.raises(InvalidArgument, match=r"^volume_id: required"):
        records.lookup(objects, "", "volume_id", "volume")


def _view(error: str = "", cls: str = "fast") -> records.VolumeView:
    rec = VolumeRecord(
        id="a" * 32, phase="ready", created_at=9, class_name=cls, storage_bytes=1 << 30,
        tps=CLASSES[cls].tps, iops=CLASSES[cls].iops, labels={"l": ODD}, annotations={"a": ODD}, image="img",
    )  # fmt: skip
    return records.VolumeView(rec, f"/pool/{rec.libvirt_name}", 2 << 30, error)


def test_volume_message_available_and_error() -> None:
    msg = records.volume_message(_view(), "p")
    assert (msg.metadata.id, msg.metadata.created_at) == ("a" * 32, 9)
    assert dict(msg.metadata.labels) == {"l": ODD} and dict(msg.metadata.annotations) == {"a": ODD}
    assert getattr(msg.spec, "class") == "fast" and msg.spec.resources.storage_bytes == 1 << 30
    assert msg.spec.volume_data_source.image_data_source.image == "img"
    assert msg.status.state == vpb.VOLUME_AVAILABLE and msg.status.resources.storage_bytes == 2 << 30
    assert msg.status.access.driver == "ironpool-local" and msg.status.access.handle == "a" * 32
    assert dict(msg.status.access.attributes) == {
        "path": f"/pool/{'a' * 32}.qcow2", "format": "qcow2", "pool": "p", "volume": f"{'a' * 32}.qcow2",
        "iops": "7", "tps": "100",
    }  # fmt: skip
    assert "iops" not in records.volume_message(_view(cls="plain"), "p").status.access.attributes
    broken = records.volume_message(_view(error="gone"), "p")
    assert broken.status.state == vpb.VOLUME_ERROR and not broken.status.HasField("access")
    assert [(c.reason, c.message) for c in broken.status.volume_conditions] == [
        ("BackingVolumeMissing", "gone")
    ]


def test_snapshot_and_class_messages() -> None:
    snap = SnapshotRecord(
        id="b" * 32, phase="ready", created_at=3, volume_id="a" * 32, size=5, labels={"k": ODD}
    )
    msg = records.snapshot_message(records.SnapshotView(snap, "/pool/s"))
    assert (msg.spec.volume_id, msg.status.size, msg.status.state) == ("a" * 32, 5, vpb.VOLUME_SNAPSHOT_READY)
    assert dict(msg.metadata.labels) == {"k": ODD}
    status = records.class_status_message(CLASSES["fast"], 42)
    assert (status.volume_class.name, status.volume_class.capabilities.iops, status.quantity) == (
        "fast",
        7,
        42,
    )
