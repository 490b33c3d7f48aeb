# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.machine against the in-memory apiserver: create, idempotence, check mode, diff,
immutable fields, force, ignition, bad options, absent."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.ironpool.iaas.plugins.module_utils import base
from ansible_collections.ironpool.iaas.plugins.modules import machine

WEB = {"name": "web", "machine_class": "x-small", "image": "tiny", "disk_size": "1Gi",
       "labels": {"app": "web"}}


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Check mode's set prediction, recorded (the scheduler answers it in the playbook tests): every
    Machine fits on host-1 but a set of three, whose last does not."""
    calls: list[Any] = []

    def predict(client: Any, namespace: str, machines: list[Any]) -> list[dict[str, Any]]:
        calls.append(machines)
        return [{"pool": "host-1", "reason": "fits"} if i < 2 else
                {"pool": None, "reason": "does not fit (with 2 more of this run): needs 3 x-small"}
                for i in range(len(machines))]

    monkeypatch.setattr(base, "predict_machine_set", predict)
    return calls


def test_creates_then_reports_no_change(run_module: Any, client: Any) -> None:
    first = run_module(machine.main, WEB)
    assert not first.failed, first.result
    assert first.result["changed"] and first.result["action"] == "created"
    stored = client.stored("Machine", "web")
    assert stored["spec"]["volumes"] == [{"name": "root", "device": "oda",
                                          "localDisk": {"image": "tiny", "sizeLimit": "1Gi"}}]
    assert stored["spec"]["power"] == "On"
    second = run_module(machine.main, WEB)
    assert not second.result["changed"] and second.result["action"] == "unchanged"
    assert client.writes == [("create", "Machine", "web")]
    assert client.field_managers == {"ironpool-ansible"}  # every write names the collection


def test_check_mode_writes_nothing_and_predicts_the_pool(run_module: Any, client: Any,
                                                         no_scheduler: list[Any]) -> None:
    out = run_module(machine.main, WEB, check_mode=True, diff=True)
    assert out.result["changed"] and out.result["pool"] == "host-1"
    assert out.result["placement_reason"] == "fits"
    assert out.result["diff"]["before"] == {}
    assert out.result["diff"]["after"]["spec"]["machineClassRef"] == {"name": "x-small"}
    assert out.result["diff"]["after_header"] == \
        "Machine default/web would land on pool host-1 (the scheduler's placement preview)"
    assert client.writes == [] and client.stored("Machine", "web") is None
    assert no_scheduler and no_scheduler[0][0]["metadata"]["name"] == "web"


def test_power_change_is_an_update_with_a_diff(run_module: Any, client: Any) -> None:
    run_module(machine.main, WEB)
    predicted = run_module(machine.main, {"name": "web", "power": "off"}, check_mode=True, diff=True)
    assert predicted.result["changed"] and client.stored("Machine", "web")["spec"]["power"] == "On"
    assert predicted.result["diff"]["before"]["spec"]["power"] == "On"
    assert predicted.result["diff"]["after"]["spec"]["power"] == "Off"
    done = run_module(machine.main, {"name": "web", "power": "off"})
    assert done.result["action"] == "updated" and client.stored("Machine", "web")["spec"]["power"] == "Off"


def test_a_label_the_module_set_and_the_task_dropped_goes_but_others_labels_stay(
        run_module: Any, client: Any) -> None:
    run_module(machine.main, {**WEB, "labels": {"app": "web", "tier": "front"}})
    stored = client.stored("Machine", "web")
    assert stored["metadata"]["annotations"]["iaas.ironpool.dev/managed-labels"] == "app,tier"
    client.patch_raw(machine.resource("compute.ironcore.dev/v1alpha1", "Machine"), "web",
                     {"metadata": {"labels": {"owner": "ops"}}}, "default")  # set by someone else
    only_app = {"name": "web", "labels": {"app": "web"}}
    predicted = run_module(machine.main, only_app, check_mode=True, diff=True)
    assert predicted.result["changed"]
    assert predicted.result["diff"]["after"]["metadata"]["labels"] == {"app": "web", "owner": "ops"}
    assert "tier" in client.stored("Machine", "web")["metadata"]["labels"]  # check mode wrote nothing
    out = run_module(machine.main, only_app)
    assert out.result["changed"] and out.result["action"] == "updated"
    stored = client.stored("Machine", "web")
    assert stored["metadata"]["labels"] == {"app": "web", "owner": "ops"}
    assert stored["metadata"]["annotations"]["iaas.ironpool.dev/managed-labels"] == "app"
    assert not run_module(machine.main, only_app).result["changed"]
    assert not run_module(machine.main, {"name": "web", "power": "on"}).result["changed"]  # no labels: kept
    run_module(machine.main, {"name": "web", "labels": {}})
    stored = client.stored("Machine", "web")
    assert stored["metadata"]["labels"] == {"owner": "ops"}
    assert "iaas.ironpool.dev/managed-labels" not in (stored["metadata"].get("annotations") or {})


def test_immutable_class_fails_naming_the_option_unless_forced(run_module: Any, client: Any) -> None:
    client.seed({"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
                 "metadata": {"name": "small"}, "capabilities": {"cpu": "2", "memory": "1Gi"}})
    run_module(machine.main, WEB)
    uid = client.stored("Machine", "web")["metadata"]["uid"]
    refused = run_module(machine.main, {**WEB, "machine_class": "small"})
    assert refused.failed and refused.result["msg"].startswith("machine_class: ")
    assert "force=true" in refused.result["msg"]
    assert client.stored("Machine", "web")["metadata"]["uid"] == uid
    forced = run_module(machine.main, {**WEB, "machine_class": "small", "force": True})
    assert forced.result["action"] == "recreated"
    stored = client.stored("Machine", "web")
    assert stored["spec"]["machineClassRef"] == {"name": "small"} and stored["metadata"]["uid"] != uid


def test_image_is_immutable_too(run_module: Any) -> None:
    run_module(machine.main, WEB)
    out = run_module(machine.main, {**WEB, "image": "other"})
    assert out.failed and out.result["msg"].startswith("image: ")


@pytest.mark.parametrize(("args", "option"), [
    ({**WEB, "machine_class": "huge"}, "machine_class"),
    ({**WEB, "disk_size": "ten gigs"}, "disk_size"),
    ({**WEB, "volumes": [{"name": "scratch", "size": "lots"}]}, "volumes[0].size"),
    ({**WEB, "labels": {"bad key!": "x"}}, "labels"),
    ({**WEB, "name": "Not_A_Label"}, "name"),
    ({"name": "web"}, "machine_class"),
])
def test_bad_options_fail_naming_them_and_create_nothing(run_module: Any, client: Any, args: dict[str, Any],
                                                         option: str) -> None:
    out = run_module(machine.main, args)
    assert out.failed and out.result["msg"].startswith(f"{option}: "), out.result["msg"]
    assert client.writes == []


def test_ignition_goes_to_a_secret_and_never_into_the_result(run_module: Any, client: Any) -> None:
    ignition = '{"ignition": {"version": "3.4.0"}, "marker": "s3cr3t"}'
    out = run_module(machine.main, {**WEB, "ignition": ignition}, diff=True)
    assert "s3cr3t" not in repr(out.result)
    secret = client.stored("Secret", "web-ignition")
    assert secret is not None and secret["data"]["ignition.yaml"]
    ref = client.stored("Machine", "web")["spec"]["ignitionRef"]
    assert ref == {"name": "web-ignition", "key": "ignition.yaml"}
    changed = run_module(machine.main, {**WEB, "ignition": ignition + " "}, diff=True)
    assert changed.result["changed"] and changed.result["action"] == "unchanged"
    machine_diff, secret_diff = changed.result["diff"]
    assert machine_diff["before"] == machine_diff["after"]
    assert secret_diff["after"]["data"] == {"ignition.yaml": "(hidden, changed)"}
    gone = run_module(machine.main, {"name": "web", "state": "absent"})
    assert gone.result["changed"] and client.stored("Secret", "web-ignition") is None


def test_absent_deletes_and_then_reports_nothing_to_do(run_module: Any, client: Any) -> None:
    run_module(machine.main, WEB)
    first = run_module(machine.main, {"name": "web", "state": "absent"})
    assert first.result["changed"] and first.result["action"] == "deleted"
    second = run_module(machine.main, {"name": "web", "state": "absent"})
    assert not second.result["changed"] and second.result["action"] == "absent"


def test_wait_times_out_with_the_last_state(run_module: Any, client: Any) -> None:
    run_module(machine.main, WEB)
    client.objects[("Machine", "default", "web")]["spec"]["machinePoolRef"] = {"name": "host-1"}
    client.set_status("Machine", "web", {"state": "Pending", "conditions": [
        {"type": "Ready", "status": "False", "reason": "Pending", "message": "waiting for volumes"}]})
    out = run_module(machine.main, {**WEB, "wait": True, "wait_timeout": 1})
    assert out.failed and out.result["machine"]["metadata"]["name"] == "web"
    assert out.result["msg"] == ("Machine default/web did not become running within 1s; last seen: on pool "
                                 "host-1: no status for its spec yet; state Pending (waiting for volumes), "
                                 "wants Running; volumes not attached: root")


def scheduler_says(client: Any, message: str) -> None:
    client.set_status("Machine", "web", {"conditions": [
        {"type": "Scheduled", "status": "False", "reason": "FailedScheduling", "message": message}]})


def test_a_machine_no_pool_can_take_fails_early_naming_the_schedulers_reason(
        run_module: Any, client: Any) -> None:
    run_module(machine.main, WEB)
    scheduler_says(client, "0/2 pools: 1 do not offer class x-small, 1 do not match the pool selector")
    out = run_module(machine.main, {**WEB, "wait": True, "wait_timeout": 120})
    assert out.failed and out.result["msg"].startswith(
        "Machine default/web cannot be scheduled: 0/2 pools: 1 do not offer class x-small, 1 do not match "
        "the pool selector. It stays Pending")
    assert client.stored("Machine", "web") is not None  # left as declared


def test_a_machine_waiting_for_room_keeps_waiting_and_says_why(run_module: Any, client: Any) -> None:
    run_module(machine.main, WEB)
    scheduler_says(client, "0/2 pools: 1 do not offer class x-small, 1 have too little memory")
    out = run_module(machine.main, {**WEB, "wait": True, "wait_timeout": 4})
    assert out.failed and out.result["msg"] == (
        "Machine default/web did not become running within 4s; last seen: not scheduled: 0/2 pools: 1 do "
        "not offer class x-small, 1 have too little memory")
    # Without failing early, an unschedulable Machine is waited for too.
    scheduler_says(client, "0/1 pools: 1 do not offer class x-small")
    out = run_module(machine.main, {**WEB, "wait": True, "wait_timeout": 4, "fail_on_unschedulable": False})
    assert "did not become running within 4s" in out.result["msg"]


def test_wait_returns_once_running_with_pool_and_state(run_module: Any, client: Any) -> None:
    run_module(machine.main, WEB)
    client.objects[("Machine", "default", "web")]["spec"]["machinePoolRef"] = {"name": "host-1"}
    client.set_status("Machine", "web", {"state": "Running", "observedGeneration": 1,
                                         "volumes": [{"name": "root", "state": "Attached"}]})
    out = run_module(machine.main, {**WEB, "wait": True})
    assert not out.failed and out.result["state"] == "Running" and out.result["pool"] == "host-1"
    assert out.result["addresses"] == []


def test_check_mode_predicts_the_run_together_and_hands_this_one_on(run_module: Any, client: Any,
                                                                    no_scheduler: list[Any]) -> None:
    earlier = [{"metadata": {"name": f"web-{i}", "namespace": "default"},
                "spec": {"machineClassRef": {"name": "x-small"}}} for i in range(2)]
    # An earlier entry with this Machine's own name (the same task run twice) is not counted twice.
    again = {"metadata": {"name": "web", "namespace": "default"},
             "spec": {"machineClassRef": {"name": "x-small"}}}
    out = run_module(machine.main, {**WEB, "predict_with": [*earlier, again]}, check_mode=True)
    assert not out.failed, out.result
    assert [m["metadata"]["name"] for m in no_scheduler[-1]] == ["web-0", "web-1", "web"]
    assert out.result["pool"] == "" and out.result["placement_reason"].startswith("does not fit")
    assert out.result["placement_request"] == {
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"machineClassRef": {"name": "x-small"}}}


def test_a_machine_placed_within_a_reservation_carries_its_label(run_module: Any, client: Any) -> None:
    out = run_module(machine.main, {**WEB, "reservation": "web-tier"})
    assert not out.failed, out.result
    labels = client.stored("Machine", "web")["metadata"]["labels"]
    assert labels["compute.ironcore.dev/reservation"] == "web-tier" and labels["app"] == "web"
    bad = run_module(machine.main, {**WEB, "name": "other", "reservation": "Not_A.Label"})
    assert bad.failed and bad.result["msg"].startswith("reservation:")
