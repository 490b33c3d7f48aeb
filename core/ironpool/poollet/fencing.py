"""Self-fencing of a machine pool: a poollet that cannot renew its heartbeat Lease for ``fence_after``
seconds shuts off the domains of its Machines before the control plane may move them elsewhere.

The contract with the pool lifecycle controller (:mod:`ironpool.fleet.fence_timing`): the poollet
publishes ``fence_after`` in its Lease (:data:`~ironpool.api.fleet.FENCE_AFTER_ANNOTATION`); the
controller evicts the pool's Machines only when it has seen the Lease unchanged for ``fence_after``
plus its margin, and only after it marked the Lease (:data:`~ironpool.api.fleet.FENCED_ANNOTATION`)
with a write conditioned on the resourceVersion it saw go stale. The poollet's renewal is conditioned
the same way, so exactly one of them wins: a poollet that renews first was never taken over and turns
its domains back on; one that finds the mark keeps them off until the controller has moved them and
removed it.

The fence is a runtime-level stop (IRI power off with :data:`~ironpool.iri.labels.FENCED_ANNOTATION`,
which the libvirt runtime applies as an immediate ``virDomainDestroy``): disks and definitions stay, so
a Machine still bound here when the host is back is started again by the reconciler. A Machine whose
tolerations match the unreachable taint without ``tolerationSeconds`` opts out: never fenced (and
never evicted). While the poollet holds a Machine off, :meth:`Fencer.holds_off` tells the reconciler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ironpool.api.compute import Machine
from ironpool.api.conditions import condition
from ironpool.api.fleet import tolerates_unreachable_forever
from ironpool.client.informer import Informer
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import FENCED_ANNOTATION
from ironpool.poollet import keys
from ironpool.poollet.heartbeat import PoolHeartbeat
from ironpool.poollet.relist import sleep_or_stop

log = logging.getLogger(__name__)

#: writes an Event (type, reason, message) on the pool; False if it could not
Report = Callable[[str, str, str], Awaitable[bool]]

FENCED_REASON = "LeaseNotRenewed"
TAKEN_OVER_REASON = "TakenOverByControlPlane"


def fence_due(last_renewed: float, now: float, fence_after: float) -> bool:
    """Whether a poollet whose Lease was last renewed at ``last_renewed`` (its monotonic clock; the
    start of the poollet counts as a renewal) must fence now."""
    return now - last_renewed >= fence_after


def check_fence_after(fence_after: float, heartbeat_interval: float) -> None:
    """Refuse a ``--fence-after`` that would fence between two renewals of a healthy poollet."""
    if fence_after and fence_after <= 2 * heartbeat_interval:
        raise ValueError(f"--fence-after ({fence_after:g}s) must be more than twice --heartbeat-interval "
                         f"({heartbeat_interval:g}s), or 0 to never fence")


class Fencer:
    """Watches the heartbeat of one machine pool and fences (and un-fences) its Machines' domains."""

    def __init__(self, fence_after: float, heartbeat: PoolHeartbeat, machines: Informer[Machine],
                 runtime: Any, owner_labels: Callable[[], dict[str, str]],
                 on_restored: Callable[[], None], still_here: Callable[[str, str], Awaitable[bool]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fence_after = fence_after
        self.heartbeat = heartbeat
        self.machines = machines
        self.runtime = runtime
        self.owner_labels = owner_labels
        self.on_restored = on_restored
        self.still_here = still_here  # whether the Machine (key, uid) is bound here, read from an apiserver
        self._clock = clock
        self.started = clock()
        self.fenced_at: float | None = None  # monotonic; None while not fenced
        self.fenced: dict[str, str] = {}  # IRI machine id -> "namespace/name" of the Machines shut off
        self._uids: dict[str, str] = {}  # IRI machine id -> its Machine's uid
        #: uids of fenced Machines found bound elsewhere (or gone) at the restore: never started here
        self.moved: set[str] = set()
        self.last: tuple[str, str, str] | None = None  # (status, reason, message) for the pool's condition
        self.pending_events: list[tuple[str, str]] = []  # (reason, message) once the apiserver answers
        self.failed = False  # a domain could not be shut off yet
        self._taken_over = False  # the controller's mark, as last followed

    # -- what the reconciler asks -------------------------------------------------------------------

    def holds_off(self, machine: Machine) -> bool:
        """Whether ``machine``'s domain must stay off: the pool is fenced or the control plane took it
        over, and the Machine does not opt out."""
        if machine.metadata.uid in self.moved:
            return True  # moved while the host was cut off: its domain here is only deleted
        if not (self.fenced_at is not None or self.heartbeat.taken_over):
            return False
        return not tolerates_unreachable_forever(machine.spec.tolerations)

    def forget_gone(self, live_uids: set[str]) -> None:
        """Moved Machines whose old domain is gone here (the runtime lists none for their uid) are no
        longer held off: one bound here again gets a new domain as usual."""
        self.moved &= live_uids

    def condition(self, previous: Any, now: str) -> dict[str, Any] | None:
        """The pool's ``Fenced`` condition (None until the pool was first fenced)."""
        if self.last is None:
            return None
        status, reason, message = self.last
        return condition("Fenced", status, reason, message, previous, now)

    # -- the loop ------------------------------------------------------------------------------------

    async def check_once(self) -> None:
        now = self._clock()
        renewed = self.heartbeat.last_renewed or self.started
        if self.fenced_at is None:
            if fence_due(renewed, now, self.fence_after):
                await self.fence(now - renewed)
            return
        if renewed > self.fenced_at and not self.heartbeat.taken_over:
            await self.restore()
        elif self.failed:
            await self._shut_off()  # what could not be shut off at first

    async def fence(self, silent_for: float) -> None:
        """Shut off every domain this poollet made whose Machine does not opt out."""
        self.fenced_at = self._clock()
        await self._shut_off()
        shut = sorted(set(self.fenced.values()))
        message = (f"the poollet could not renew the pool's Lease for {silent_for:.0f}s (--fence-after "
                   f"{self.fence_after:g}s): shut off {len(shut)} machine(s)"
                   + (f": {', '.join(shut)}" if shut else ""))
        log.warning("FENCED: %s", message)
        self.last = ("True", FENCED_REASON, message)
        self.pending_events.append(("Fenced", message))

    async def _shut_off(self) -> None:
        self.failed = False
        for iri in await self.runtime.list_machines(labels=self.owner_labels()):
            done = iri.metadata.id in self.fenced and iri.spec.power == mpb.POWER_OFF
            if iri.metadata.deleted_at or done:
                continue
            key = "/".join(filter(None, (iri.metadata.labels.get(keys.MACHINE_NAMESPACE_LABEL),
                                         iri.metadata.labels.get(keys.MACHINE_NAME_LABEL))))
            machine = self.machines.get(key)
            if machine is not None and tolerates_unreachable_forever(machine.spec.tolerations):
                continue  # opted out: runs on through the partition, and is never evicted
            try:
                await self.runtime.update_machine_annotations(
                    iri.metadata.id, {**iri.metadata.annotations, FENCED_ANNOTATION: FENCED_REASON})
                await self.runtime.update_machine_power(iri.metadata.id, mpb.POWER_OFF)
            except Exception as exc:  # keep fencing the others; the next check tries this one again
                log.error("fencing IRI machine %s (%s) failed: %s", iri.metadata.id, key, exc)
                self.failed = True
                continue
            self.fenced[iri.metadata.id] = key
            self._uids[iri.metadata.id] = iri.metadata.labels.get(keys.MACHINE_UID_LABEL, "")

    async def restore(self) -> None:
        """The Lease is renewed again and the control plane holds nothing of this pool: power comes back
        through the reconciler for the Machines an apiserver read (not the informer, which may not have
        caught up after the partition) shows still bound here; the others moved while the host was cut
        off and stay off until their domains are deleted. The fence annotation goes first."""
        starting: list[str] = []
        for iri_id, key in list(self.fenced.items()):
            uid = self._uids.get(iri_id, "")
            try:
                if not await self.still_here(key, uid):
                    self.moved.add(uid)
                    continue
                found = await self.runtime.list_machines(iri_id)
                if found and not found[0].metadata.deleted_at:  # one being deleted is not started again
                    kept = {k: v for k, v in found[0].metadata.annotations.items() if k != FENCED_ANNOTATION}
                    await self.runtime.update_machine_annotations(iri_id, kept)
                    starting.append(key)
            except Exception as exc:
                log.warning("un-fencing IRI machine %s: %s; retrying", iri_id, exc)
                return
        self.fenced.clear()
        self.fenced_at = None
        message = ("the pool's Lease is renewed again and the control plane holds none of its machines: "
                   f"starting {len(starting)} fenced machine(s) still bound here again as declared"
                   + (f": {', '.join(sorted(starting))}" if starting else ""))
        log.warning("UNFENCED: %s", message)
        self.last = ("False", "LeaseRenewed", message)
        self.pending_events.append(("Unfenced", message))
        self.on_restored()

    def _follow_takeover(self) -> None:
        """The controller's mark appeared or went (also on a poollet that restarted meanwhile): the
        Machines it holds off change, so they are reconciled again and the condition says why."""
        taken = self.heartbeat.taken_over
        if taken == self._taken_over:
            return
        self._taken_over = taken
        if taken:
            self.last = ("True", TAKEN_OVER_REASON,
                         "the control plane took this pool's machines over while it was cut off: they stay "
                         "off here until they run elsewhere")
        elif self.fenced_at is None and self.last is not None and self.last[1] == TAKEN_OVER_REASON:
            self.last = ("False", "TakeoverEnded", "the control plane's takeover of this pool ended: its "
                                                   "machines run as declared")
        self.on_restored()

    async def _flush_events(self, report: Report) -> None:
        while self.pending_events:
            reason, message = self.pending_events[0]
            if not await report("Warning" if reason == "Fenced" else "Normal", reason, message):
                return  # still cut off: try again later
            self.pending_events.pop(0)

    async def run(self, stop: asyncio.Event, report: Report) -> None:
        """Check every second (at most a tenth of ``fence_after``) until ``stop``; ``report`` writes an
        Event on the pool (False: not written, e.g. still cut off)."""
        period = min(1.0, self.fence_after / 10)
        while True:
            try:
                await self.check_once()
            except Exception:
                log.exception("fence check failed")
            self._follow_takeover()
            await self._flush_events(report)
            if await sleep_or_stop(stop, period):
                return
