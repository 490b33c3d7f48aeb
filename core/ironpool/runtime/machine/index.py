"""The machines a runtime manages, by id, with what it knows about each beyond libvirt.

An id the runtime never issued is NOT_FOUND whatever its shape: IronCore's poollet takes NotFound
as "gone" and would retry anything else forever. Only an empty id is refused as malformed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from ironpool.runtime.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from ironpool.runtime.metadata import select

from .model import MachineRecord


@dataclass
class Entry:
    """A machine: its record, a lock for changes, and what the runtime knows beyond libvirt."""

    rec: MachineRecord
    lock: threading.RLock = field(default_factory=threading.RLock)
    cond: threading.Condition = field(init=False)
    error: str = ""  # why a machine that should run does not (shown as Pending)
    tearing_down: bool = False
    # Lifecycle events (Suspended, Resumed) a paused start that plugs user-mode NICs will cause; they
    # arrive later, on the event thread, and are not news.
    pause_events: int = 0
    # Power changes converge in the background: the generation of the latest one, and of the
    # first one not converged yet (0: none pending).
    power_generation: int = 0
    power_pending: int = 0

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)

    @property
    def observed_generation(self) -> int:
        """The newest generation whose every change is applied to the domain."""
        return self.power_pending - 1 if self.power_pending else self.rec.generation

    def power_changed(self) -> None:
        """Call with the lock held after a power change bumped the generation."""
        self.power_generation = self.rec.generation
        if not self.power_pending:
            self.power_pending = self.rec.generation


class MachineIndex:
    """Thread-safe map of machine id to :class:`Entry`."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._reserved: set[str] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    def find(self, machine_id: str) -> Entry | None:
        with self._lock:
            return self._entries.get(machine_id)

    def get(self, machine_id: str) -> Entry:
        """The machine's entry; InvalidArgument for an empty id, NotFound for any other unknown one."""
        if not machine_id:
            raise InvalidArgument("machine_id: must not be empty")
        entry = self.find(machine_id)
        if entry is None:
            raise NotFound(f"machine {machine_id[:80]!r} not found")
        return entry

    def get_live(self, machine_id: str) -> Entry:
        """As :meth:`get`, refusing a machine that is being deleted."""
        entry = self.get(machine_id)
        if entry.rec.deleted_at:
            raise FailedPrecondition(f"machine {machine_id!r} is being deleted")
        return entry

    def select(self, machine_id: str = "", label_selector: Mapping[str, str] | None = None) -> list[Entry]:
        """Machines by id (0 or 1: unknown ids of any shape give none) and exact label match."""
        with self._lock:
            entries = dict(self._entries)
        return select(entries, machine_id, label_selector, lambda e: e.rec.labels)

    def add(self, entry: Entry) -> None:
        with self._lock:
            self._entries[entry.rec.id] = entry

    def remove(self, machine_id: str) -> None:
        with self._lock:
            self._entries.pop(machine_id, None)

    @contextmanager
    def reserve(self, machine_id: str) -> Iterator[None]:
        """Hold ``machine_id`` while a machine is made, so a concurrent create with the same
        client-chosen id cannot share its files."""
        with self._lock:
            if machine_id in self._entries or machine_id in self._reserved:
                raise AlreadyExists(f"machine {machine_id!r} already exists")
            self._reserved.add(machine_id)
        try:
            yield
        finally:
            with self._lock:
                self._reserved.discard(machine_id)
