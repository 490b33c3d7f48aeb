"""When the pool lifecycle controller may move the Machines of a silent pool whose poollet fences itself:
pure functions of what it observed, the time and the two processes' settings.

A machinepoollet started with ``--fence-after F`` shuts off its Machines' domains once it has not
renewed its Lease for ``F`` seconds, and says so in the Lease
(:data:`~ironpool.api.fleet.FENCE_AFTER_ANNOTATION`). The controller measures the Lease's silence on its
own clock from when it *saw* the last change, which is never before the poollet made it, so waiting
``F + margin`` (``--fence-margin``: the time a fence takes, plus the two clocks' drift and the monitor
period) means the domains are off before it moves anything. It waits at least its grace period
(``--pool-monitor-grace-period``), and refuses (``ironpool up``, where both are known) or flags (a
pool's Lease, with an Event) a fence time that would not fit inside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from ironpool.api.compute import Machine
from ironpool.api.fleet import FENCE_AFTER_ANNOTATION, tolerates_unreachable_forever

DEFAULT_FENCE_AFTER = 30.0
DEFAULT_FENCE_MARGIN = 10.0


def published_fence_after(annotations: Mapping[str, str] | None) -> float | None:
    """The fence time a poollet published in its Lease; None when it does not fence itself (no, or no
    usable, annotation: such a pool is treated as before fencing existed)."""
    raw = (annotations or {}).get(FENCE_AFTER_ANNOTATION)
    try:
        value = float(raw) if raw is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def eviction_delay(grace: float, fence_after: float | None, margin: float) -> float:
    """Seconds of Lease silence (as the controller saw it) before the pool's Machines may be moved."""
    return grace if fence_after is None else max(grace, fence_after + margin)


def timing_problem(fence_after: float, grace: float, margin: float) -> str | None:
    """Why a poollet's fence time does not fit the controller's grace period, naming the options
    (None when it fits)."""
    if fence_after + margin <= grace:
        return None
    return (f"--fence-after {fence_after:g}s plus --fence-margin {margin:g}s is more than "
            f"--pool-monitor-grace-period {grace:g}s: the controller would have to evict before the "
            "poollet has fenced itself; lower --fence-after or raise --pool-monitor-grace-period")


def check_fence_timing(fence_after: float, grace: float, margin: float) -> None:
    """Refuse (ValueError naming the options) a configuration where eviction could come first."""
    problem = timing_problem(fence_after, grace, margin) if fence_after else None
    if problem:
        raise ValueError(problem)


def takeover_due(silent_for: float, grace: float, fence_after: float | None, margin: float) -> bool:
    """Whether a pool whose Lease the controller has seen unchanged for ``silent_for`` seconds is past
    its fence: the controller may mark its Lease and move its Machines."""
    return fence_after is not None and silent_for >= eviction_delay(grace, fence_after, margin)


def to_move(machines: Iterable[Machine]) -> list[Machine]:
    """The Machines of a pool taken over that the controller moves: all but those opting out (their
    tolerations match the unreachable taint for ever) and those being deleted."""
    return [m for m in machines
            if not m.metadata.deletion_timestamp and not tolerates_unreachable_forever(m.spec.tolerations)]
