"""Unit tests of cloud-init beside Ignition: what counts as user data, and the NoCloud seed's content,
file and place in the domain (no libvirt needed; the ISO is read back with pycdlib)."""

from __future__ import annotations

import gzip
import io
import os
import stat
from pathlib import Path

import pycdlib
import pytest
import yaml
from ironpool.iri import guest_data
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import MACHINE_NAME_LABEL, MACHINE_UID_LABEL
from ironpool.runtime.errors import InvalidArgument
from ironpool.runtime.machine import records, seed
from ironpool.runtime.machine.classes import MachineClassSpec
from ironpool.runtime.machine.domain_xml import DomainOptions, domain_element
from ironpool.runtime.machine.model import MachineRecord, NicRecord


@pytest.mark.parametrize("data", [
    b"#cloud-config\nusers: []\n",
    b"\xef\xbb\xbf#cloud-config\n",  # a byte-order mark from an editor
    b"\n  #cloud-config\n",
    b"#!/bin/sh\necho hi\n",
    b"#include\nhttps://example.invalid/x\n",
    b"## template: jinja\n#cloud-config\n",
    b'Content-Type: multipart/mixed; boundary="==b=="\nMIME-Version: 1.0\n\n--==b==\n',
    b'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="==b=="\n\n--==b==\n',
    gzip.compress(b"#cloud-config\n", mtime=0),  # no time stamp: the same test id on every worker
])
def test_cloud_init_user_data_is_recognised(data: bytes) -> None:
    assert guest_data.is_cloud_init(data)
    assert guest_data.describe(data) == "cloud-init user data"


@pytest.mark.parametrize("data", [
    b'{"ignition": {"version": "3.4.0"}}',
    b"  {\n}",
    b"",
    b"users: []\n",  # YAML without the header: cloud-init itself would ignore it
    b"MIME-Version: 1.0\nContent-Type: text/plain\n\nhello",  # MIME, but not multipart
    b"# a comment\n",
])
def test_anything_else_is_ignition(data: bytes) -> None:
    assert not guest_data.is_cloud_init(data)


def _rec(**kw: object) -> MachineRecord:
    base: dict[str, object] = {"id": "f" * 32, "class_name": "c",
                               "labels": {MACHINE_UID_LABEL: "uid-1", MACHINE_NAME_LABEL: "web-1"}}
    return MachineRecord(**{**base, **kw})  # type: ignore[arg-type]


def test_meta_data_instance_id_is_the_machine_uid_and_hostname_falls_back_to_its_name() -> None:
    assert seed.meta_data(_rec(hostname="db")) == {"instance-id": "uid-1", "local-hostname": "db"}
    assert seed.meta_data(_rec()) == {"instance-id": "uid-1", "local-hostname": "web-1"}
    assert seed.meta_data(_rec(labels={})) == {"instance-id": "f" * 32, "local-hostname": "f" * 32}


def test_network_config_gives_the_allocated_addresses_and_one_default_route() -> None:
    nics = [NicRecord(name="a", mac="52:54:00:00:00:01", address="10.1.0.5/24"),
            NicRecord(name="b", mac="52:54:00:00:00:02", address="10.2.0.9/16"),
            NicRecord(name="c", mac="52:54:00:00:00:03")]
    assert seed.network_config(nics) == {"version": 2, "ethernets": {
        "nic0": {"match": {"macaddress": "52:54:00:00:00:01"}, "addresses": ["10.1.0.5/24"],
                 "routes": [{"to": "0.0.0.0/0", "via": "10.1.0.1"}]},
        "nic1": {"match": {"macaddress": "52:54:00:00:00:02"}, "addresses": ["10.2.0.9/16"]},
        "nic2": {"match": {"macaddress": "52:54:00:00:00:03"}, "dhcp4": True},
    }}


def _read_iso(path: Path) -> tuple[str, dict[str, bytes]]:
    iso = pycdlib.PyCdlib()
    iso.open(str(path))
    try:
        files = {}
        for name in ("user-data", "meta-data", "network-config"):
            for facade in (iso.get_rock_ridge_facade(), iso.get_joliet_facade()):
                buf = io.BytesIO()
                facade.get_file_from_iso_fp(buf, f"/{name}")
                files[name] = buf.getvalue()  # the same under both names (checked by the last read)
        return iso.pvd.volume_identifier.decode().strip(), files
    finally:
        iso.close()


