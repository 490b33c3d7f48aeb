"""VolumeSnapshot's strategy as a pure object: validation naming the field, the immutable volumeRef,
the status split, the table, and the default roles that grant it."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.resources import SERVED, resolve, strategy_for
from ironpool.api.validation import validate_create, validate_status_update, validate_update
from ironpool.apiserver.auth.rbac.defaults import CLUSTER_ROLES

STORAGE = "storage.ironcore.dev/v1alpha1"


def snapshot(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": STORAGE, "kind": "VolumeSnapshot",
            "metadata": {"name": "snap", "namespace": "default"}, "spec": spec}


def causes(exc: pytest.ExceptionInfo[errors.Invalid]) -> list[tuple[str, str]]:
    return [(c.field, c.reason) for c in exc.value.causes]


def test_ironcore_sample_is_accepted_unchanged() -> None:
    sample = snapshot(volumeRef={"name": "volume-sample"})
    assert validate_create(resolve("volumesnapshot"), sample) == sample


def test_missing_or_bad_volume_ref_names_the_field() -> None:
    info = resolve("volumesnapshots")
    with pytest.raises(errors.Invalid) as exc:
        validate_create(info, snapshot())
    assert causes(exc) == [("spec.volumeRef", "FieldValueRequired")]
    with pytest.raises(errors.Invalid) as exc:
        validate_create(info, snapshot(volumeRef={"name": "Not_A_Name"}))
    assert causes(exc) == [("spec.volumeRef.name", "FieldValueInvalid")]
    with pytest.raises(errors.Invalid) as exc:
        validate_create(info, snapshot(volumeRef={"name": ""}))
    assert causes(exc) == [("spec.volumeRef.name", "FieldValueRequired")]


def test_volume_ref_is_immutable_but_labels_may_change() -> None:
    info = resolve("volumesnapshot")
    old = validate_create(info, snapshot(volumeRef={"name": "a"}))
    with pytest.raises(errors.Invalid) as exc:
        validate_update(info, old, snapshot(volumeRef={"name": "b"}))
    assert causes(exc) == [("spec.volumeRef", "FieldValueInvalid")]
    relabelled = snapshot(volumeRef={"name": "a"})
    relabelled["metadata"]["labels"] = {"tier": "gold"}
    assert validate_update(info, old, relabelled)["metadata"]["labels"] == {"tier": "gold"}


def test_status_write_keeps_the_spec_and_checks_the_state() -> None:
    info = resolve("volumesnapshot")
    old = validate_create(info, snapshot(volumeRef={"name": "a"}))
    new = snapshot(volumeRef={"name": "other"})
    new["status"] = {"snapshotID": "iri://abc", "state": "Ready", "size": "1Gi"}
    out = validate_status_update(info, old, new)
    assert out["spec"] == {"volumeRef": {"name": "a"}}
    assert out["status"]["state"] == "Ready" and out["status"]["size"] == "1Gi"
    new["status"]["state"] = "Done"
    with pytest.raises(errors.Invalid) as exc:
        validate_status_update(info, old, new)
    assert [c.field for c in exc.value.causes] == ["status.state"]


def test_table_is_ironcores_with_wide_extras() -> None:
    strategy = strategy_for(resolve("volumesnapshot"))
    narrow = [c.header for c in strategy.columns if not c.wide]
    assert narrow == ["NAME", "VOLUMEREF", "STATE", "AGE"]
    obj = snapshot(volumeRef={"name": "data"})
    obj["status"] = {"state": "Ready", "size": "1Gi", "snapshotID": "iri://x"}
    by_header = {c.header: c.get(obj) for c in strategy.columns}
    assert (by_header["VOLUMEREF"], by_header["STATE"], by_header["SIZE"], by_header["SNAPSHOTID"]) == (
        "data", "Ready", "1Gi", "iri://x")


def test_served_in_the_openkcm_alias_group_too() -> None:
    groups = {r.group for r in SERVED if r.kind == "VolumeSnapshot"}
    assert groups == {"storage.ironcore.dev", "storage.openkcm.dev"}


@pytest.mark.parametrize(("role", "verb"), [("view", "list"), ("edit", "create"), ("edit", "delete")])
def test_default_roles_grant_volumesnapshots(role: str, verb: str) -> None:
    (found,) = [r for r in CLUSTER_ROLES if r["metadata"]["name"] == role]
    assert any(verb in rule["verbs"] and "volumesnapshots" in rule["resources"]
               and {"storage.ironcore.dev", "storage.openkcm.dev"} <= set(rule["apiGroups"])
               for rule in found["rules"])
