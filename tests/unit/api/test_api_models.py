"""The pydantic models used directly from Python (as poollets and the scheduler do)."""

from __future__ import annotations

from ironpool.api import (
    LocalObjectReference,
    Machine,
    MachineSpec,
    ObjectMeta,
    Taint,
    Toleration,
    parse_quantity,
    resolve,
    tolerates_taints,
    validate_create,
)
from ironpool.api.compute import MachinePool, MachinePoolStatus, MachineVolume


def test_build_by_field_name_and_dump_by_json_name() -> None:
    m = Machine(
        api_version="compute.ironcore.dev/v1alpha1",
        kind="Machine",
        metadata=ObjectMeta(name="web-1", namespace="default", labels={"app": "web"}),
        spec=MachineSpec(
            machine_class_ref=LocalObjectReference(name="t3-small"),
            volumes=[MachineVolume(name="root", volume_ref=LocalObjectReference(name="root-vol"))],
        ),
    )
    d = m.to_dict()
    assert d["spec"]["machineClassRef"] == {"name": "t3-small"}
    assert d["spec"]["volumes"] == [{"name": "root", "volumeRef": {"name": "root-vol"}}]
    assert validate_create(resolve("machine"), d)["spec"]["volumes"][0]["device"] == "oda"


def test_parse_stored_object_and_read_quantities() -> None:
    pool = MachinePool.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {"providerID": "libvirt://host-a"},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi"}},
        }
    )
    assert pool.spec.provider_id == "libvirt://host-a"
    assert isinstance(pool.status, MachinePoolStatus) and pool.status.capacity is not None
    assert pool.status.capacity["memory"] == parse_quantity("32768Mi")
    assert pool.status.capacity["cpu"].value() == 8


def test_tolerations() -> None:
    taints = [Taint(key="dedicated", value="gpu", effect="NoSchedule")]
    assert not tolerates_taints(None, taints)
    assert tolerates_taints(None, None)
    assert tolerates_taints([Toleration(key="dedicated", value="gpu")], taints)
    assert not tolerates_taints([Toleration(key="dedicated", value="cpu")], taints)
    assert tolerates_taints([Toleration(key="dedicated", operator="Exists", effect="NoSchedule")], taints)
    assert not tolerates_taints([Toleration(key="dedicated", operator="Exists", effect="NoExecute")], taints)
    assert tolerates_taints([Toleration(operator="Exists")], taints)
