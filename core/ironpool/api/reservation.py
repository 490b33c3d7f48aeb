"""Reservations: the names and rules every layer reads a Reservation by (the apiserver's validation
and capacity admission, the scheduler, the poollets, the front ends).

A Reservation (``compute.ironcore.dev/v1alpha1``, namespaced, as IronCore's IEP-11 draft has it)
holds capacity for Machines yet to come. Its ``spec.resources`` are whole machines
(``class/machine.<class>: N``) and at most one further block of ``cpu``/``memory``. The scheduler
plans all of it at once and writes the plan into ``status.pools`` (each pool's ``resources``); the
apiserver's capacity admission charges the plan to the pools' usage in the same write, or refuses
it. Each pool's poollet then asks its runtime to hold its part and writes that pool's ``state``.

A Machine is placed within a Reservation of its namespace by the label :data:`RESERVATION_LABEL`
(IronCore's Machine has no field for it). While it is bound to one of the Reservation's pools it
uses the Reservation's share there; when it goes, the share is the Reservation's again.

A Reservation holds capacity from the scheduler's plan until it expires (``Expired``), is rejected
(``Scheduled=False``, or a pool's runtime rejected its part), or is being deleted; a ``dryRun``
Reservation never holds anything, the scheduler only says whether it would fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ironpool.api.columns import dig

#: On a Machine: the name of the Reservation (same namespace) it is placed within.
RESERVATION_LABEL = "compute.ironcore.dev/reservation"
#: ``class/machine.<name>``: N whole machines of a class (IronCore's class-count resource names).
MACHINE_CLASS_PREFIX = "class/machine."
#: The resources a Reservation may hold besides whole machines.
SHARED_RESOURCES = ("cpu", "memory")

#: IronCore's draft: each pool's poollet keeps ``<prefix><pool>`` on a Reservation it holds a part of.
POOL_FINALIZER_PREFIX = "machinepoollet.ironcore.dev/reservation-"

PENDING, ACCEPTED, REJECTED = "Pending", "Accepted", "Rejected"
STATES = (PENDING, ACCEPTED, REJECTED)
#: Conditions: the scheduler planned all of it (or says why not), every pool accepted its part,
#: the time to live ran out.
SCHEDULED, ACCEPTED_CONDITION, EXPIRED = "Scheduled", "Accepted", "Expired"

Obj = Mapping[str, Any]


def pool_finalizer(pool: str) -> str:
    """The finalizer pool ``pool``'s poollet keeps on a Reservation it holds a part of."""
    return POOL_FINALIZER_PREFIX + pool


def class_key(name: str) -> str:
    """``class/machine.<name>``."""
    return MACHINE_CLASS_PREFIX + name


def class_of_key(key: str) -> str | None:
    """The class a ``class/machine.<name>`` key counts, else None."""
    return key[len(MACHINE_CLASS_PREFIX):] if key.startswith(MACHINE_CLASS_PREFIX) else None



def reservation_of(machine: Obj) -> str | None:
    """The Reservation a Machine (JSON) names, or None."""
    value = (dig(machine, "metadata.labels") or {}).get(RESERVATION_LABEL)
    return str(value) if value else None


def condition(doc: Obj, ctype: str) -> Obj | None:
    for cond in dig(doc, "status.conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == ctype:
            return cond
    return None


def condition_is(doc: Obj, ctype: str, status: str) -> bool:
    cond = condition(doc, ctype)
    return cond is not None and cond.get("status") == status


def is_dry_run(doc: Obj) -> bool:
    return bool(dig(doc, "spec.dryRun"))


def expires_at(doc: Obj) -> datetime | None:
    """When the Reservation's time to live runs out (None: it does not expire)."""
    ttl = dig(doc, "spec.ttlSecondsAfterCreation")
    created = dig(doc, "metadata.creationTimestamp")
    if not isinstance(ttl, int) or not isinstance(created, str):
        return None
    try:
        then = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (then if then.tzinfo else then.replace(tzinfo=UTC)) + timedelta(seconds=ttl)


def pool_entries(doc: Obj) -> list[Obj]:
    """``status.pools`` (well-formed items only)."""
    return [e for e in dig(doc, "status.pools") or () if isinstance(e, Mapping) and e.get("ref")]


def holds(doc: Obj | None) -> bool:
    """Whether the Reservation holds capacity now (see the module docstring)."""
    if doc is None or is_dry_run(doc) or dig(doc, "metadata.deletionTimestamp"):
        return False
    if condition_is(doc, EXPIRED, "True") or condition_is(doc, SCHEDULED, "False"):
        return False
    entries = pool_entries(doc)
    return any(e.get("resources") for e in entries) and not any(e.get("state") == REJECTED for e in entries)


def held(doc: Obj | None) -> dict[str, Mapping[str, Any]]:
    """Pool name -> the resources the Reservation holds there (empty when it holds nothing)."""
    if not holds(doc):
        return {}
    assert doc is not None
    return {str(e["ref"]): e.get("resources") or {} for e in pool_entries(doc) if e.get("resources")}


def summary(doc: Obj) -> str:
    """One word for tables and waiting: ``Expired``, ``Rejected``, ``Accepted``, ``Pending``; for a
    dry run ``Fits`` or ``DoesNotFit`` once the scheduler answered."""
    scheduled = condition(doc, SCHEDULED)
    if is_dry_run(doc):
        if scheduled is None:
            return PENDING
        return "Fits" if scheduled.get("status") == "True" else "DoesNotFit"
    if condition_is(doc, EXPIRED, "True"):
        return "Expired"
    entries = pool_entries(doc)
    if (scheduled is not None and scheduled.get("status") == "False") or any(
            e.get("state") == REJECTED for e in entries):
        return REJECTED
    if entries and all(e.get("state") == ACCEPTED for e in entries):
        return ACCEPTED
    return PENDING
