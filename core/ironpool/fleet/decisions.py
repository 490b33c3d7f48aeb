"""The pool lifecycle controller's decisions, as pure functions of what it observed and the time.

Learned from Kubernetes' node lifecycle controller: a pool is alive while its Lease keeps changing
*as this controller observes it* (the time written in the Lease is the poollet's clock and never
counts, so skew between hosts cannot expire a healthy pool); after ``grace`` seconds without a change
it is unreachable. An unreachable pool gets ``Ready=Unknown`` and the ``pool.ironpool.dev/unreachable``
``NoExecute`` taint. Machines on a pool with ``NoExecute`` taints they do not tolerate are evicted at
once; a toleration with ``tolerationSeconds`` delays that by as long, counted from the taint's
``timeAdded`` (the smallest of all matching tolerations wins, as in the taint manager).

Evictions are rate limited per pool (``--pool-eviction-rate``, Kubernetes' ``--node-eviction-rate``)
and held back entirely when every pool of a kind is unreachable at once (Kubernetes' "full
disruption"): then the fault is most likely the control plane's own network, and moving every
Machine would only make it worse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ironpool.api.fleet import UNREACHABLE_TAINT_KEY, UNSCHEDULABLE_TAINT_KEY
from ironpool.api.meta import Condition, Taint, Toleration, toleration_tolerates

UNKNOWN_REASON = "PoolStatusUnknown"
UNREACHABLE = Taint(key=UNREACHABLE_TAINT_KEY, effect="NoExecute")
UNSCHEDULABLE = Taint(key=UNSCHEDULABLE_TAINT_KEY, effect="NoSchedule")


def unknown_message(grace: float) -> str:
    return f"The poollet stopped renewing the pool's Lease (no renewal seen for {grace:.0f}s)."


@dataclass(frozen=True, slots=True)
class LeaseSeen:
    """A Lease as last observed: its record (resourceVersion) and when, on this controller's clock."""

    record: str
    at: float


def observe(previous: LeaseSeen | None, record: str, now: float) -> LeaseSeen:
    """What to remember after seeing ``record`` at ``now``; the time moves only when the record
    changed, so an unchanged Lease ages (and a Lease first seen starts a whole grace period)."""
    if previous is not None and previous.record == record:
        return previous
    return LeaseSeen(record, now)


def unreachable(seen: LeaseSeen, now: float, grace: float) -> bool:
    """Whether a pool whose Lease was ``seen`` is past its grace period."""
    return now - seen.at >= grace


def ready_condition(conditions: Sequence[Condition] | None) -> Condition | None:
    return next((c for c in conditions or () if c.type == "Ready"), None)


def needs_unknown(conditions: Sequence[Condition] | None) -> bool:
    """Whether the pool's Ready condition must be set to Unknown (it is not Unknown yet)."""
    ready = ready_condition(conditions)
    return ready is None or ready.status != "Unknown"


def has_taint(taints: Iterable[Taint] | None, taint: Taint) -> bool:
    return any(t.key == taint.key and t.effect == taint.effect for t in taints or ())


def with_taint(taints: Sequence[Taint] | None, taint: Taint, now: str) -> list[Taint] | None:
    """``taints`` plus ``taint`` stamped ``now``; None if it is there already."""
    if has_taint(taints, taint):
        return None
    return [*(taints or ()), taint.model_copy(update={"time_added": now})]


def without_taint(taints: Sequence[Taint] | None, taint: Taint) -> list[Taint] | None:
    """``taints`` without ``taint``; None if it was not there."""
    if not has_taint(taints, taint):
        return None
    return [t for t in taints or () if not (t.key == taint.key and t.effect == taint.effect)]


def _added(taint: Taint, fallback: float) -> float:
    if not taint.time_added:
        return fallback
    try:
        return datetime.fromisoformat(taint.time_added.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:
        return fallback


def eviction_at(tolerations: Sequence[Toleration] | None, taints: Sequence[Taint] | None,
                now: float) -> float | None:
    """When (wall-clock seconds) an object with ``tolerations`` on a pool with ``taints`` is evicted:
    ``now`` if some NoExecute taint is not tolerated, the earliest ``timeAdded + tolerationSeconds`` of
    the tolerations that match, or None if it tolerates them all for ever (or there are none)."""
    no_execute = [t for t in taints or () if t.effect == "NoExecute"]
    if not no_execute:
        return None
    at: float | None = None
    for taint in no_execute:
        matching = [tol for tol in tolerations or () if toleration_tolerates(tol, taint)]
        if not matching:
            return now
        bounded = [tol.toleration_seconds for tol in matching if tol.toleration_seconds is not None]
        if bounded:
            due = _added(taint, now) + max(0, min(bounded))
            at = due if at is None else min(at, due)
    return at


def fully_disrupted(unreachable_pools: int, pools: int) -> bool:
    """Kubernetes' full disruption: every pool of a kind unreachable (with more than one pool)."""
    return pools > 1 and unreachable_pools == pools


class TokenBucket:
    """Admits ``rate`` pools per second for eviction, with ``burst`` at once (client-go's token
    bucket rate limiter, on an injectable clock)."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("the eviction rate must be positive and the burst at least 1 "
                             f"(got {rate}, {burst})")
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = now

    def try_take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
