"""Pure parts of the poollets: class mapping, capacity figures, IRI translation, CLI parsing."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from ironpool.api.compute import Machine
from ironpool.cli.common import quantity_option
from ironpool.cli.connection import read_token
from ironpool.cli.poollet_cmd import _addresses, _console_options
from ironpool.client.config import ConfigError
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import EFI_VARS_ANNOTATION
from ironpool.poollet import keys
from ironpool.poollet.capacity import HostResources, fits, machine_pool_resources, volume_pool_resources
from ironpool.poollet.classes import ClassMapper, RuntimeClass, capabilities_to_iri
from ironpool.poollet.machine_iri import build_machine, compute_status, device_names, waiting_status
from ironpool.poollet.waiting import Dependency, Waiting

GiB = 1024**3


def test_class_mapper_prefers_same_name_with_equal_capabilities_then_identical_capabilities() -> None:
    small = RuntimeClass("small", {"cpu": 1, "memory": GiB})
    alias = RuntimeClass("s1", {"cpu": 2, "memory": 2 * GiB})
    mapper = ClassMapper([small, alias])
    assert mapper.lookup("small", {"cpu": 1, "memory": GiB}).runtime_class == small
    # Same name but different capabilities: IronCore falls back to a capabilities match.
    assert mapper.lookup("small", {"cpu": 2, "memory": 2 * GiB}).runtime_class == alias
    miss = mapper.lookup("big", {"cpu": 8, "memory": GiB})
    assert miss.runtime_class is None and "no runtime class" in miss.reason
    twins = ClassMapper([small, RuntimeClass("small-too", {"cpu": 1, "memory": GiB})])
    amb = twins.lookup("other", {"cpu": 1, "memory": GiB})
    assert amb.runtime_class is None and "several" in amb.reason


def test_capabilities_to_iri_rounds_cpu_up_and_memory_to_bytes() -> None:
    assert capabilities_to_iri({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}) == {
        "cpu": 1, "memory": GiB, "nvidia.com/gpu": 1}


def test_machine_pool_resources_share_cpu_memory_and_derive_class_counts_from_what_is_free() -> None:
    classes = {"small": {"cpu": 1, "memory": GiB}, "big": {"cpu": 4, "memory": 8 * GiB}}
    cap, alloc = machine_pool_resources(HostResources(8, 16 * GiB), HostResources(6, 14 * GiB), classes,
                                        [classes["big"], classes["small"]])
    assert cap == {"cpu": "8", "memory": "16Gi", "class/machine.big": "2", "class/machine.small": "8"}
    # allocatable cpu/memory are not reduced by bound machines; class counts are (6-5=1 cpu, 14-9=5Gi)
    assert alloc == {"cpu": "6", "memory": "14Gi", "class/machine.big": "0", "class/machine.small": "1"}
    # Overbooked (e.g. reserved grew): counts clamp at zero, never negative.
    _, over = machine_pool_resources(HostResources(2, GiB), HostResources(1, GiB), classes,
                                     [classes["big"], classes["big"]])
    assert over["class/machine.small"] == "0" and over["class/machine.big"] == "0"
    assert fits(HostResources(4, 4 * GiB), {"cpu": 0, "memory": GiB}) == 0


def test_volume_pool_resources_are_bytes() -> None:
    cap, alloc = volume_pool_resources(100 * GiB, 80 * GiB, ["fast"], 30 * GiB)
    assert cap == {"storage": "100Gi", "class/volume.fast": "100Gi"}
    assert alloc == {"storage": "80Gi", "class/volume.fast": "50Gi"}


def _machine(**spec: object) -> Machine:
    return Machine.model_validate({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "u-1", "generation": 3},
        "spec": {"machineClassRef": {"name": "small"}, **spec}})


def test_device_names_fill_gaps_like_ironcore_admission() -> None:
    m = _machine(volumes=[{"name": "a", "emptyDisk": {}}, {"name": "b", "device": "oda", "emptyDisk": {}},
                          {"name": "c", "emptyDisk": {}}])
    assert device_names(m.spec.volumes or []) == {"a": "odb", "b": "oda", "c": "odc"}


def test_build_machine_carries_ironcore_labels_annotations_and_local_disks() -> None:
    m = _machine(volumes=[{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "2Gi"}}],
                 guestConfig={"hostname": "vm"})
    from ironpool.poollet.machine_iri import local_disk_volume

    iri = build_machine(m, "small", b"ign", [local_disk_volume(m.spec.volumes[0], "oda")], [])  # type: ignore[index]
    assert dict(iri.metadata.labels) == {keys.MACHINE_UID_LABEL: "u-1", keys.MACHINE_NAMESPACE_LABEL: "ns",
                                         keys.MACHINE_NAME_LABEL: "vm"}
    assert iri.metadata.annotations[keys.MACHINE_GENERATION_ANNOTATION] == "3"
    assert iri.spec.volumes[0].local_disk.image.image == "tiny"
    assert iri.spec.volumes[0].local_disk.size_bytes == 2 * GiB
    assert (getattr(iri.spec, "class"), iri.spec.ignition_data, iri.spec.guest_config.hostname) == (
        "small", b"ign", "vm")


def test_compute_status_maps_states_and_reports_pending_volumes() -> None:
    m = _machine(volumes=[{"name": "a", "emptyDisk": {}}, {"name": "b", "emptyDisk": {}}])
    iri = mpb.Machine()
    iri.metadata.id = "abc"
    iri.metadata.annotations[keys.MACHINE_GENERATION_ANNOTATION] = "3"
    iri.status.state = mpb.MACHINE_SUSPENDED
    iri.status.volumes.append(mpb.VolumeStatus(name="a", handle="h", state=mpb.VOLUME_ATTACHED))
    st = compute_status(m, iri, "rt", "2026-01-01T00:00:00Z")
    assert (st["machineID"], st["state"], st["observedGeneration"]) == ("rt://abc", "Shutdown", 3)
    assert [(v["name"], v["state"]) for v in st["volumes"]] == [("a", "Attached"), ("b", "Pending")]
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Ready"]["status"] == "False"
    vr = conds["VolumesReady"]
    assert (vr["status"], vr["reason"]) == ("False", "VolumeNotReady: b")
    w = waiting_status(m, [Waiting(Dependency.VOLUME, "ns/x", "not found")], "t")
    assert w["conditions"][0]["message"] == "waiting for Volume ns/x (not found)"


def test_cli_parsing(tmp_path: Path) -> None:
    plain, csv = tmp_path / "t1", tmp_path / "t2"
    plain.write_text("secret-token\n")
    csv.write_text('abc123,admin,1,"system:masters"\n')
    assert read_token(plain) == "secret-token"
    assert read_token(csv) == "abc123"
    (tmp_path / "empty").write_text("")
    with pytest.raises(ConfigError, match=r"--token-file: .* holds no token"):
        read_token(tmp_path / "empty")
    assert _addresses(("InternalIP=10.0.0.1",)) == (("InternalIP", "10.0.0.1"),)
    with pytest.raises(click.BadParameter, match="TYPE=ADDRESS"):
        _addresses(("Bogus=1",))
    assert quantity_option("16Gi", "--capacity-memory") == 16 * GiB
    with pytest.raises(click.BadParameter, match="must not be negative"):
        quantity_option("-1", "--capacity-cpu")


def test_console_endpoint_flags_go_together_and_name_what_is_wrong(tmp_path: Path) -> None:
    token = tmp_path / "exec.token"
    token.write_text("s3cret\n")
    assert _console_options(None, None) == {}
    assert _console_options("10.0.0.5:20250", token) == {"exec_address": ("10.0.0.5", 20250),
                                                         "exec_token": "s3cret"}
    assert _console_options(":0", token)["exec_address"] == ("0.0.0.0", 0)  # every address, a free port
    assert _console_options("[::1]:20250", token)["exec_address"] == ("::1", 20250)
    for half in (("127.0.0.1:20250", None), (None, token)):
        with pytest.raises(click.UsageError, match="--exec-address and --exec-token-file go together"):
            _console_options(*half)
    for bad in ("20250", "host:http", "host:70000"):
        with pytest.raises(click.BadParameter, match="HOST:PORT"):
            _console_options(bad, token)


def test_probe_health_tolerates_isolated_failures_but_not_a_run_of_them() -> None:
    from ironpool.poollet.pool import ProbeHealth

    health = ProbeHealth(threshold=3)
    assert health.record(False, "slow") == (True, "slow (failure 1 of 3 tolerated)")
    assert health.record(True, "fine") == (True, "fine")  # a success resets the run
    assert health.record(False, "slow")[0] is True
    assert health.record(False, "slow")[0] is True
    assert health.record(False, "down") == (False, "down")
    assert health.record(False, "down") == (False, "down")
    assert health.record(True, "back") == (True, "back")


def test_build_machine_hands_efi_vars_to_the_runtime_in_an_annotation() -> None:
    efi = [{"name": "SbatLevel", "uuid": "605dab50-e046-4300-abb6-3dd810dd8b23", "value": "c2JhdCwx"}]
    iri = build_machine(_machine(efiVars=efi), "small", b"", [], [])
    assert json.loads(iri.metadata.annotations[EFI_VARS_ANNOTATION]) == efi
    assert EFI_VARS_ANNOTATION not in build_machine(_machine(), "small", b"", [], []).metadata.annotations


def test_build_machine_creates_with_the_declared_power() -> None:
    """Off at create: the runtime defines the domain and never boots it (no first boot to undo)."""
    assert build_machine(_machine(power="Off"), "small", b"", [], []).spec.power == mpb.POWER_OFF
    assert build_machine(_machine(), "small", b"", [], []).spec.power == mpb.POWER_ON


@pytest.mark.parametrize(("data", "key", "want", "problem"), [
    ({"ignition.yaml": '{"ignition": {}}', "user-data": "#cloud-config\n"}, None, b'{"ignition": {}}', ""),
    ({"user-data": "#cloud-config\nusers: []\n"}, None, b"#cloud-config\nusers: []\n", ""),
    ({"user-data": "users: []\n"}, None, None, "key 'user-data' is not cloud-init user data"),
    ({"other": "x"}, None, None, "has neither key 'ignition.yaml' nor 'user-data'"),
    ({"mine": "#cloud-config\n"}, "mine", b"#cloud-config\n", ""),
    # What the API fills in when no key is named: the Secret's user-data serves all the same.
    ({"user-data": "#cloud-config\n"}, "ignition.yaml", b"#cloud-config\n", ""),
    ({"ignition.yaml": "{}", "user-data": "#cloud-config\n"}, "ignition.yaml", b"{}", ""),
    ({"other": "x"}, "ignition.yaml", None, "has neither key 'ignition.yaml' nor 'user-data'"),
    ({"user-data": "#!/bin/sh\n"}, "user-data", b"#!/bin/sh\n", ""),
    ({"user-data": "{}"}, "user-data", None, "key 'user-data' is not cloud-init user data"),
    ({"user-data": "#cloud-config\n"}, "mine", None, "has no key 'mine'"),
])
def test_boot_data_comes_from_the_named_key_else_user_data(
    data: dict[str, str], key: str | None, want: bytes | None, problem: str
) -> None:
    from ironpool.api.core import Secret
    from ironpool.poollet.machine_controller import Dependencies, MachineReconciler

    secret = Secret.model_validate({"metadata": {"name": "s", "namespace": "ns"}, "stringData": data})
    deps = Dependencies()
    got = MachineReconciler._boot_data(secret, key, deps)
    assert got.startswith(problem) if problem else got == ""
    assert deps.ignition == (want or b"")


def test_images_pull_secret_goes_with_the_image_and_the_booted_digest_comes_back() -> None:
    from ironpool.poollet.machine_iri import failed_status, local_disk_volume

    m = _machine(volumes=[{"name": "root", "localDisk": {"image": "127.0.0.1:5000/os/d:1"}},
                          {"name": "scratch", "localDisk": {"sizeLimit": "1Gi"}}])
    secret = {".dockerconfigjson": b'{"auths": {}}'}
    vols = m.spec.volumes or []
    root, scratch = local_disk_volume(vols[0], "oda", secret), local_disk_volume(vols[1], "odb", secret)
    assert dict(root.local_disk.image.pull_secret_data) == secret
    assert not scratch.local_disk.HasField("image")  # no image, no credentials
    iri = mpb.Machine()
    iri.status.state = mpb.MACHINE_RUNNING
    iri.status.image_ref = "127.0.0.1:5000/os/d:1@sha256:" + "a" * 64
    assert compute_status(m, iri, "rt", "t")["imageRef"] == iri.status.image_ref
    assert "imageRef" not in compute_status(m, mpb.Machine(), "rt", "t")
    message = "image 127.0.0.1:5000/os/d:1 is being pulled (3 of 9 MiB)"
    pulling = failed_status(m, message, "t", "ImagePulling")
    assert (pulling["state"], pulling["conditions"][0]["reason"]) == ("Pending", "ImagePulling")


class _Listing:
    """What the pool reconciler reads of an informer."""

    def __init__(self, items: list[object]) -> None:
        self.items = items

    def list(self) -> list[object]:
        return self.items


def test_pool_status_overcommits_cpu_by_the_ratio_and_counts_what_reservations_hold() -> None:
    from ironpool.api.compute import MachineClass, MachinePool, Reservation
    from ironpool.poollet.machinepool import MachinePoolReconciler
    from ironpool.poollet.pool import PoolIdentity

    tiny = MachineClass.model_validate({"metadata": {"name": "x"},
                                        "capabilities": {"cpu": "1", "memory": "1Gi"}})
    within = Machine.model_validate({"metadata": {"name": "m", "namespace": "ns",
                                                  "labels": {"compute.ironcore.dev/reservation": "r"}},
                                     "spec": {"machineClassRef": {"name": "x"},
                                              "machinePoolRef": {"name": "p"}}})
    held = Reservation.model_validate({
        "metadata": {"name": "r", "namespace": "ns"}, "spec": {"resources": {"class/machine.x": "3"}},
        "status": {"pools": [{"ref": "p", "state": "Accepted", "resources": {"class/machine.x": "3"}},
                             {"ref": "other", "state": "Accepted", "resources": {"class/machine.x": "9"}}]}})
    reconciler = MachinePoolReconciler(
        None, None, PoolIdentity("p", "x://p"), _Listing([within]), _Listing([tiny]),  # type: ignore[arg-type]
        ClassMapper([RuntimeClass("x", {"cpu": 1, "memory": GiB})]), capacity=HostResources(2, 8 * GiB),
        reserved=HostResources(0, GiB), cpu_allocation_ratio=3.5, reservations=_Listing([held]))  # type: ignore[arg-type]
    pool = MachinePool.model_validate({"metadata": {"name": "p"}})
    status = reconciler.desired_status(pool, True, "ok", "2026-01-01T00:00:00Z")
    # capacity is the host's; allocatable its cores times 3.5 and its memory less 1Gi
    assert (status["capacity"]["cpu"], status["allocatable"]["cpu"], status["allocatable"]["memory"]) == (
        "2", "7", "7Gi")
    # 7 cores: 1 machine bound (within r) and 2 more held by r: 4 x left
    assert status["allocatable"]["class/machine.x"] == "4"
