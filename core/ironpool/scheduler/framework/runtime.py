"""The framework runtime: runs one profile's plugins for one object and reserves the result.

Two ways to find a pool, with the same answer:

* fast path (plain Machines: the only active scorer is the profile's class-static strategy): walk the
  per-class index best-first, run only the filters the index does not already guarantee (selector,
  volume locality, ...) and stop at the first pool that passes; tainted pools are checked aside;
* scan: every filter on every pool, then Score, NormalizeScore (when several scorers are active) and
  the weighted sum. Used for Volumes, zone spreading, and to explain a failure.

Ties go to the smaller pool name on both paths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.framework.interface import (
    WAKE_CAPACITY,
    WAKE_POOL,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
    wake_offer,
)
from ironpool.scheduler.index import ClassIndex
from ironpool.scheduler.model import PoolInfo, Request


@dataclass(slots=True)
class Decision:
    """Where an object goes (``pool``) or why it cannot go anywhere (``message``, ``wake``)."""

    request: Request
    pool: str | None
    message: str
    wake: frozenset[str] = frozenset()
    state: CycleState | None = None
    reasons: dict[str, int] = field(default_factory=dict)


class Framework:
    """One profile: its plugins in order, and (when it has a class-static strategy) a class index."""

    def __init__(self, name: str, cache: SchedulerCache, *, pre_filters: Sequence[PreFilterPlugin],
                 filters: Sequence[FilterPlugin], scorers: Sequence[ScorePlugin],
                 reservers: Sequence[ReservePlugin], use_index: bool = True) -> None:
        self.name = name
        self.cache = cache
        self.pre_filters = list(pre_filters)
        self.filters = list(filters)
        self.scorers = list(scorers)
        self.reservers = list(reservers)
        self._uncovered = [f for f in self.filters if not f.index_covered]
        static = [s for s in self.scorers if s.class_static]
        self.strategy: ScorePlugin | None = static[0] if len(static) == 1 else None
        self.index: ClassIndex | None = None
        if use_index and self.strategy is not None:
            # class-static scorers expose static_score(pool, demand); looked up by name on purpose
            score_fn = getattr(self.strategy, "static_score")  # noqa: B009
            self.index = ClassIndex(cache, "machine", score_fn)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()

    # ---- decisions ---------------------------------------------------------------------------
    def find(self, req: Request) -> Decision:
        """Pick a pool for ``req`` without reserving anything."""
        state = CycleState(self.cache)
        for plugin in self.pre_filters:
            status = plugin.pre_filter(state, req)
            if not status.ok:
                return Decision(req, None, status.reason, status.wake, state, {status.reason: 1})
        active = [s for s in self.scorers if s.applies(state, req)]
        if (self.index is not None and req.kind == "machine" and len(active) == 1
                and active[0] is self.strategy and req.class_name is not None):
            pool = self._fast(state, req)
            if pool is not None:
                return Decision(req, pool.name, "", frozenset(), state)
            if not self._uncovered_apply(state, req) and not req.tolerations:
                # A plain Machine: the index already knows why each pool refuses the class.
                return self._failure_from_index(req, state)
            # Nothing in the index fits: the scan explains why per reason (and is the safety net).
            return self._scan(state, req, active)
        return self._scan(state, req, active)

    def schedule(self, req: Request) -> Decision:
        """Find a pool and reserve it: the cache counts the object there at once (assumed)."""
        decision = self.find(req)
        if decision.pool is None or decision.state is None:
            return decision
        state = decision.state
        pool = self.cache.pools[(req.kind, decision.pool)]
        done: list[ReservePlugin] = []
        for plugin in self.reservers:
            status = plugin.reserve(state, req, pool)
            if not status.ok:
                for undo in reversed(done):
                    undo.unreserve(state, req, pool)
                return Decision(req, None, f"0/1 pools: 1 {status.reason}", status.wake, state)
            done.append(plugin)
        self.cache.assume(req.kind, req.key, pool.name, req.class_name, state.demand, req.labels, req.uid)
        return decision

    def unreserve(self, decision: Decision) -> None:
        """Undo ``schedule`` (the bind failed)."""
        if decision.pool is None or decision.state is None:
            return
        pool = self.cache.pools.get((decision.request.kind, decision.pool))
        self.cache.forget(decision.request.kind, decision.request.key)
        if pool is not None:
            for plugin in reversed(self.reservers):
                plugin.unreserve(decision.state, decision.request, pool)

    # ---- internals ---------------------------------------------------------------------------
    def _passes(self, filters: Sequence[FilterPlugin], state: CycleState, req: Request,
                pool: PoolInfo) -> Status | None:
        for f in filters:
            status = f.filter(state, req, pool)
            if not status.ok:
                return status
        return None

    def _fast(self, state: CycleState, req: Request) -> PoolInfo | None:
        assert self.index is not None and self.strategy is not None and req.class_name is not None
        best: tuple[float, str] | None = None
        best_pool: PoolInfo | None = None
        uncovered = self._uncovered
        for score, pool in self.index.candidates(req.class_name):
            if not uncovered or self._passes(uncovered, state, req, pool) is None:
                best, best_pool = (-score, pool.name), pool
                break
        if self.index.tainted and req.tolerations:
            for pool in self.index.tainted.values():
                if self._passes(self.filters, state, req, pool) is None:
                    key = (-self.strategy.score(state, req, pool), pool.name)
                    if best is None or key < best:
                        best, best_pool = key, pool
        return best_pool

    def _scan(self, state: CycleState, req: Request, active: list[ScorePlugin]) -> Decision:
        feasible: list[PoolInfo] = []
        failures: Counter[str] = Counter()
        wake: set[str] = set()
        pools = sorted(self.cache.pools_of(req.kind), key=lambda p: p.name)
        for pool in pools:
            status = self._passes(self.filters, state, req, pool)
            if status is None:
                feasible.append(pool)
            else:
                failures[status.reason] += 1
                wake |= status.wake
        if not feasible:
            return self._failure(req, state, len(pools), failures, wake)
        totals = [0.0] * len(feasible)
        for scorer in active:
            raw = [scorer.score(state, req, p) for p in feasible]
            # With a single scorer the raw order is the answer; normalising only risks rounding ties.
            values = raw if len(active) == 1 else scorer.normalize(raw)
            weight = scorer.weight if len(active) > 1 else 1
            for i, v in enumerate(values):
                totals[i] += weight * v
        best = min(range(len(feasible)), key=lambda i: (-totals[i], feasible[i].name))
        return Decision(req, feasible[best].name, "", frozenset(), state)

    def _uncovered_apply(self, state: CycleState, req: Request) -> bool:
        """Whether any filter the index does not cover could refuse a pool for ``req``."""
        if req.selector or req.volume_names:
            return True
        return any(f.name == "TopologySpread" for f in self._uncovered) and req.spread_key is not None

    def _failure_from_index(self, req: Request, state: CycleState) -> Decision:
        assert self.index is not None and req.class_name is not None
        failures = self.index.reasons(req.class_name)
        wake: set[str] = set()
        for reason in failures:
            if reason.startswith("do not offer class "):
                wake.add(wake_offer(req.class_name))
            elif reason.startswith("have too little "):
                wake.update((WAKE_POOL, WAKE_CAPACITY))
            else:
                wake.add(WAKE_POOL)
        total = self.cache.pool_count(req.kind)
        return self._failure(req, state, total, failures, wake)

    @staticmethod
    def _failure(req: Request, state: CycleState, total: int, failures: Counter[str],
                 wake: set[str]) -> Decision:
        kind = "machine" if req.kind == "machine" else "volume"
        if total == 0:
            return Decision(req, None, f"0/0 pools: no {kind} pools exist", frozenset({WAKE_POOL}), state)
        ordered = sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = ", ".join(f"{n} {reason}" for reason, n in ordered)
        return Decision(req, None, f"0/{total} pools: {parts}", frozenset(wake), state, dict(failures))
