"""The machine runtime's reservations: what it promised to hold for machines yet to come.

``CreateReservation`` is answered at once: ``ACCEPTED`` when what is asked fits in what the runtime
has not handed out yet (its capacity, see :mod:`.capacity`, less what its machines were allocated
and less what the reservations it accepted still hold), else ``REJECTED`` (a rejected reservation
is kept, listed, and holds nothing). Machines placed within a reservation (the annotation
:data:`~ironpool.iri.reservations.RESERVATION_KEY_ANNOTATION` carries the same value on both) use
its share; when they go, the share is the reservation's again. A reservation is held until it is
deleted or its :data:`~ironpool.iri.reservations.EXPIRES_AT_ANNOTATION` passes.

The book is a JSON file in the runtime's state directory, written whole to a temporary file, fsynced
and renamed into place on every change, so a restarted runtime holds exactly what it accepted.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ironpool.api.quantity import parse_quantity
from ironpool.api.reservation import SHARED_RESOURCES, class_of_key
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.reservations import (
    EXPIRES_AT_ANNOTATION,
    RESERVATION_KEY_ANNOTATION,
    QuantityWireError,
    decode_resources,
    encode_resources,
)
from ironpool.runtime.errors import InvalidArgument, NotFound
from ironpool.runtime.metadata import check_string_map, select

from .classes import MachineClassSpec
from .model import MachineRecord

ACCEPTED = machine_pb2.RESERVATION_STATE_ACCEPTED
REJECTED = machine_pb2.RESERVATION_STATE_REJECTED
FILE_NAME = "reservations.json"
SCHEMA = 1

Amounts = dict[str, int]
"""``cpu`` in millicores, ``memory`` in bytes"""


@dataclass
class HoldRecord:
    """One reservation as the runtime keeps it."""

    id: str
    labels: dict[str, str]
    annotations: dict[str, str]
    #: the resources asked for, as canonical quantity strings
    resources: dict[str, str]
    state: int
    created_at: int  # Unix ns
    #: what it holds while accepted (empty when rejected)
    amounts: Amounts = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.annotations.get(RESERVATION_KEY_ANNOTATION, "")

    def expired(self, now: float) -> bool:
        raw = self.annotations.get(EXPIRES_AT_ANNOTATION)
        try:
            return raw is not None and now >= int(raw)
        except ValueError:
            return False


def _expires_at(annotations: Mapping[str, str]) -> None:
    raw = annotations.get(EXPIRES_AT_ANNOTATION)
    if raw is not None and not raw.strip().isdigit():
        raise InvalidArgument(f"reservation.metadata.annotations[{EXPIRES_AT_ANNOTATION}]: "
                              f"must be Unix seconds, not {raw[:40]!r}")


def machine_amounts(rec: MachineRecord) -> Amounts:
    return {"cpu": rec.cpu * 1000, "memory": rec.memory_bytes}


class ReservationBook:
    """Thread-safe; ``machines`` lists the runtime's machines, ``capacity`` says (cpu cores, memory
    bytes) it may hand out, ``classes`` are its machine classes by name."""

    def __init__(self, state_dir: Path, classes: Mapping[str, MachineClassSpec],
                 machines: Callable[[], Iterable[MachineRecord]], capacity: Callable[[], tuple[int, int]],
                 clock: Callable[[], float] = time.time) -> None:
        self.path = state_dir / FILE_NAME
        self.classes = classes
        self.machines = machines
        self.capacity = capacity
        self.clock = clock
        self._lock = threading.Lock()
        self._holds: dict[str, HoldRecord] = {}

    # -- persistence --------------------------------------------------------------------------
    def load(self) -> None:
        """Read the book a previous run left (none: an empty book)."""
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"{self.path}: cannot read the reservations this runtime accepted: "
                               f"{exc}") from exc
        if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
            raise RuntimeError(f"{self.path}: not a reservations file of schema {SCHEMA}")
        with self._lock:
            self._holds = {r["id"]: HoldRecord(**r) for r in raw.get("reservations") or ()}

    def _save(self) -> None:
        """Write the book (call with the lock held)."""
        payload = json.dumps({"schema": SCHEMA, "reservations": [asdict(h) for h in self._holds.values()]},
                             sort_keys=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".reservations-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _prune(self) -> None:
        """Drop the reservations whose time ran out (call with the lock held)."""
        now = self.clock()
        gone = [h.id for h in self._holds.values() if h.expired(now)]
        if gone:
            for hold_id in gone:
                del self._holds[hold_id]
            self._save()

    # -- the arithmetic -----------------------------------------------------------------------
    def _asked(self, resources: Mapping[str, str]) -> Amounts | None:
        """What ``resources`` take, or None when they name something this runtime does not have."""
        total: Amounts = {}
        for name, raw in resources.items():
            q = parse_quantity(raw)
            cls = class_of_key(name)
            if cls is not None:
                spec = self.classes.get(cls)
                if spec is None or q.fraction.denominator != 1:
                    return None
                count = q.value()
                total["cpu"] = total.get("cpu", 0) + spec.cpu * 1000 * count
                total["memory"] = total.get("memory", 0) + spec.memory * count
            elif name in SHARED_RESOURCES:
                amount = q.milli_value() if name == "cpu" else q.value()
                total[name] = total.get(name, 0) + amount
            else:
                return None
        return total

    def _used(self, holds: Iterable[HoldRecord]) -> Amounts:
        """What the runtime handed out: its machines, and what accepted reservations hold unused."""
        used: Amounts = {"cpu": 0, "memory": 0}
        within: dict[str, Amounts] = {}
        for rec in self.machines():
            amounts = machine_amounts(rec)
            for r, v in amounts.items():
                used[r] += v
            key = rec.annotations.get(RESERVATION_KEY_ANNOTATION)
            if key:
                placed = within.setdefault(key, {})
                for r, v in amounts.items():
                    placed[r] = placed.get(r, 0) + v
        for hold in holds:
            if hold.state != ACCEPTED:
                continue
            placed = within.get(hold.key, {}) if hold.key else {}
            for r, v in hold.amounts.items():
                used[r] = used.get(r, 0) + max(0, v - placed.get(r, 0))
        return used

    def free(self) -> tuple[int, int]:
        """Cores (rounded down) and bytes not handed out yet."""
        with self._lock:
            self._prune()
            used = self._used(self._holds.values())
        cpu, memory = self.capacity()
        return (cpu * 1000 - used["cpu"]) // 1000, memory - used["memory"]

    def unused_holds(self) -> tuple[int, int]:
        """Cores (rounded up) and bytes accepted reservations hold that no machine uses yet."""
        with self._lock:
            self._prune()
            holds = list(self._holds.values())
        with_holds, without = self._used(holds), self._used(())
        cpu = with_holds["cpu"] - without["cpu"]
        return -(-cpu // 1000), with_holds["memory"] - without["memory"]

    # -- the RPCs -----------------------------------------------------------------------------
    def create(self, reservation: machine_pb2.Reservation) -> HoldRecord:
        """Accept or reject, at once; bad input raises InvalidArgument before anything is kept."""
        meta = reservation.metadata
        labels = check_string_map(meta.labels, "reservation.metadata.labels")
        annotations = check_string_map(meta.annotations, "reservation.metadata.annotations")
        _expires_at(annotations)
        if not reservation.spec.resources:
            raise InvalidArgument("reservation.spec.resources: must name at least one resource")
        try:
            resources = {k: str(q) for k, q in decode_resources(reservation.spec.resources).items()}
        except QuantityWireError as exc:
            raise InvalidArgument(f"reservation.spec.{exc}") from None
        bad = [k for k, v in resources.items() if v.startswith("-")]
        if bad:
            raise InvalidArgument(f"reservation.spec.resources[{bad[0]}]: must not be negative")
        asked = self._asked(resources)
        with self._lock:
            self._prune()
            hold = HoldRecord(secrets.token_hex(16), labels, annotations, resources, REJECTED, time.time_ns())
            if asked is not None:
                used = self._used(self._holds.values())
                cpu, memory = self.capacity()
                room = {"cpu": cpu * 1000 - used["cpu"], "memory": memory - used["memory"]}
                if all(v <= room.get(r, 0) for r, v in asked.items()):
                    hold.state, hold.amounts = ACCEPTED, asked
            self._holds[hold.id] = hold
            self._save()
        return hold

    def list(self, reservation_id: str = "", labels: Mapping[str, str] | None = None) -> list[HoldRecord]:
        with self._lock:
            self._prune()
            holds = dict(self._holds)
        return select(holds, reservation_id, labels, lambda h: h.labels)

    def delete(self, reservation_id: str) -> None:
        if not reservation_id:
            raise InvalidArgument("reservation_id: must not be empty")
        with self._lock:
            if self._holds.pop(reservation_id, None) is None:
                raise NotFound(f"reservation {reservation_id[:80]!r} not found")
            self._save()


def reservation_message(hold: HoldRecord) -> machine_pb2.Reservation:
    """The IRI form of a kept reservation."""
    return machine_pb2.Reservation(
        metadata=meta_pb2.ObjectMetadata(id=hold.id, labels=hold.labels, annotations=hold.annotations,
                                         created_at=hold.created_at),
        spec=machine_pb2.ReservationSpec(resources=encode_resources(hold.resources)),
        status=machine_pb2.ReservationStatus(state=hold.state),  # type: ignore[arg-type]
    )