def test_seed_iso_is_labelled_cidata_with_the_three_files_and_private(tmp_path: Path) -> None:
    rec = _rec(hostname="db", nics=[NicRecord(name="a", mac="52:54:00:00:00:01", address="10.1.0.5/24")])
    user_data = b"#cloud-config\npassword: s3cret\n"
    path = seed.make_seed(tmp_path, rec, user_data)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    label, files = _read_iso(path)
    assert label == "cidata"
    assert files["user-data"] == user_data
    assert yaml.safe_load(files["meta-data"]) == {"instance-id": "uid-1", "local-hostname": "db"}
    assert yaml.safe_load(files["network-config"])["ethernets"]["nic0"]["addresses"] == ["10.1.0.5/24"]
    with pytest.raises(FileExistsError):  # never written over (nor through a planted link)
        seed.make_seed(tmp_path, rec, user_data)


def test_domain_has_the_seed_as_a_read_only_virtio_disk_and_no_fw_cfg(tmp_path: Path) -> None:
    rec = _rec(seed=str(tmp_path / "seed.iso"))
    dom = domain_element(rec, DomainOptions(), tmp_path / "c.log", None, None)
    assert dom.find("sysinfo") is None
    (disk,) = [d for d in dom.iter("disk") if d.find("readonly") is not None]
    assert disk.find("source").get("file") == rec.seed  # type: ignore[union-attr]
    assert disk.find("target").attrib == {"dev": seed.SEED_TARGET, "bus": "virtio"}  # type: ignore[union-attr]
    assert disk.find("readonly") is not None
    assert disk.find("driver").get("type") == "raw"  # type: ignore[union-attr]


def test_records_note_user_data_as_no_ignition_and_keep_the_seed_device_free() -> None:
    machine = mpb.Machine(spec=mpb.MachineSpec(ignition_data=b"#cloud-config\n"))
    setattr(machine.spec, "class", "c")
    machine.spec.volumes.add(name="extra", device="odzz", local_disk=mpb.LocalDisk(size_bytes=1 << 20))
    lookups = records.Lookups(lambda ref: None, os.path.isfile, lambda _n: False)  # type: ignore[arg-type, return-value]
    cls = MachineClassSpec(name="c", resources={"cpu": 1, "memory": 1 << 27})
    with pytest.raises(InvalidArgument, match=r"volumes\[0\]\.device: .*reserved for the cloud-init seed"):
        records.plan_machine(machine, "a" * 32, cls, Path("/nonexistent"), lookups, "", 0)
    del machine.spec.volumes[:]
    assert records.plan_machine(machine, "a" * 32, cls, Path("/x"), lookups, "", 0).rec.ignition is False
    machine.spec.ignition_data = b'{"ignition": {"version": "3.4.0"}}'
    assert records.plan_machine(machine, "a" * 32, cls, Path("/x"), lookups, "", 0).rec.ignition is True


def test_ignition_3_gets_the_hostname_as_etc_hostname_unless_it_sets_one() -> None:
    import json

    from ironpool.runtime.machine.ignition import with_hostname

    config = {"ignition": {"version": "3.4.0"}, "passwd": {"users": [{"name": "root"}]}}
    got = json.loads(with_hostname(json.dumps(config).encode(), "web 1"))
    assert got["passwd"] == config["passwd"]
    assert got["storage"]["files"] == [{"path": "/etc/hostname", "mode": 0o644, "overwrite": True,
                                        "contents": {"source": "data:,web%201%0A"}}]
    own = {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/hostname"}]}}
    for unchanged in (json.dumps(own).encode(), b'{"ignition": {"version": "2.2.0"}}', b"not json", b"[1]"):
        assert with_hostname(unchanged, "web") == unchanged
    assert with_hostname(json.dumps(config).encode(), "") == json.dumps(config).encode()
