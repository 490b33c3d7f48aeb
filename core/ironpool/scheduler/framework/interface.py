"""Plugin interfaces and the status/state objects that flow between extension points."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.model import PoolInfo, Request

# Wake keys: which cluster events could make a parked object schedulable (see queue.py).
WAKE_POOL = "pool"          # a pool was added, or changed in a way that matters
WAKE_CAPACITY = "capacity"  # something freed resources on a pool


def wake_class(name: str) -> str:
    return f"class:{name}"


def wake_offer(name: str) -> str:
    return f"offer:{name}"


class Code(enum.Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Status:
    """Outcome of a plugin call; ``reason`` is the per-pool phrase used in the summary message."""

    code: Code = Code.SUCCESS
    reason: str = ""
    wake: frozenset[str] = frozenset()

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS


SUCCESS = Status()


def unschedulable(reason: str, *wake: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reason, frozenset(wake))


@dataclass(slots=True)
class CycleState:
    """Per-decision scratch space shared by the plugins of one scheduling cycle."""

    cache: SchedulerCache
    #: resources the object takes (filled by ClassAvailable's PreFilter)
    demand: dict[str, int] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


class Plugin:
    """Base of all plugins; ``name`` is what profiles refer to."""

    name: ClassVar[str] = ""

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        self.args = dict(args or {})


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, req: Request) -> Status:
        raise NotImplementedError


class FilterPlugin(Plugin):
    #: True when every pool in the per-class candidate index passes this filter for any request
    #: (readiness, class offered, resources fit, no taints), so the fast path may skip it.
    index_covered: ClassVar[bool] = False

    def filter(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        raise NotImplementedError


class ScorePlugin(Plugin):
    """Higher is better. ``class_static`` scorers depend only on (pool state, class demand), so a
    per-class index sorted by their score finds the best pool without scoring every pool."""

    class_static: ClassVar[bool] = False

    def __init__(self, args: dict[str, Any] | None = None, weight: int = 1) -> None:
        super().__init__(args)
        self.weight = weight

    def applies(self, state: CycleState, req: Request) -> bool:
        """PreScore: False means this plugin has nothing to say about ``req`` (skipped)."""
        return True

    def score(self, state: CycleState, req: Request, pool: PoolInfo) -> float:
        raise NotImplementedError

    def normalize(self, scores: list[float]) -> list[float]:
        """NormalizeScore: map raw scores onto 0..100 (min-max), keeping their order."""
        lo, hi = min(scores), max(scores)
        if hi <= lo:
            return [100.0] * len(scores)
        return [(s - lo) * 100.0 / (hi - lo) for s in scores]


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, req: Request, pool: PoolInfo) -> Status:
        raise NotImplementedError

    def unreserve(self, state: CycleState, req: Request, pool: PoolInfo) -> None:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: CycleState, req: Request, pool: str) -> Status:
        raise NotImplementedError
