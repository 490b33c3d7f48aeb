"""Per-kind strategies as pure objects: registration, hooks, update rules and printer columns."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from ironpool.api import errors
from ironpool.api.columns import AGE, NAME, Column, age, field, free_of, human_bytes, involved, taints
from ironpool.api.compute import DEFAULT_IGNITION_KEY, Machine
from ironpool.api.core import Namespace
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import RESOURCES, resolve, strategy_for
from ironpool.api.strategies import STRATEGIES
from ironpool.api.strategies.volume import resize_errors
from ironpool.api.strategy import Strategy
from ironpool.api.validation import validate_create, validate_update

COMPUTE = "compute.ironcore.dev/v1alpha1"


def test_every_served_resource_is_a_registered_strategy_in_order() -> None:
    assert tuple(s.info for s in STRATEGIES) == RESOURCES
    assert [r.kind for r in RESOURCES] == [
        "MachineClass", "MachinePool", "Machine", "Reservation", "VolumeClass", "VolumePool", "Volume",
        "VolumeSnapshot",
        "ResourceQuota", "Network", "NetworkInterface", "Prefix", "Secret", "Namespace", "Event", "Lease",
        "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "CertificateSigningRequest",
    ]
    for info in RESOURCES:
        assert strategy_for(info).info is info
        assert strategy_for(info).columns[0].header in ("NAME", "LAST SEEN")


def test_dns_label_names_follow_ironcore() -> None:
    labelled = {s.info.kind for s in STRATEGIES if s.name_is_dns_label}
    assert labelled == {"Machine", "Reservation", "MachineClass", "VolumeClass", "Namespace"}
    with pytest.raises(errors.Invalid) as exc:
        validate_create(resolve("machineclass"), {
            "apiVersion": COMPUTE, "kind": "MachineClass", "metadata": {"name": "a.b"},
            "capabilities": {"cpu": "1", "memory": "1Gi"}})
    assert [c.field for c in exc.value.causes] == ["metadata.name"]


def test_machine_defaults_run_on_the_typed_model() -> None:
    strategy = strategy_for(resolve("machine"))
    machine = Machine.model_validate({
        "apiVersion": COMPUTE, "kind": "Machine", "metadata": {"name": "m", "namespace": "default"},
        "spec": {"machineClassRef": {"name": "c"}, "ignitionRef": {"name": "ign"},
                 "volumes": [{"name": "a", "device": "oda", "emptyDisk": {}},
                             {"name": "b", "emptyDisk": {}}]},
    })
    errs = FieldErrors()
    strategy.default(machine, errs)
    assert not errs
    assert machine.spec.ignition_ref is not None and machine.spec.ignition_ref.key == DEFAULT_IGNITION_KEY
    assert [v.device for v in machine.spec.volumes or []] == ["oda", "odb"]


def test_machine_update_rules_name_the_field() -> None:
    strategy = strategy_for(resolve("machine"))
    old = {"spec": {"machineClassRef": {"name": "a"}, "machinePoolRef": {"name": "p"}}}
    errs = FieldErrors()
    strategy.validate_update(old, {"spec": {"machineClassRef": {"name": "b"}}}, errs)
    assert {(c.field, c.reason) for c in errs.causes} == {
        ("spec.machineClassRef", "FieldValueInvalid"), ("spec.machinePoolRef", "FieldValueInvalid")}
    assert all("immutable" in c.message for c in errs.causes)


def test_pool_provider_id_is_fixed_once_set() -> None:
    strategy = strategy_for(resolve("volumepool"))
    errs = FieldErrors()
    strategy.validate_update({"spec": {}}, {"spec": {"providerID": "x"}}, errs)
    assert not errs
    strategy.validate_update({"spec": {"providerID": "x"}}, {"spec": {"providerID": "y"}}, errs)
    assert [c.field for c in errs.causes] == ["spec.providerID"]


def test_namespace_phases_come_from_its_strategy() -> None:
    strategy = strategy_for(resolve("ns"))
    assert strategy.finalized_by_controller
    created = validate_create(resolve("ns"), {"metadata": {"name": "team-a"}})
    assert created["status"] == {"phase": "Active"}
    strategy.prepare_for_delete(created)
    assert created["status"] == {"phase": "Terminating"}
    assert not any(s.finalized_by_controller for s in STRATEGIES if s.info.kind != "Namespace")


def test_secret_canonical_form_folds_string_data() -> None:
    obj: dict[str, Any] = {"data": {"a": "YQ=="}, "stringData": {"b": "b"}}
    strategy_for(resolve("secret")).canonicalize(obj)
    assert obj == {"data": {"a": "YQ==", "b": "Yg=="}}


def test_spec_of_is_everything_but_identity_metadata_and_status() -> None:
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "status": {},
           "data": {"k": "dg=="}, "type": "Opaque"}
    assert strategy_for(resolve("secret")).spec_of(obj) == {"data": {"k": "dg=="}, "type": "Opaque"}


def test_resize_policy() -> None:
    old = {"spec": {"resources": {"storage": "10Gi"}}}
    grow = {"spec": {"resources": {"storage": "20Gi"}}}
    assert not resize_errors({"resizePolicy": "ExpandOnly"}, old, grow)
    assert [c.field for c in resize_errors({"metadata": {"name": "c"}}, old, grow).causes] == [
        "spec.resources.storage"]
    shrink = resize_errors({"resizePolicy": "ExpandOnly"}, grow, old).causes
    assert "cannot shrink" in shrink[0].message


class _Labelled(Strategy[Namespace]):
    """A strategy with one rule and one update rule, to show what the shared pipeline calls."""

    info: ClassVar[ResourceInfo] = resolve("ns")
    calls: ClassVar[list[str]] = []

    def validate(self, obj: Namespace, errs: FieldErrors) -> None:
        self.calls.append("validate")
        if not (obj.metadata.labels or {}).get("team"):
            errs.required("metadata.labels[team]")

    def validate_update(self, old: dict[str, Any], new: dict[str, Any], errs: FieldErrors) -> None:
        self.calls.append("validate_update")


def test_a_strategy_needs_only_its_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    import ironpool.api.resources as resources

    info = resolve("ns")
    monkeypatch.setitem(resources._STRATEGY_OF, (info.api_version, info.kind), _Labelled())
    with pytest.raises(errors.Invalid) as exc:
        validate_create(info, {"metadata": {"name": "x"}})
    assert [c.field for c in exc.value.causes] == ["metadata.labels[team]"]
    ok = validate_create(info, {"metadata": {"name": "x", "labels": {"team": "a"}}})
    assert ok["metadata"]["labels"] == {"team": "a"} and "status" not in ok  # no Namespace defaults
    validate_update(info, ok, ok)
    assert _Labelled.calls == ["validate", "validate", "validate", "validate_update"]


def test_columns() -> None:
    assert human_bytes("24684092Ki") == "23.5Gi" and human_bytes("512") == "512"
    pool = {"status": {"allocatable": {"cpu": "7", "memory": "15Gi"}, "capacity": {"cpu": "8"}}}
    assert free_of("cpu")(pool) == "7/8"
    assert free_of("memory")(pool) == "15Gi/?"
    assert free_of("storage")(pool) is None
    tainted = {"spec": {"taints": [{"key": "pool.ironpool.dev/unschedulable", "effect": "NoSchedule"},
                                   {"key": "team", "value": "a", "effect": "NoExecute"}]}}
    assert taints("spec.taints")(tainted) == "pool.ironpool.dev/unschedulable:NoSchedule,team=a:NoExecute"
    assert taints("spec.taints")(pool) is None
    assert involved({"involvedObject": {"kind": "Machine", "name": "m"}}) == "machine/m"
    assert age(None) == "<none>" and age("garbage") == "?"
    assert Column("X", field("a.b")).get({"a": {"b": 1}}) == 1
    assert NAME.get({"metadata": {"name": "n"}}) == "n" and AGE.header == "AGE"
