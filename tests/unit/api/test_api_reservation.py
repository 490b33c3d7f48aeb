"""The Reservation kind as pure objects: validation naming the field, update rules, what it holds,
its one-word state, its columns, and the Machine's label naming it."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.reservation import RESERVATION_LABEL, expires_at, held, holds, reservation_of, summary
from ironpool.api.resources import resolve, strategy_for
from ironpool.api.validation import validate_create, validate_status_update, validate_update

COMPUTE = "compute.ironcore.dev/v1alpha1"
RESERVATIONS = resolve("reservations")


def _reservation(spec: dict[str, Any], status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": COMPUTE, "kind": "Reservation",
                           "metadata": {"name": "web", "namespace": "default", **meta}, "spec": spec}
    if status is not None:
        doc["status"] = status
    return doc


def _fields(exc: pytest.ExceptionInfo[errors.Invalid]) -> dict[str, str]:
    return {c.field: c.message for c in exc.value.causes}


def test_a_valid_reservation_is_stored_canonical() -> None:
    out = validate_create(RESERVATIONS, _reservation(
        {"resources": {"class/machine.x-small": "10", "cpu": "2000m", "memory": "1024Mi"},
         "pools": [{"name": "a"}], "poolSelector": {"topology.ironcore.dev/zone": "z1"},
         "zoneSpread": {"maxSkew": 1}, "ttlSecondsAfterCreation": 600}))
    assert out["spec"]["resources"] == {"class/machine.x-small": "10", "cpu": "2", "memory": "1Gi"}


@pytest.mark.parametrize(("resources", "field", "words"), [
    ({}, "spec.resources", "Required value"),
    ({"machineclass/x-small": "10"}, "spec.resources[machineclass/x-small]", "class/machine.x-small"),
    ({"storage": "1Gi"}, "spec.resources.storage", "unknown resource"),
    ({"class/machine.x-small": "1.5"}, "spec.resources[class/machine.x-small]", "whole number"),
    ({"class/machine.x-small": "0"}, "spec.resources[class/machine.x-small]", "greater than zero"),
    ({"class/machine.Bad_Name": "1"}, "spec.resources[class/machine.Bad_Name]", "class name"),
    ({"cpu": "-1"}, "spec.resources.cpu", "greater than zero"),
])
def test_bad_resources_are_refused_naming_the_key(resources: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(errors.Invalid) as exc:
        validate_create(RESERVATIONS, _reservation({"resources": resources}))
    assert words in _fields(exc)[field]


def test_pools_selector_spread_and_ttl_are_checked() -> None:
    with pytest.raises(errors.Invalid) as exc:
        validate_create(RESERVATIONS, _reservation({
            "resources": {"cpu": "1"}, "pools": [{"name": "a"}, {"name": "a"}, {"name": "B!"}],
            "poolSelector": {"bad key!": "v"}, "zoneSpread": {"maxSkew": 0}, "ttlSecondsAfterCreation": 0}))
    assert set(_fields(exc)) == {"spec.pools[1].name", "spec.pools[2].name", "spec.poolSelector",
                                  "spec.zoneSpread.maxSkew", "spec.ttlSecondsAfterCreation"}


def test_the_spec_is_fixed_but_the_time_to_live() -> None:
    old = validate_create(RESERVATIONS, _reservation({"resources": {"class/machine.x": "2"},
                                                      "ttlSecondsAfterCreation": 60}))
    longer = validate_update(RESERVATIONS, old,
                             {**old, "spec": {**old["spec"], "ttlSecondsAfterCreation": 600}})
    assert longer["spec"]["ttlSecondsAfterCreation"] == 600
    with pytest.raises(errors.Invalid) as exc:
        validate_update(RESERVATIONS, old, {**old, "spec": {
            **old["spec"], "resources": {"class/machine.x": "3"}, "pools": [{"name": "a"}]}})
    assert set(_fields(exc)) == {"spec.resources", "spec.pools"}


def test_status_entries_are_checked() -> None:
    old = validate_create(RESERVATIONS, _reservation({"resources": {"class/machine.x": "2"}}))
    with pytest.raises(errors.Invalid) as exc:
        validate_status_update(RESERVATIONS, old, {**old, "status": {"pools": [
            {"ref": "a", "state": "Accepted", "resources": {"class/machine.x": "2"}},
            {"ref": "a", "state": "Maybe"}, {"ref": "b", "resources": {"gpu": "1"}}]}})
    fields = _fields(exc)
    assert "status.pools[1].ref" in fields and "status.pools[1].state" in fields
    assert "status.pools[2].resources.gpu" in fields


def _entries(*states: str) -> list[dict[str, Any]]:
    return [{"ref": f"p{i}", "state": s, "resources": {"class/machine.x": "1"}} for i, s in enumerate(states)]


def _cond(ctype: str, status: str) -> dict[str, Any]:
    return {"type": ctype, "status": status}


@pytest.mark.parametrize(("spec", "status", "meta", "word", "holding"), [
    ({}, None, {}, "Pending", False),
    ({}, {"pools": _entries("Pending", "Accepted")}, {}, "Pending", True),
    ({}, {"pools": _entries("Accepted", "Accepted")}, {}, "Accepted", True),
    ({}, {"pools": _entries("Accepted", "Rejected")}, {}, "Rejected", False),
    ({}, {"conditions": [_cond("Scheduled", "False")]}, {}, "Rejected", False),
    ({}, {"pools": _entries("Accepted"), "conditions": [_cond("Expired", "True")]}, {}, "Expired", False),
    ({}, {"pools": _entries("Accepted")}, {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "Accepted", False),
    ({"dryRun": True}, {"pools": _entries("Pending"), "conditions": [_cond("Scheduled", "True")]}, {},
     "Fits", False),
    ({"dryRun": True}, {"conditions": [_cond("Scheduled", "False")]}, {}, "DoesNotFit", False),
])
def test_what_a_reservation_holds_and_its_state(spec: dict[str, Any], status: dict[str, Any] | None,
                                                meta: dict[str, Any], word: str, holding: bool) -> None:
    doc = _reservation({"resources": {"class/machine.x": "2"}, **spec}, status, **meta)
    assert summary(doc) == word
    assert holds(doc) is holding
    assert (held(doc) != {}) is holding


def test_expiry_is_creation_plus_ttl() -> None:
    doc = _reservation({"ttlSecondsAfterCreation": 90}, creationTimestamp="2026-03-01T10:00:00Z")
    when = expires_at(doc)
    assert when is not None and when.isoformat() == "2026-03-01T10:01:30+00:00"
    assert expires_at(_reservation({}, creationTimestamp="2026-03-01T10:00:00Z")) is None


def test_columns_show_state_pools_and_use() -> None:
    doc = _reservation({"resources": {"class/machine.x": "10"}}, {"pools": [
        {"ref": "a", "state": "Accepted", "resources": {"class/machine.x": "7"},
         "consumed": {"class/machine.x": "3"}},
        {"ref": "b", "state": "Accepted", "resources": {"class/machine.x": "3"}}]})
    row = {c.header: c.get(doc) for c in strategy_for(RESERVATIONS).columns}
    assert (row["STATE"], row["POOLS"], row["USED"]) == ("Accepted", "a,b", "3/10")
    assert strategy_for(RESERVATIONS).columns[0].get(doc) == "web"


def test_a_machine_names_its_reservation_by_label() -> None:
    machines = resolve("machines")
    base = {"apiVersion": COMPUTE, "kind": "Machine",
            "metadata": {"name": "m", "namespace": "default", "labels": {RESERVATION_LABEL: "web"}},
            "spec": {"machineClassRef": {"name": "x"}}}
    stored = validate_create(machines, base)
    assert reservation_of(stored) == "web"
    with pytest.raises(errors.Invalid) as exc:
        validate_create(machines, {**base, "metadata": {**base["metadata"],
                                                        "labels": {RESERVATION_LABEL: "a.b"}}})
    assert f"metadata.labels[{RESERVATION_LABEL}]" in _fields(exc)
    bound = {**stored, "spec": {**stored["spec"], "machinePoolRef": {"name": "p"}}}
    with pytest.raises(errors.Invalid) as exc:
        validate_update(machines, bound, {**bound, "metadata": {**bound["metadata"], "labels": {}}})
    assert "cannot change while the machine is bound" in _fields(exc)[f"metadata.labels[{RESERVATION_LABEL}]"]
    # Unbound, it may still change its mind.
    assert reservation_of(validate_update(machines, stored, {**stored, "metadata": {**stored["metadata"],
                                                                                    "labels": {}}})) is None
