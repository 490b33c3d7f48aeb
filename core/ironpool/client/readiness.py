"""What "ready" means, per kind, for every front end: one definition of a Machine being scheduled or
running and of a Volume being scheduled or available, each answering with a one-line account of
where the object is, so the CLI, the Ansible modules and the Pulumi provider say the same thing.

A :class:`Readiness` is a function from the object as last seen (None: it does not exist) to a
:class:`Verdict`. A Machine is **running** when the poollet has acted on its current spec
(``status.observedGeneration`` reported and at least ``metadata.generation``), its state is the one
its power asks for (``Running``, or ``Shutdown`` for power Off), and its volumes and network
interfaces are attached: its ``VolumesReady`` and ``NetworkInterfacesReady`` conditions are True
(without them, each one the spec lists is ``Attached`` in the status, as IronCore reports them). A
Volume is **available** when its state is ``Available`` at least at the size it asks for. A pool
is **ready** when its ``Ready`` condition is True, as the scheduler judges it. A VolumeSnapshot is
**ready** when its state is ``Ready``; one ``Failed`` has *failed*. A Reservation is
**accepted** when every pool of its plan accepted its part (``Accepted=True``); one the scheduler
refused, a pool rejected or that expired has *failed*: it never will be. A dry run is **answered**
once the scheduler said whether it fits.

While an object is not bound to a pool, the verdict carries the scheduler's latest reason (its
``Scheduled`` condition), and says when that reason cannot change unless the fleet does: every pool
refuses because it does not offer the class or does not match the pool selector. A pool that is
full, not ready, tainted or cordoned may change on its own; an empty fleet is taken as one that is
still coming up.

Nothing here imports the API's models: an Ansible task loads this module on every run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ironpool.api import reservation as rsv
from ironpool.api.columns import dig
from ironpool.api.quantity import parse_quantity

Obj = dict[str, Any]

# The condition types the scheduler and the machinepoollet write (``ironpool.api.conditions`` and
# the poollet), named here without importing the models they live beside.
SCHEDULED = "Scheduled"
VOLUMES_READY = "VolumesReady"
NICS_READY = "NetworkInterfacesReady"
READY = "Ready"

#: The scheduler's per-pool phrases that only a change to the fleet can lift (a pool offering the
#: class, a pool carrying the selected labels); its summary is ``0/N pools: <count> <phrase>, ...``.
FLEET_BOUND_PHRASES = ("do not offer class ", "do not match the pool selector")
_SUMMARY = re.compile(r"0/[1-9]\d* pools: (.+)")
_PART = re.compile(r"\d+ (.+)")


@dataclass(frozen=True)
class Verdict:
    """Whether an object reached what a wait asks for and, in one line, where it is.

    ``unschedulable`` is the scheduler's reason when no pool can take the object until the fleet
    changes (empty otherwise)."""

    done: bool
    progress: str
    unschedulable: str = ""
    #: why the object can never become done (a refused Reservation); a wait ends at once with it
    failed: str = ""


Readiness = Callable[["Obj | None"], Verdict]


def condition(obj: Obj | None, ctype: str) -> Obj | None:
    """The status condition of type ``ctype``, or None."""
    for cond in dig(obj, "status.conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def bound_pool(obj: Obj | None) -> str | None:
    """The pool a Machine (``spec.machinePoolRef``) or Volume (``spec.volumePoolRef``) is bound to."""
    spec = dig(obj, "spec") or {}
    ref = spec.get("machinePoolRef") or spec.get("volumePoolRef") or {}
    return str(ref.get("name")) if isinstance(ref, dict) and ref.get("name") else None


def scheduler_reason(obj: Obj | None) -> str | None:
    """Why the scheduler could not place an unbound object, as it last said (its ``Scheduled``
    condition); None when it has not said, or the object is bound."""
    if obj is None or bound_pool(obj):
        return None
    cond = condition(obj, SCHEDULED)
    if cond is None or cond.get("status") != "False":
        return None
    return str(cond.get("message") or cond.get("reason") or "unschedulable")


def needs_fleet_change(reason: str) -> bool:
    """Whether every pool refuses for a reason only a change to the fleet lifts (see the module)."""
    match = _SUMMARY.fullmatch(reason.strip())
    if match is None:
        return False
    for part in match.group(1).split(", "):
        phrase = _PART.fullmatch(part)
        if phrase is None or not phrase.group(1).startswith(FLEET_BOUND_PHRASES):
            return False
    return True


def scheduled(obj: Obj | None) -> Verdict:
    """A Machine or Volume is bound to a pool."""
    if obj is None:
        return Verdict(False, "does not exist")
    pool = bound_pool(obj)
    if pool:
        return Verdict(True, f"scheduled on pool {pool}")
    reason = scheduler_reason(obj)
    if reason is None:
        return Verdict(False, "not scheduled yet")
    return Verdict(False, f"not scheduled: {reason}", reason if needs_fleet_change(reason) else "")


def _lag(obj: Obj) -> str | None:
    """Why the status does not describe the current spec, or None when it does."""
    generation = dig(obj, "metadata.generation")
    observed = dig(obj, "status.observedGeneration")
    if observed is None:
        return "no status for its spec yet"
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return f"status is of generation {observed}, the spec of {generation}"
    return None


def state_of(obj: Obj | None) -> str:
    """A Machine's or Volume's state as of its current spec: ``status.state``, but ``Pending`` before
    its poollet reported one, and while the status is of an older generation of the spec (a change
    not acted on yet)."""
    generation = dig(obj, "metadata.generation")
    observed = dig(obj, "status.observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return "Pending"
    return str(dig(obj, "status.state") or "Pending")


def _attachments(obj: Obj, ctype: str, spec_key: str, what: str) -> str | None:
    """Why the volumes (or NICs) are not all attached: their condition, or without one the status
    entry of each the spec lists; None when they are."""
    cond = condition(obj, ctype)
    if cond is not None:
        if cond.get("status") == "True":
            return None
        return f"{what}: {cond.get('message') or cond.get('reason') or 'not ready'}"
    attached = {e.get("name") for e in dig(obj, f"status.{spec_key}") or () if isinstance(e, dict)
                and e.get("state") == "Attached"}
    pending = [str(e.get("name")) for e in dig(obj, f"spec.{spec_key}") or () if isinstance(e, dict)
               and e.get("name") not in attached]
    return f"{what} not attached: {', '.join(pending)}" if pending else None


def machine_running(obj: Obj | None) -> Verdict:
    """A Machine realises its current spec (see the module)."""
    placed = scheduled(obj)
    if not placed.done or obj is None:
        return placed
    want = "Shutdown" if dig(obj, "spec.power") == "Off" else "Running"
    state = dig(obj, "status.state")
    lag = _lag(obj)
    problems = [lag] if lag else []
    if state != want:
        ready = condition(obj, READY) or {}
        why = f" ({ready['message']})" if ready.get("status") == "False" and ready.get("message") else ""
        problems.append(f"state {state or 'not reported yet'}{why}, wants {want}")
    for ctype, key, what in ((VOLUMES_READY, "volumes", "volumes"),
                             (NICS_READY, "networkInterfaces", "network interfaces")):
        problem = _attachments(obj, ctype, key, what)
        if problem:
            problems.append(problem)
    where = f"on pool {bound_pool(obj)}"
    if problems:
        return Verdict(False, f"{where}: " + "; ".join(problems))
    return Verdict(True, f"{want} {where}")


def volume_available(obj: Obj | None) -> Verdict:
    """A Volume is ``Available`` at least at its requested size."""
    placed = scheduled(obj)
    if not placed.done or obj is None:
        return placed
    where = f"on pool {bound_pool(obj)}"
    state = dig(obj, "status.state")
    if state != "Available":
        return Verdict(False, f"{where}: state {state or 'not reported yet'}, wants Available")
    want, have = dig(obj, "spec.resources.storage"), dig(obj, "status.resources.storage")
    if want is not None and have is not None and parse_quantity(str(have)) < parse_quantity(str(want)):
        return Verdict(False, f"{where}: Available at {have}, growing to {want}")
    return Verdict(True, f"Available {where}")


def pool_ready(obj: Obj | None) -> Verdict:
    """A MachinePool or VolumePool is ready: its ``Ready`` condition is True (without one, its state
    is ``Ready`` or ``Available``), as the scheduler judges it."""
    if obj is None:
        return Verdict(False, "does not exist")
    cond = condition(obj, READY)
    if cond is not None:
        ok = cond.get("status") == "True"
        why = f": {cond.get('message') or cond.get('reason')}" if not ok and (cond.get("message") or
                                                                             cond.get("reason")) else ""
        return Verdict(ok, f"Ready={cond.get('status')}{why}")
    state = dig(obj, "status.state")
    return Verdict(state in ("Ready", "Available"), f"state {state or 'not reported yet'}")


def _message(obj: Obj, ctype: str) -> str:
    cond = condition(obj, ctype) or {}
    return str(cond.get("message") or cond.get("reason") or "")


def reservation_accepted(obj: Obj | None) -> Verdict:
    """A Reservation is held by every pool of its plan (see the module)."""
    if obj is None:
        return Verdict(False, "does not exist")
    word = rsv.summary(obj)
    if word == rsv.ACCEPTED:
        return Verdict(True, f"accepted: {_message(obj, SCHEDULED)}")
    if word == "Expired":
        return Verdict(False, "expired", failed=f"expired: {_message(obj, rsv.EXPIRED)}")
    if word == rsv.REJECTED:
        refused = (condition(obj, SCHEDULED) or {}).get("status") == "False"
        why = _message(obj, SCHEDULED if refused else rsv.ACCEPTED_CONDITION)
        return Verdict(False, "rejected", failed=f"rejected: {why}")
    if word in ("Fits", "DoesNotFit"):
        return Verdict(False, "a dry run", failed="a dry run is never accepted: it holds nothing")
    if condition(obj, SCHEDULED) is None:
        return Verdict(False, "waiting for the scheduler")
    waiting = sorted(str(e["ref"]) for e in rsv.pool_entries(obj) if e.get("state") != rsv.ACCEPTED)
    return Verdict(False, f"planned ({_message(obj, SCHEDULED)}); waiting for pool {', '.join(waiting)}")


def reservation_answered(obj: Obj | None) -> Verdict:
    """The scheduler answered a Reservation (planned it, or said why not): what a dry run waits for."""
    if obj is None:
        return Verdict(False, "does not exist")
    cond = condition(obj, SCHEDULED)
    if cond is None:
        return Verdict(False, "waiting for the scheduler")
    fits = "fits" if cond.get("status") == "True" else "does not fit"
    return Verdict(True, f"{fits}: {_message(obj, SCHEDULED)}")


def snapshot_ready(obj: Obj | None) -> Verdict:
    """A VolumeSnapshot's state is ``Ready`` (usable as a Volume's data source); ``Failed`` never will be."""
    if obj is None:
        return Verdict(False, "does not exist")
    state = dig(obj, "status.state")
    source = dig(obj, "spec.volumeRef.name") or "?"
    if state == "Ready":
        return Verdict(True, f"Ready, {dig(obj, 'status.size') or 'size unknown'} of volume {source}")
    if state == "Failed":
        return Verdict(False, "Failed", failed=f"the snapshot of volume {source} failed at its volume pool")
    return Verdict(False, f"{state or 'Pending'}: waiting for volume {source} and its pool")


def exists(obj: Obj | None) -> Verdict:
    """The object exists."""
    return Verdict(obj is not None, "exists" if obj is not None else "does not exist")


def gone(obj: Obj | None) -> Verdict:
    """The object no longer exists (its finalizers are done)."""
    if obj is None:
        return Verdict(True, "gone")
    finalizers = dig(obj, "metadata.finalizers") or []
    if dig(obj, "metadata.deletionTimestamp"):
        return Verdict(False, f"being deleted, finalizers: {', '.join(finalizers) or 'none'}")
    return Verdict(False, "not deleted")


#: ``(kind, what to wait for)`` -> its readiness; ``ready`` is each kind's last step.
READINESS: dict[tuple[str, str], Readiness] = {
    ("Machine", "scheduled"): scheduled,
    ("Machine", "running"): machine_running,
    ("Machine", "ready"): machine_running,
    ("Volume", "scheduled"): scheduled,
    ("Volume", "available"): volume_available,
    ("Volume", "ready"): volume_available,
    ("MachinePool", "ready"): pool_ready,
    ("VolumePool", "ready"): pool_ready,
    ("VolumeSnapshot", "ready"): snapshot_ready,
    ("Reservation", "accepted"): reservation_accepted,
    ("Reservation", "ready"): reservation_accepted,
    ("Reservation", "answered"): reservation_answered,
}


def readiness_for(kind: str, what: str) -> Readiness:
    """The readiness of ``kind`` named ``what`` (``scheduled``, ``running``, ``available``,
    ``ready``); ``ready`` of any other kind is :func:`exists`, ``gone`` is :func:`gone`."""
    if what == "gone":
        return gone
    found = READINESS.get((kind, what))
    if found is not None:
        return found
    if what == "ready":
        return exists
    known = sorted({w for k, w in READINESS if k == kind} | {"ready", "gone"})
    raise ValueError(f"a {kind} cannot be waited for {what!r} (known: {', '.join(known)})")
