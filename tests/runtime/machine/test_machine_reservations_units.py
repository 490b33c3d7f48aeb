"""The machine runtime's reservation book without libvirt: accepting against what is not handed out,
rejecting whole, machines within a reservation using its share, expiry, the quantity wire format,
bad input, and the book surviving a restart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.reservations import (
    EXPIRES_AT_ANNOTATION,
    RESERVATION_KEY_ANNOTATION,
    QuantityWireError,
    decode_quantity,
    encode_quantity,
    encode_resources,
)
from ironpool.runtime.errors import InvalidArgument, NotFound
from ironpool.runtime.machine.capacity import CapacityPolicy
from ironpool.runtime.machine.classes import MachineClassSpec
from ironpool.runtime.machine.model import MachineRecord
from ironpool.runtime.machine.reservations import ACCEPTED, REJECTED, ReservationBook

MiB = 1 << 20
CLASSES = {"tiny": MachineClassSpec("tiny", {"cpu": 1, "memory": 128 * MiB})}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _book(tmp_path: Path, machines: list[MachineRecord], cpu: int = 4, memory: int = 1024 * MiB,
          clock: Clock | None = None) -> ReservationBook:
    return ReservationBook(tmp_path, CLASSES, lambda: machines, lambda: (cpu, memory), clock or Clock())


def _reservation(resources: dict[str, str], key: str = "", **annotations: str) -> mpb.Reservation:
    r = mpb.Reservation(spec=mpb.ReservationSpec(resources=encode_resources(resources)))
    r.metadata.labels["app"] = "web"
    if key:
        r.metadata.annotations[RESERVATION_KEY_ANNOTATION] = key
    r.metadata.annotations.update(annotations)
    return r


def _machine(i: int, key: str = "") -> MachineRecord:
    return MachineRecord(id=f"m{i}", class_name="tiny", cpu=1, memory_bytes=128 * MiB,
                         annotations={RESERVATION_KEY_ANNOTATION: key} if key else {})


def test_quantities_travel_as_kubernetes_protobuf() -> None:
    assert encode_quantity("256Mi") == b"\n\x05256Mi"
    assert str(decode_quantity(encode_quantity("1500m"))) == "1500m"
    for bad in (b"", b"256Mi", b"\n\x09256Mi", b"\n\x02\xff\xfe"):
        with pytest.raises(QuantityWireError):
            decode_quantity(bad)


def test_accepts_what_fits_and_rejects_the_rest_whole(tmp_path: Path) -> None:
    machines = [_machine(0)]
    book = _book(tmp_path, machines)
    first = book.create(_reservation({"class/machine.tiny": "2"}))
    assert first.state == ACCEPTED and first.amounts == {"cpu": 2000, "memory": 256 * MiB}
    too_much = book.create(_reservation({"class/machine.tiny": "2"}))  # 1 cpu is left
    assert too_much.state == REJECTED and too_much.amounts == {}
    assert book.free() == (1, 1024 * MiB - 3 * 128 * MiB)
    block = book.create(_reservation({"cpu": "1", "memory": "64Mi"}))
    assert block.state == ACCEPTED and book.free()[0] == 0
    # A runtime cannot hold what it does not have: unknown classes and resources are rejected.
    assert book.create(_reservation({"class/machine.gpu": "1"})).state == REJECTED
    assert book.create(_reservation({"nics": "2"})).state == REJECTED
    assert [h.state for h in book.list(labels={"app": "web"})] == [ACCEPTED, REJECTED, ACCEPTED, REJECTED,
                                                                   REJECTED]


def test_machines_within_use_the_share_and_give_it_back(tmp_path: Path) -> None:
    machines: list[MachineRecord] = []
    book = _book(tmp_path, machines, cpu=3)
    hold = book.create(_reservation({"class/machine.tiny": "2"}, key="default/web"))
    assert hold.state == ACCEPTED and book.free()[0] == 1 and book.unused_holds() == (2, 256 * MiB)
    machines.append(_machine(0, "default/web"))
    assert book.free()[0] == 1 and book.unused_holds() == (1, 128 * MiB)
    machines.append(_machine(1))  # outside it: takes the last free core
    assert book.free()[0] == 0
    assert book.create(_reservation({"class/machine.tiny": "1"})).state == REJECTED
    machines.pop(0)  # the machine within goes: its part is the reservation's again, not free
    assert book.free()[0] == 0 and book.unused_holds() == (2, 256 * MiB)


def test_expiry_lets_go_and_delete_removes(tmp_path: Path) -> None:
    clock = Clock()
    book = _book(tmp_path, [], cpu=2, clock=clock)
    expires = {EXPIRES_AT_ANNOTATION: str(int(clock.now) + 60)}
    hold = book.create(_reservation({"class/machine.tiny": "2"}, **expires))
    assert hold.state == ACCEPTED and book.free()[0] == 0
    clock.now += 61
    assert book.free()[0] == 2 and book.list(hold.id) == []
    other = book.create(_reservation({"class/machine.tiny": "1"}))
    book.delete(other.id)
    with pytest.raises(NotFound):
        book.delete(other.id)
    assert book.free()[0] == 2


@pytest.mark.parametrize(("reservation", "words"), [
    (mpb.Reservation(), "reservation.spec.resources: must name at least one resource"),
    (mpb.Reservation(spec=mpb.ReservationSpec(resources={"cpu": b"1"})), "reservation.spec.resources[cpu]"),
    (_reservation({"cpu": "-1"}), "must not be negative"),
    (_reservation({"cpu": "1"}, **{EXPIRES_AT_ANNOTATION: "soon"}), "must be Unix seconds"),
])
def test_bad_input_is_refused_and_nothing_kept(tmp_path: Path, reservation: mpb.Reservation,
                                               words: str) -> None:
    book = _book(tmp_path, [])
    with pytest.raises(InvalidArgument, match=re.escape(words)):
        book.create(reservation)
    assert book.list() == []


def test_the_book_survives_a_restart(tmp_path: Path) -> None:
    book = _book(tmp_path, [], cpu=2)
    kept = book.create(_reservation({"class/machine.tiny": "1"}, key="ns/r"))
    book.create(_reservation({"class/machine.tiny": "5"}))
    again = _book(tmp_path, [], cpu=2)
    again.load()
    assert [(h.id, h.state) for h in again.list()] == [(kept.id, ACCEPTED), (again.list()[1].id, REJECTED)]
    assert again.free()[0] == 1 and again.list(kept.id)[0].key == "ns/r"
    assert json.loads((tmp_path / "reservations.json").read_text())["schema"] == 1
    (tmp_path / "reservations.json").write_text("{not json")
    with pytest.raises(RuntimeError, match=r"reservations\.json: cannot read"):
        _book(tmp_path, []).load()


def test_capacity_policy_overcommits_cpu_and_keeps_memory() -> None:
    assert CapacityPolicy().total(2, 8 * 1024 * MiB) == (2, 8 * 1024 * MiB)
    assert CapacityPolicy(cpu_allocation_ratio=3.5, reserved_memory=1024 * MiB).total(2, 8192 * MiB) == (
        7, 7 * 1024 * MiB)
    assert CapacityPolicy(cpu=10, memory=2048 * MiB, cpu_allocation_ratio=2).total(2, 1) == (20, 2048 * MiB)
    for bad in ({"cpu_allocation_ratio": 0}, {"reserved_memory": -1}, {"cpu": 0}):
        with pytest.raises(ValueError):
            CapacityPolicy(**bad)  # type: ignore[arg-type]
