"""The one wait every front end uses, against the real apiserver: it ends at the change that makes an
object ready (not before, not by polling), reports progress as it changes, fails early only for a
reason a fleet change lifts, and fails at once when the object is deleted."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.config import ClientConfig
from ironpool.client.readiness import Verdict, machine_running, scheduled
from ironpool.client.wait import Gone, Unschedulable, WaitTimeout, wait_for, wait_for_one

MACHINES = resolve("machines")


@pytest.fixture(autouse=True)
def pool(config: ClientConfig) -> None:
    """The class the Machines name and a pool they can be bound to."""
    with Client(config) as client:
        client.create_raw(resolve("machineclasses"), {"metadata": {"name": "x-small"},
                                                     "capabilities": {"cpu": "1", "memory": "256Mi"}})
        client.create_raw(resolve("machinepools"), {"metadata": {"name": "p1"}})


def make_machine(client: Client, name: str, namespace: str = "default") -> dict[str, Any]:
    return client.create_raw(MACHINES, {"metadata": {"name": name},
                                        "spec": {"machineClassRef": {"name": "x-small"}}}, namespace)


def set_status(client: Client, name: str, status: dict[str, Any],
               namespace: str = "default") -> dict[str, Any]:
    return client.patch_raw(MACHINES, name, {"status": status}, namespace, subresource="status")


def scheduler_says(client: Client, name: str, message: str) -> dict[str, Any]:
    return set_status(client, name, {"conditions": [{"type": "Scheduled", "status": "False",
                                                     "reason": "FailedScheduling", "message": message}]})


class Waiter(threading.Thread):
    """A wait in a thread; ``seen`` is set once it has read the object the first time."""

    def __init__(self, config: ClientConfig, fn: Any) -> None:
        super().__init__(daemon=True)
        self.config, self.fn = config, fn
        self.seen = threading.Event()
        self.progress: list[str] = []
        self.result: Any = None
        self.error: BaseException | None = None

    def report(self, _name: str, verdict: Verdict) -> None:
        self.progress.append(verdict.progress)
        self.seen.set()

    def run(self) -> None:
        try:
            with Client(self.config) as client:
                self.result = self.fn(client, self.report)
        except BaseException as exc:  # handed to the test
            self.error = exc


def test_a_wait_ends_at_the_change_that_makes_it_ready_and_reports_progress(config: ClientConfig) -> None:
    with Client(config) as client:
        make_machine(client, "web")
        waiter = Waiter(config, lambda c, report: wait_for_one(
            c, MACHINES, "default", "web", machine_running, time.monotonic() + 30, progress=report))
        waiter.start()
        assert waiter.seen.wait(30)
        bound = client.patch_raw(MACHINES, "web", {"spec": {"machinePoolRef": {"name": "p1"}}}, "default")
        generation = bound["metadata"]["generation"]
        set_status(client, "web", {"state": "Running", "observedGeneration": generation, "conditions": [
            {"type": "VolumesReady", "status": "False", "message": "not attached: data"}]})
        done = set_status(client, "web", {"conditions": [{"type": "VolumesReady", "status": "True"}]})
        waiter.join(30)
        assert waiter.error is None and waiter.result is not None
        # It returned the object of the very change that made it ready.
        assert waiter.result["metadata"]["resourceVersion"] == done["metadata"]["resourceVersion"]
        assert waiter.progress[0] == "not scheduled yet"
        assert "on pool p1: volumes: not attached: data" in waiter.progress


def test_no_pool_for_the_class_fails_early_but_waiting_for_room_goes_on(config: ClientConfig) -> None:
    with Client(config) as client:
        make_machine(client, "huge")
        scheduler_says(client, "huge", "0/1 pools: 1 do not offer class huge")
        start = time.monotonic()
        with pytest.raises(Unschedulable) as err:
            wait_for_one(client, MACHINES, "default", "huge", scheduled, start + 60, fail_unschedulable=True,
                         settle=0.5)
        assert err.value.reason == "0/1 pools: 1 do not offer class huge"
        assert time.monotonic() - start < 10
        # Without failing early, or when room may free up, it waits and says why when time is up.
        scheduler_says(client, "huge", "0/1 pools: 1 have too little memory")
        with pytest.raises(WaitTimeout) as timeout:
            wait_for_one(client, MACHINES, "default", "huge", scheduled, time.monotonic() + 2,
                         fail_unschedulable=True, settle=0.5)
        assert str(timeout.value) == "huge: not scheduled: 0/1 pools: 1 have too little memory"


def test_a_reason_that_arrives_while_watching_fails_early_too(config: ClientConfig) -> None:
    with Client(config) as client:
        make_machine(client, "late")
        waiter = Waiter(config, lambda c, report: wait_for_one(
            c, MACHINES, "default", "late", scheduled, time.monotonic() + 120, progress=report,
            fail_unschedulable=True, settle=0.5))
        waiter.start()
        assert waiter.seen.wait(30)
        scheduler_says(client, "late", "0/1 pools: 1 do not match the pool selector")
        waiter.join(30)  # the 120 s deadline is far off: only the settled reason ends the wait
        assert isinstance(waiter.error, Unschedulable), waiter.error
        assert waiter.progress == ["not scheduled yet",
                                   "not scheduled: 0/1 pools: 1 do not match the pool selector"]


def test_a_reason_that_changes_within_the_settle_time_does_not_fail(config: ClientConfig) -> None:
    """A class just created: its pools offer it a moment later, and the scheduler binds."""
    with Client(config) as client:
        make_machine(client, "new-class")
        scheduler_says(client, "new-class", "0/1 pools: 1 do not offer class fresh")
        waiter = Waiter(config, lambda c, report: wait_for_one(
            c, MACHINES, "default", "new-class", scheduled, time.monotonic() + 30, progress=report,
            fail_unschedulable=True, settle=5))
        waiter.start()
        assert waiter.seen.wait(30)
        client.patch_raw(MACHINES, "new-class", {"spec": {"machinePoolRef": {"name": "p1"}}}, "default")
        waiter.join(30)
        assert waiter.error is None and waiter.result["spec"]["machinePoolRef"] == {"name": "p1"}


def test_an_object_deleted_while_waited_for_fails_at_once(config: ClientConfig) -> None:
    with Client(config) as client:
        make_machine(client, "doomed")
        waiter = Waiter(config, lambda c, report: wait_for_one(
            c, MACHINES, "default", "doomed", machine_running, time.monotonic() + 60, progress=report))
        waiter.start()
        assert waiter.seen.wait(30)
        client.delete_raw(MACHINES, "doomed", "default")
        waiter.join(30)
        assert isinstance(waiter.error, Gone) and waiter.error.name == "doomed"


def test_several_objects_across_namespaces(config: ClientConfig) -> None:
    with Client(config) as client:
        client.create_raw(resolve("namespaces"), {"metadata": {"name": "other"}})
        for ns in ("default", "other"):
            make_machine(client, "m", ns)
            client.patch_raw(MACHINES, "m", {"spec": {"machinePoolRef": {"name": "p1"}}}, ns)
        found = wait_for(client, MACHINES, None, ["default/m", "other/m"], scheduled, time.monotonic() + 10)
        assert sorted(found) == ["default/m", "other/m"] and all(found.values())


def test_a_wait_from_a_known_object_sees_every_change_since(config: ClientConfig) -> None:
    """Given the create's answer, the wait watches on from its revision (no list first), so a change
    made before the wait started is not missed."""
    with Client(config) as client:
        created = make_machine(client, "quick")
        bound = client.patch_raw(MACHINES, "quick", {"spec": {"machinePoolRef": {"name": "p1"}}}, "default")
        found = wait_for_one(client, MACHINES, "default", "quick", scheduled, time.monotonic() + 30,
                             known=created)
        assert found is not None
        assert found["metadata"]["resourceVersion"] == bound["metadata"]["resourceVersion"]
