"""What libvirt's domain events mean for the machines: their IRI events, boot slots and waiters.

A lifecycle event becomes an IRI event of its machine (except the Suspended and Resumed a paused start
causes itself) and wakes whoever waits on the machine; a stop or crash frees its boot slot, and its
guest agent connecting settles its boot (:mod:`.boot_admission`). Events arrive on the host's event
thread (:meth:`.host.Host.subscribe`).
"""

from __future__ import annotations

import libvirt

from ironpool.runtime.events import EventRing, RuntimeEvent

from . import records
from .boot_admission import BootAdmission
from .index import Entry, MachineIndex
from .model import DOMAIN_PREFIX, MachineRecord


class MachineEvents:
    """The runtime's IRI events about machines, and the handlers of libvirt's domain events."""

    def __init__(self, index: MachineIndex, ring: EventRing, admission: BootAdmission) -> None:
        self.index = index
        self.ring = ring
        self.admission = admission

    def record(
        self, rec: MachineRecord, reason: str, message: str, type_: str = "Normal", action: str = ""
    ) -> None:
        self.ring.add(RuntimeEvent(
            object_id=rec.id, labels=dict(rec.labels), annotations=dict(rec.annotations), reason=reason,
            message=message, type=type_, action=action or reason, created_at=rec.created_at,
        ))

    def _entry(self, domain: str) -> Entry | None:
        return self.index.find(domain[len(DOMAIN_PREFIX) :]) if domain.startswith(DOMAIN_PREFIX) else None

    def on_lifecycle(self, domain: str, event: int, detail: int) -> None:
        entry = self._entry(domain)
        if entry is None:
            return
        if event in (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_CRASHED):
            self.admission.release(entry.rec.id)
        reason, type_, action = records.lifecycle_event(event, detail)
        if reason in ("Suspended", "Resumed") and entry.pause_events > 0:
            entry.pause_events -= 1
            return
        self.record(entry.rec, reason, f"domain {domain}: {reason.lower()} (detail {detail})", type_, action)
        with entry.cond:
            entry.cond.notify_all()

    def on_agent(self, domain: str, connected: bool) -> None:
        if connected and (entry := self._entry(domain)) is not None:
            self.admission.agent_connected(entry.rec.id)

    def booted(self, machine_id: str, seconds: float, why: str) -> None:
        """A boot settled (:class:`.boot_admission.BootAdmission`'s ``settled``)."""
        if (entry := self.index.find(machine_id)) is not None:
            self.record(entry.rec, "Booted", f"boot settled after {seconds:.1f} s: {why}", action="Start")
