"""Reservations on the real libvirt machine runtime, driven by a client built from IronCore's IEP-11
draft messages alone (tests/iri/iri_independent.py): create, list and delete; what is accepted
holds room (Status shows it), machines within a reservation use its share, and a runtime killed
with SIGKILL holds exactly what it accepted when it comes back.

The runtime is given its capacity outright (``--capacity-cpu 4 --capacity-memory 1Gi``), so its
answers do not depend on other domains of this shared host. Machines are defined powered off:
holding and using room is bookkeeping, no guest needs to boot.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.reservations import RESERVATION_KEY_ANNOTATION, decode_quantity, encode_quantity
from machine_runtime_helpers import RuntimeProc, machine_request, running_runtime

from tests.iri.iri_independent import IndependentClient

pytestmark = pytest.mark.libvirt
M = "machine.v1alpha1"
ACCEPTED, REJECTED = 1, 2


@pytest.fixture(scope="module")
def small_runtime(tiny_images: Path, test_session: str) -> Iterator[RuntimeProc]:
    with running_runtime("imrsv-", test_session, images=tiny_images,
                         extra_args=["--capacity-cpu", "4", "--capacity-memory", "1Gi"]) as proc:
        yield proc


class Draft:
    """The draft's three RPCs through raw method names and independently built messages."""

    def __init__(self, runtime: RuntimeProc) -> None:
        self.runtime = runtime

    @property
    def client(self) -> IndependentClient:
        assert self.runtime.channel is not None
        return IndependentClient(self.runtime.channel)

    def create(self, count: int, session: str, key: str = "") -> Any:
        c = self.client
        r = c.message(f"{M}.Reservation")()
        r.metadata.labels["ironpool.dev/test-session"] = session
        if key:
            r.metadata.annotations[RESERVATION_KEY_ANNOTATION] = key
        r.spec.resources["class/machine.tiny"] = encode_quantity(str(count))
        req = c.message(f"{M}.CreateReservationRequest")(reservation=r)
        return c.call(M, "MachineRuntime", "CreateReservation", req).reservation

    def list(self, reservation_id: str = "", **labels: str) -> list[Any]:
        c = self.client
        flt = c.message(f"{M}.ReservationFilter")(id=reservation_id, label_selector=labels)
        req = c.message(f"{M}.ListReservationsRequest")(filter=flt)
        return list(c.call(M, "MachineRuntime", "ListReservations", req).reservations)

    def delete(self, reservation_id: str) -> None:
        c = self.client
        req = c.message(f"{M}.DeleteReservationRequest")(reservation_id=reservation_id)
        c.call(M, "MachineRuntime", "DeleteReservation", req)


def _tiny_quantity(runtime: RuntimeProc) -> int:
    statuses = runtime.stub.Status(mpb.StatusRequest()).machine_class_status
    return next(s.quantity for s in statuses if s.machine_class.name == "tiny")


def test_the_drafts_client_creates_lists_and_deletes(small_runtime: RuntimeProc, test_session: str) -> None:
    draft = Draft(small_runtime)
    assert _tiny_quantity(small_runtime) == 4
    held = draft.create(3, test_session)
    assert held.status.state == ACCEPTED and held.metadata.id and held.metadata.created_at > 0
    assert str(decode_quantity(held.spec.resources["class/machine.tiny"])) == "3"
    assert _tiny_quantity(small_runtime) == 1
    refused = draft.create(2, test_session)  # 1 left: rejected whole, holding nothing
    assert refused.status.state == REJECTED and _tiny_quantity(small_runtime) == 1
    mine = draft.list(**{"ironpool.dev/test-session": test_session})
    listed = {r.metadata.id: r.status.state for r in mine}
    assert listed == {held.metadata.id: ACCEPTED, refused.metadata.id: REJECTED}
    assert [r.metadata.id for r in draft.list(held.metadata.id)] == [held.metadata.id]
    assert draft.list("never-issued") == []
    for r in (held, refused):
        draft.delete(r.metadata.id)
    with pytest.raises(grpc.RpcError) as exc:
        draft.delete(held.metadata.id)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    assert _tiny_quantity(small_runtime) == 4


def test_machines_within_use_it_and_a_killed_runtime_keeps_it(small_runtime: RuntimeProc,
                                                              test_session: str) -> None:
    draft = Draft(small_runtime)
    held = draft.create(2, test_session, key="default/web")
    assert held.status.state == ACCEPTED and _tiny_quantity(small_runtime) == 2
    within = machine_request(test_session, power=mpb.POWER_OFF,
                             annotations={RESERVATION_KEY_ANNOTATION: "default/web"})
    machine = small_runtime.stub.CreateMachine(within).machine
    assert _tiny_quantity(small_runtime) == 2  # it used the reservation's share
    outside = small_runtime.stub.CreateMachine(machine_request(test_session, power=mpb.POWER_OFF)).machine
    assert _tiny_quantity(small_runtime) == 1

    small_runtime.kill9()
    small_runtime.start()
    assert [r.status.state for r in draft.list(held.metadata.id)] == [ACCEPTED]
    assert _tiny_quantity(small_runtime) == 1
    assert draft.create(2, test_session).status.state == REJECTED

    for m in (machine, outside):
        small_runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=m.metadata.id))
        small_runtime.wait_state(m.metadata.id, "GONE")
    assert _tiny_quantity(small_runtime) == 2  # the share stays held for machines to come
    draft.delete(held.metadata.id)
    assert _tiny_quantity(small_runtime) == 4
