"""The status helpers every writer of a status uses: a condition's transition time moves only when its
status changes, and a status is written only when it says something new."""

from __future__ import annotations

from ironpool.api.conditions import condition, set_condition, status_differs, with_condition
from ironpool.api.meta import Condition

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    before = [Condition.model_validate({"type": "Ready", "status": "True", "reason": "A", "message": "",
                                        "lastTransitionTime": T0})]
    same = condition("Ready", "True", "B", "other words", before, T1, observedGeneration=3, absent=None)
    assert same["lastTransitionTime"] == T0
    assert same["observedGeneration"] == 3 and "absent" not in same
    flipped = condition("Ready", "False", "B", "", before, T1)
    assert flipped["lastTransitionTime"] == T1
    as_json = [{"type": "Ready", "status": "True", "lastTransitionTime": T0}]
    assert condition("Ready", "True", "A", "", as_json, T1)["lastTransitionTime"] == T0
    assert condition("Other", "True", "A", "", as_json, T1)["lastTransitionTime"] == T1


def test_setting_one_condition_leaves_the_others_and_an_unchanged_one_alone() -> None:
    obj = {"status": {"state": "Pending", "conditions": [
        {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "no pool",
         "lastTransitionTime": T0},
        {"type": "Ready", "status": "False", "reason": "X", "message": "", "lastTransitionTime": T0}]}}
    assert with_condition(obj, "Scheduled", "False", "Unschedulable", "no pool") is None
    set_condition(obj, "Scheduled", "True", "Scheduled", "assigned")
    scheduled, ready = obj["status"]["conditions"]
    assert (scheduled["status"], scheduled["message"]) == ("True", "assigned")
    assert scheduled["lastTransitionTime"] != T0 and scheduled["lastUpdateTime"]
    assert ready["lastTransitionTime"] == T0 and obj["status"]["state"] == "Pending"
    fresh: dict = {}
    set_condition(fresh, "Scheduled", "True", "Scheduled", "assigned")
    assert [c["type"] for c in fresh["status"]["conditions"]] == ["Scheduled"]


def test_a_status_differs_only_in_what_it_says() -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": T0, "lastUpdateTime": T0}
    current = {"state": "Ready", "capacity": {"cpu": "4"}, "conditions": [ready], "theirs": 1}
    assert not status_differs(current, {"state": "Ready", "conditions": [{**ready, "lastUpdateTime": T1}]})
    assert not status_differs(current, {"capacity": {"cpu": "4"}})
    assert status_differs(current, {"capacity": {"cpu": "8"}})
    assert status_differs(current, {"conditions": [{**ready, "status": "False"}]})
    assert status_differs(current, {"addresses": []})
