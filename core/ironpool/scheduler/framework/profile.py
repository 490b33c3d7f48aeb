"""A profile's framework: runs its plugins for one object, reserves the result, and binds it.

Two ways to find a pool, with the same answer:

* fast path (plain Machines: the only active scorer is the profile's class-static strategy): walk the
  per-class index best-first, run only the filters the index does not cover and that PreFilter did
  not skip (selector, volume locality, ...), and stop at the first pool that passes; tainted pools
  are checked aside;
* scan: every filter on every pool, then Score, NormalizeScore (when several scorers are active) and
  the weighted sum. Used for Volumes, zone spreading, and to explain a failure.

Before any plugin runs, the framework works out what the object demands (its class's capabilities,
a Volume's storage: :attr:`CycleState.demand`), so every plugin, and Reserve, charge the same
resources whichever plugins a profile runs; an object whose class it does not know yet waits for the
class. Ties go to the smaller pool name on both paths. A failure names every plugin that refused a
pool (kube's "unschedulable plugins") and collects their wake-ups, so the queue knows which cluster
events are worth another attempt.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on, same_kind
from ironpool.scheduler.framework.interface import (
    SUCCESS,
    BindPlugin,
    ClassStaticScorePlugin,
    Code,
    CycleState,
    FilterPlugin,
    Plugin,
    PostBindPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.index import ClassIndex
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

if TYPE_CHECKING:
    from ironpool.client.rest import AsyncClient

#: with no pool of the kind at all, only a new pool can help
POOL_ADDED = on(EventResource.POOL, ActionType.ADD, same_kind)


def _class_appears(req: SchedulingRequest, info: Any) -> bool:
    return bool(info.kind == req.kind and info.name == req.class_name)


#: an object whose class is unknown waits for the class
CLASS_CREATED = on(EventResource.CLASS, ActionType.ADD | ActionType.UPDATE_DEMAND, _class_appears)


@lru_cache(maxsize=4096)
def _class_not_found(kind_word: str, class_name: str) -> Status:
    return unschedulable("", f"{kind_word} class {class_name} not found", CLASS_CREATED)


class RequirementError(ValueError):
    """A profile runs a plugin without another one it needs."""


def check_requirements(plugins: Iterable[type[Plugin]]) -> None:
    """Refuse a set of plugins in which one needs another that is not there, naming both and why."""
    plugins = sorted(plugins, key=lambda p: p.name)
    present = {p.name for p in plugins}
    for plugin in plugins:
        for needed, why in plugin.requires.items():
            if needed not in present:
                raise RequirementError(f"{plugin.name} needs {needed}: {why}; enable {needed} or disable "
                                       f"{plugin.name} too")


@dataclass(slots=True)
class Decision:
    """Where an object goes (``pool``) or why it cannot go anywhere (``message``, ``wakeups``)."""

    request: SchedulingRequest
    pool: str | None
    message: str
    #: the cluster events that could make a refused object schedulable
    wakeups: tuple[ClusterEventWithHint, ...] = ()
    #: the plugins that refused it
    rejectors: frozenset[str] = frozenset()
    state: CycleState | None = None


def _union(wakeups: Iterable[ClusterEventWithHint]) -> tuple[ClusterEventWithHint, ...]:
    return tuple(dict.fromkeys(wakeups))


class Framework:
    """One profile: its plugins by extension point, and (with a class-static strategy) a class index."""

    def __init__(self, name: str, cache: SchedulerCache, plugins: Sequence[Plugin],
                 use_index: bool = True) -> None:
        check_requirements(type(p) for p in plugins)
        self.name = name
        self.cache = cache
        self.pre_enqueuers = [p for p in plugins if isinstance(p, PreEnqueuePlugin)]
        self.pre_filters = [p for p in plugins if isinstance(p, PreFilterPlugin)]
        self.filters = [p for p in plugins if isinstance(p, FilterPlugin)]
        self.scorers = [p for p in plugins if isinstance(p, ScorePlugin)]
        self.reservers = [p for p in plugins if isinstance(p, ReservePlugin)]
        self.pre_binders = [p for p in plugins if isinstance(p, PreBindPlugin)]
        self.binders = [p for p in plugins if isinstance(p, BindPlugin)]
        self.post_binders = [p for p in plugins if isinstance(p, PostBindPlugin)]
        self._uncovered = [f for f in self.filters if not f.index_covered]
        #: per combination of skipped filters (few): the filters left to run
        self._filter_sets: dict[tuple[str, ...], tuple[list[FilterPlugin], list[FilterPlugin]]] = {}
        static = [s for s in self.scorers if isinstance(s, ClassStaticScorePlugin)]
        #: the profile's scoring strategy, when it has exactly one class-static scorer
        self.strategy: ClassStaticScorePlugin | None = static[0] if len(static) == 1 else None
        self.index: ClassIndex | None = None
        if use_index and self.strategy is not None:
            covered = [f for f in self.filters if f.index_covered]
            self.index = ClassIndex(cache, "machine", self.strategy.static_score, covered)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()

    def events_to_register(self) -> set[ClusterEventWithHint]:
        """Every wake-up a decision of this profile can carry."""
        plugins = {*self.pre_enqueuers, *self.pre_filters, *self.filters, *self.reservers}
        return {POOL_ADDED, CLASS_CREATED, *(w for p in plugins for w in p.events_to_register())}

    # ---- scheduling cycle --------------------------------------------------------------------
    def pre_enqueue(self, req: SchedulingRequest) -> Status:
        """Whether ``req`` may be tried now (PreEnqueue)."""
        state = CycleState(self.cache)
        for plugin in self.pre_enqueuers:
            status = plugin.pre_enqueue(state, req)
            if not status.ok:
                return status
        return SUCCESS

    def find(self, req: SchedulingRequest) -> Decision:
        """Pick a pool for ``req`` without reserving anything."""
        state, refused = self.new_cycle(req)
        if refused is not None:
            return Decision(req, None, refused.reason, refused.wakeups, frozenset(), state)
        skipped: list[str] = []
        for plugin in self.pre_filters:
            status = plugin.pre_filter(state, req)
            if status.code is Code.SKIP:
                skipped.append(plugin.name)
            elif not status.ok:
                return Decision(req, None, status.reason, status.wakeups, frozenset({status.plugin}), state)
        filters, uncovered = self._without(tuple(skipped))
        active = [s for s in self.scorers if s.pre_score(state, req).code is not Code.SKIP]
        if req.only_pools is not None:
            state.pool_names = set(req.only_pools) if state.pool_names is None else \
                state.pool_names & req.only_pools
        if state.pool_names is not None:
            return self._scan(state, req, active, filters)  # a few pools: the index would only walk past
        if (self.index is not None and req.kind == "machine" and len(active) == 1
                and active[0] is self.strategy and req.class_name is not None):
            pool = self._fast(state, req, filters, uncovered)
            if pool is not None:
                return Decision(req, pool.name, "", state=state)
            if not uncovered and not req.tolerations:
                # A plain Machine: the index already knows why each pool refuses the class.
                counts, statuses = self.index.failures(req.class_name)
                return self._failure(req, state, self.cache.pool_count(req.kind), counts, statuses)
            # Nothing in the index fits: the scan explains why per reason (and is the safety net).
        return self._scan(state, req, active, filters)

    def schedule(self, req: SchedulingRequest) -> Decision:
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
                return Decision(req, None, f"0/1 pools: 1 {status.reason}", status.wakeups,
                                frozenset({status.plugin}), state)
            done.append(plugin)
        self.cache.assume(req.kind, req.key, pool.name, req.class_name, state.demand, req.labels,
                          req.reservation)
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

    # ---- binding cycle -----------------------------------------------------------------------
    async def bind(self, client: AsyncClient, decision: Decision) -> Status:
        """PreBind, then the first Bind plugin that does not skip the object."""
        req, state, pool = decision.request, decision.state, decision.pool
        assert state is not None and pool is not None
        for pre in self.pre_binders:
            status = await pre.pre_bind(client, state, req, pool)
            if not status.ok:
                return status
        for binder in self.binders:
            status = await binder.bind(client, state, req, pool)
            if status.code is not Code.SKIP:
                return status
        return Status(Code.ERROR, f"no bind plugin handled {req.kind} {req.key}")

    def post_bind(self, decision: Decision) -> None:
        assert decision.state is not None and decision.pool is not None
        for plugin in self.post_binders:
            plugin.post_bind(decision.state, decision.request, decision.pool)

    def new_cycle(self, req: SchedulingRequest) -> tuple[CycleState, Status | None]:
        """A scheduling cycle's state for ``req``, with what it demands of a pool; and the refusal
        when that is not known (no class, or a class this scheduler has not seen: only a new version
        of the object, or the class, can help)."""
        state = CycleState(self.cache)
        kind_word = "machine" if req.kind == "machine" else "volume"
        if req.class_name is None:
            return state, unschedulable("", f"{kind_word} has no class")
        if (req.kind, req.class_name) not in self.cache.classes:
            return state, _class_not_found(kind_word, req.class_name)
        state.demand = self.cache.demand_of(req.kind, req.class_name, req.storage) or {}
        return state, None

    # ---- internals ---------------------------------------------------------------------------
    def _without(self, skipped: tuple[str, ...]) -> tuple[list[FilterPlugin], list[FilterPlugin]]:
        """The filters, and those the index does not cover, minus the ones PreFilter skipped."""
        found = self._filter_sets.get(skipped)
        if found is None:
            found = self._filter_sets[skipped] = (
                [f for f in self.filters if f.name not in skipped],
                [f for f in self._uncovered if f.name not in skipped])
        return found

    @staticmethod
    def _passes(filters: Sequence[FilterPlugin], state: CycleState, req: SchedulingRequest,
                pool: PoolInfo) -> Status | None:
        for f in filters:
            status = f.filter(state, req, pool)
            if not status.ok:
                return status
        return None

    def _fast(self, state: CycleState, req: SchedulingRequest, filters: Sequence[FilterPlugin],
              uncovered: Sequence[FilterPlugin]) -> PoolInfo | None:
        assert self.index is not None and self.strategy is not None and req.class_name is not None
        best: tuple[float, str] | None = None
        best_pool: PoolInfo | None = None
        for score, pool in self.index.candidates(req.class_name):
            if not uncovered or self._passes(uncovered, state, req, pool) is None:
                best, best_pool = (-score, pool.name), pool
                break
        if self.index.tainted and req.tolerations:
            for pool in self.index.tainted.values():
                if self._passes(filters, state, req, pool) is None:
                    key = (-self.strategy.score(state, req, pool), pool.name)
                    if best is None or key < best:
                        best, best_pool = key, pool
        return best_pool

    def _scan(self, state: CycleState, req: SchedulingRequest, active: list[ScorePlugin],
              filters: Sequence[FilterPlugin]) -> Decision:
        feasible: list[PoolInfo] = []
        failures: Counter[str] = Counter()
        statuses: dict[str, Status] = {}
        if state.pool_names is None:
            pools = sorted(self.cache.pools_of(req.kind), key=lambda p: p.name)
        else:
            found = (self.cache.pools.get((req.kind, name)) for name in state.pool_names)
            pools = sorted((p for p in found if p is not None), key=lambda p: p.name)
        for pool in pools:
            status = self._passes(filters, state, req, pool)
            if status is None:
                feasible.append(pool)
            else:
                failures[status.reason] += 1
                statuses[status.reason] = status
        if not feasible:
            return self._failure(req, state, len(pools), failures, statuses)
        totals = [0.0] * len(feasible)
        for scorer in active:
            raw = [scorer.score(state, req, p) for p in feasible]
            # With a single scorer the raw order is the answer; normalising only risks rounding ties.
            values = raw if len(active) == 1 else scorer.normalize(raw)
            weight = scorer.weight if len(active) > 1 else 1
            for i, v in enumerate(values):
                totals[i] += weight * v
        best = min(range(len(feasible)), key=lambda i: (-totals[i], feasible[i].name))
        return Decision(req, feasible[best].name, "", state=state)

    @staticmethod
    def _failure(req: SchedulingRequest, state: CycleState, total: int, failures: Counter[str],
                 statuses: dict[str, Status]) -> Decision:
        kind = "machine" if req.kind == "machine" else "volume"
        if total == 0:
            return Decision(req, None, f"0/0 pools: no {kind} pools exist", (POOL_ADDED,), frozenset(), state)
        ordered = sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = ", ".join(f"{n} {reason}" for reason, n in ordered)
        wakeups = _union(w for s in statuses.values() for w in s.wakeups)
        rejectors = frozenset(s.plugin for s in statuses.values())
        return Decision(req, None, f"0/{total} pools: {parts}", wakeups, rejectors, state)
