"""The quota rules as pure functions: what Machines and Volumes count, which quotas count them (scope
selectors as IronCore's evaluators match them), the table's columns."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api.quota import (
    COUNT_MACHINES,
    COUNT_VOLUMES,
    MACHINE,
    REQUESTS_CPU,
    REQUESTS_MEMORY,
    REQUESTS_STORAGE,
    VOLUME,
    format_of,
    in_scope,
    show,
    storage_of,
    summary,
    usage,
)
from ironpool.api.resources import resolve, strategy_for

GI = 2**30 * 10**9  # 1Gi in nano-units
ONE = 10**9


def test_machines_count_their_class_and_volumes_their_storage() -> None:
    caps = {"cpu": 2 * ONE, "memory": 4 * GI, "nvidia.com/gpu": ONE}
    assert usage(MACHINE, 3, 0, caps) == {COUNT_MACHINES: 3 * ONE, REQUESTS_CPU: 6 * ONE,
                                          REQUESTS_MEMORY: 12 * GI}
    assert usage(MACHINE, 1, 0, None) == {COUNT_MACHINES: ONE, REQUESTS_CPU: 0, REQUESTS_MEMORY: 0}
    assert usage(VOLUME, 2, 5 * GI, None) == {COUNT_VOLUMES: 2 * ONE, REQUESTS_STORAGE: 5 * GI}
    assert storage_of({"spec": {"resources": {"storage": "3Gi"}}}) == 3 * GI
    assert storage_of({"spec": {"resources": {"storage": "lots"}}}) == storage_of({"spec": {}}) == 0


def req(scope: str, op: str, *values: str) -> dict[str, Any]:
    return {"scopeName": scope, "operator": op, "values": list(values)}


@pytest.mark.parametrize(("kind", "cls", "requirements", "counted"), [
    (MACHINE, "a", [], True),
    (MACHINE, "a", [req("MachineClass", "In", "a", "b")], True),
    (MACHINE, "c", [req("MachineClass", "In", "a", "b")], False),
    (MACHINE, "c", [req("MachineClass", "NotIn", "a")], True),
    (MACHINE, "a", [req("MachineClass", "Exists")], True),
    (MACHINE, "a", [req("MachineClass", "DoesNotExist")], False),
    (MACHINE, "a", [req("VolumeClass", "Exists")], False),  # another kind's scope never matches
    (MACHINE, "a", [req("MachineClass", "Exists"), req("MachineClass", "NotIn", "a")], False),  # all must
    (VOLUME, None, [req("VolumeClass", "DoesNotExist")], True),
    (VOLUME, None, [req("VolumeClass", "Exists")], False),
    (VOLUME, None, [req("VolumeClass", "NotIn", "fast")], False),  # no class is in no set
    (VOLUME, "fast", [req("VolumeClass", "In", "fast")], True),
    (VOLUME, "fast", [req("BucketClass", "Exists")], False),
])
def test_scopes_match_as_ironcores_evaluators(kind: str, cls: str | None, requirements: list[dict[str, Any]],
                                              counted: bool) -> None:
    assert in_scope(kind, cls, requirements) is counted


def test_how_amounts_are_shown() -> None:
    assert show(3 * GI, format_of(REQUESTS_MEMORY)) == "3Gi"  # bytes: binary, unless the limit says
    assert show(3 * GI, format_of(REQUESTS_MEMORY, {REQUESTS_MEMORY: "5000000000"})) == "3221225472"
    assert show(1500 * 10**6, format_of(REQUESTS_CPU)) == "1500m"


def test_table_shows_each_limits_use_and_the_scope() -> None:
    strategy = strategy_for(resolve("quota"))
    assert [c.header for c in strategy.columns] == ["NAME", "REQUEST", "AGE", "SCOPE"]
    request, scope = strategy.columns[1].get, strategy.columns[3].get
    obj: dict[str, Any] = {"spec": {"hard": {REQUESTS_CPU: "4", COUNT_MACHINES: "10"}, "scopeSelector": {
        "matchExpressions": [req("MachineClass", "In", "a", "b"), {"scopeName": "MachineClass",
                                                                      "operator": "Exists"}]}}}
    # Before the apiserver reported: the limits, use unknown.
    assert request(obj) == f"{COUNT_MACHINES}: ?/10, {REQUESTS_CPU}: ?/4"
    obj["status"] = {"hard": obj["spec"]["hard"], "used": {REQUESTS_CPU: "2", COUNT_MACHINES: "1"}}
    assert request(obj) == f"{COUNT_MACHINES}: 1/10, {REQUESTS_CPU}: 2/4"
    assert scope(obj) == "MachineClass In (a,b); MachineClass Exists"
    assert summary(None, None) == ""
