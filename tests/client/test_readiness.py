"""The readiness every front end shares: one definition of scheduled, running and available, the
one-line account of where an object is, and which scheduler reasons only a fleet change lifts (tied
to the scheduler's own words by running its core)."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api.conditions import SCHEDULED
from ironpool.client import readiness
from ironpool.client.readiness import (
    machine_running,
    needs_fleet_change,
    pool_ready,
    readiness_for,
    scheduled,
    state_of,
    volume_available,
)
from ironpool.scheduler import SchedulerCore, parse_config
from ironpool.scheduler.model import request_from_json

from tests.scheduler.sched_docs import machine, machine_class, machine_pool

Obj = dict[str, Any]


def running_machine(**status: Any) -> Obj:
    """A bound Machine with one volume and one NIC, at generation 2, and ``status`` over a ready one."""
    ready = {"state": "Running", "observedGeneration": 2, "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "VolumesReady", "status": "True"},
        {"type": "NetworkInterfacesReady", "status": "True"}]}
    return {"metadata": {"name": "web", "generation": 2},
            "spec": {"machinePoolRef": {"name": "p1"}, "power": "On", "volumes": [{"name": "data"}],
                     "networkInterfaces": [{"name": "primary"}]},
            "status": {**ready, **status}}


def test_condition_types_match_the_ones_the_scheduler_writes() -> None:
    assert readiness.SCHEDULED == SCHEDULED


def test_running_means_current_in_its_power_state_and_attached() -> None:
    assert machine_running(running_machine()) == readiness.Verdict(True, "Running on pool p1")
    lagging = machine_running(running_machine(observedGeneration=1))
    assert not lagging.done and lagging.progress == "on pool p1: status is of generation 1, the spec of 2"
    unreported = running_machine()
    del unreported["status"]["observedGeneration"]
    assert machine_running(unreported).progress == "on pool p1: no status for its spec yet"
    volume_pending = running_machine(conditions=[
        {"type": "VolumesReady", "status": "False", "message": "not attached: data"},
        {"type": "NetworkInterfacesReady", "status": "True"}])
    assert machine_running(volume_pending).progress == "on pool p1: volumes: not attached: data"
    # Without the conditions, the status entries of what the spec lists (as IronCore reports them).
    bare = running_machine(conditions=[], volumes=[{"name": "data", "state": "Attached"}],
                           networkInterfaces=[{"name": "primary", "state": "Pending"}])
    assert machine_running(bare).progress == "on pool p1: network interfaces not attached: primary"
    off = running_machine()
    off["spec"]["power"] = "Off"
    assert machine_running(off).progress == "on pool p1: state Running, wants Shutdown"
    waiting = running_machine(state="Pending", conditions=[
        {"type": "Ready", "status": "False", "message": "waiting for Secret default/x (not found)"},
        {"type": "VolumesReady", "status": "True"}, {"type": "NetworkInterfacesReady", "status": "True"}])
    assert machine_running(waiting).progress == \
        "on pool p1: state Pending (waiting for Secret default/x (not found)), wants Running"
    assert machine_running(None).progress == "does not exist"


def test_an_unbound_object_carries_the_schedulers_latest_reason() -> None:
    pending: Obj = {"metadata": {"name": "web"}, "spec": {}}
    assert scheduled(pending).progress == "not scheduled yet"
    pending["status"] = {"conditions": [{"type": "Scheduled", "status": "False", "reason": "FailedScheduling",
                                         "message": "0/2 pools: 2 have too little memory"}]}
    verdict = machine_running(pending)
    assert not verdict.done and verdict.unschedulable == ""
    assert verdict.progress == "not scheduled: 0/2 pools: 2 have too little memory"
    pending["status"]["conditions"][0]["message"] = "0/1 pools: 1 do not offer class huge"
    assert machine_running(pending).unschedulable == "0/1 pools: 1 do not offer class huge"


@pytest.mark.parametrize(("reason", "final"), [
    ("0/3 pools: 2 do not offer class huge, 1 do not match the pool selector", True),
    ("0/1 pools: 1 do not match the pool selector", True),
    ("0/2 pools: 1 do not offer class huge, 1 have too little cpu", False),
    ("0/1 pools: 1 not ready", False),
    ("0/1 pools: 1 have taints the object does not tolerate", False),
    ("0/0 pools: no machine pools exist", False),
    ("machine class huge not found", False),
])
def test_only_reasons_a_fleet_change_lifts_are_final(reason: str, final: bool) -> None:
    assert needs_fleet_change(reason) is final


def test_the_schedulers_own_messages_are_classified() -> None:
    """Run the scheduler's core: if its wording changes, this says so."""
    core = SchedulerCore(parse_config({"profiles": [{"name": "p", "strategy": "LeastAllocated"}]}))
    core.set_class("machine", machine_class("x", 1, "1Gi"))
    core.set_class("machine", machine_class("big", 64, "1Gi"))
    core.set_class("machine", machine_class("y", 1, "1Gi"))
    core.set_pool("machine", machine_pool("p1", 4, "8Gi", classes=["x", "big"], labels={"zone": "a"}))

    def why(doc: Obj) -> str:
        decision = core.schedule(request_from_json("machine", doc))
        assert decision.pool is None
        return decision.message

    assert needs_fleet_change(why(machine("m1", "y")))  # no pool offers y
    assert needs_fleet_change(why(machine("m2", "x", selector={"zone": "b"})))
    assert not needs_fleet_change(why(machine("m3", "big")))  # waits for room


def test_volumes_pools_and_states() -> None:
    volume: Obj = {"spec": {"volumePoolRef": {"name": "vp"}, "resources": {"storage": "2Gi"}},
                   "status": {"state": "Available", "resources": {"storage": "1Gi"}}}
    assert volume_available(volume).progress == "on pool vp: Available at 1Gi, growing to 2Gi"
    volume["status"]["resources"]["storage"] = "2Gi"
    assert volume_available(volume).done
    assert pool_ready({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}).done
    assert not pool_ready({"status": {"state": "Ready", "conditions": [
        {"type": "Ready", "status": "False", "message": "runtime unreachable"}]}}).done
    assert pool_ready({"status": {"state": "Available"}}).done
    assert state_of(None) == "Pending" and state_of(volume) == "Available"
    assert state_of(running_machine(observedGeneration=1)) == "Pending"  # a change not acted on yet
    assert state_of(running_machine()) == "Running"
    assert readiness_for("Machine", "ready") is machine_running
    assert readiness_for("Secret", "ready")({"metadata": {}}).done
    with pytest.raises(ValueError, match="a Volume cannot be waited for 'running'"):
        readiness_for("Volume", "running")


def test_a_snapshot_is_ready_when_its_state_is_and_a_failed_one_never_will_be() -> None:
    ready = readiness_for("VolumeSnapshot", "ready")
    snap: Obj = {"spec": {"volumeRef": {"name": "data"}}}
    assert not ready(None).done
    assert ready(snap).progress == "Pending: waiting for volume data and its pool"
    snap["status"] = {"state": "Ready", "size": "1Gi"}
    assert ready(snap).done and ready(snap).progress == "Ready, 1Gi of volume data"
    snap["status"]["state"] = "Failed"
    verdict = ready(snap)
    assert not verdict.done and verdict.failed == "the snapshot of volume data failed at its volume pool"
