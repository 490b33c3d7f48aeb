"""Plugin interfaces, and the status and state objects that flow between extension points.

The extension points are kube-scheduler's, in the order one object meets them:

* PreEnqueue — may the object be tried at all (a Volume waits for the Machine that uses it);
* PreFilter — per-object preparation; ``SKIP`` means the plugin's Filter has nothing to check;
* Filter — can this pool take the object; PreScore (``pre_score``, ``SKIP``) and Score rank the rest;
* Reserve / Unreserve — count the decision in the cache at once (and undo it if binding fails);
* PreBind, Bind, PostBind — the binding cycle, asynchronous, against the apiserver.

Every rejection is a :class:`Status` naming the plugin that returned it and the cluster events that
could change its verdict (see :mod:`ironpool.scheduler.framework.events`); each plugin declares all
of those in :meth:`Plugin.events_to_register` (kube's EnqueueExtensions).

What one plugin needs of another it declares (:attr:`Plugin.requires`); a profile that disables a
plugin another one needs is refused when it is built, naming both. What every plugin needs, the
resources the object takes (:attr:`CycleState.demand`), the framework computes itself.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.framework.events import ClusterEventWithHint
from ironpool.scheduler.model import PoolInfo, SchedulingRequest

if TYPE_CHECKING:
    from ironpool.client.rest import AsyncClient


class Code(enum.Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    ERROR = "Error"
    #: PreFilter: the plugin's Filter is not needed this cycle; PreScore: its Score is not;
    #: Bind: the plugin does not bind this object
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    """Outcome of a plugin call; ``reason`` is the per-pool phrase used in the summary message."""

    code: Code = Code.SUCCESS
    reason: str = ""
    #: the plugin that returned it (empty for the framework's own verdicts)
    plugin: str = ""
    #: the changes that could make this rejection go away
    wakeups: tuple[ClusterEventWithHint, ...] = ()
    #: the exception behind an ERROR (binding: NotFound, Conflict, ...)
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @classmethod
    def from_error(cls, plugin: str, exc: BaseException) -> Status:
        return cls(Code.ERROR, str(exc) or type(exc).__name__, plugin, error=exc)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(plugin: str, reason: str, *wakeups: ClusterEventWithHint) -> Status:
    return Status(Code.UNSCHEDULABLE, reason, plugin, wakeups)


@dataclass(slots=True)
class CycleState:
    """Per-object scratch space shared by the plugins of one scheduling and binding cycle."""

    cache: SchedulerCache
    #: resources the object takes (its class's capabilities, a Volume's storage), set by the
    #: framework before PreFilter: what Filter, Score and Reserve charge against a pool
    demand: dict[str, int] = field(default_factory=dict)
    #: per-plugin data, keyed by plugin name
    data: dict[str, Any] = field(default_factory=dict)
    #: set by PreFilter (kube's PreFilterResult.NodeNames): only these pools are considered
    pool_names: set[str] | None = None
    #: set by PreFilter: the object takes a Reservation's share, so a pool's free room does not limit it
    within_share: bool = False
    #: the object as the Bind plugin wrote it (its new resourceVersion, for the Scheduled condition)
    bound: dict[str, Any] | None = None


class Plugin:
    """Base of all plugins; ``name`` is what profiles refer to."""

    name: ClassVar[str] = ""
    #: the plugins this one needs in the same profile, each with why (for the refusal's message)
    requires: ClassVar[Mapping[str, str]] = {}

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        self.args = dict(args or {})

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """Every wake-up a Status of this plugin can carry (kube's ``EnqueueExtensions``)."""
        return ()


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, state: CycleState, req: SchedulingRequest) -> Status:
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        raise NotImplementedError


class FilterPlugin(Plugin):
    #: True when, for a request without tolerations, the verdict depends only on the pool and the
    #: class: the per-class candidate index then asks :meth:`class_filter` once per pool and class
    #: (and the fast path need not run this filter at all).
    index_covered: ClassVar[bool] = False
    #: True when the verdict depends on what is placed on the pool (not only its spec and status)
    reads_usage: ClassVar[bool] = False
    #: False when :meth:`class_filter` looks at the pool alone (not the class): the index then asks
    #: it once per pool for all classes
    reads_class: ClassVar[bool] = True

    def filter(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        raise NotImplementedError

    def class_filter(self, pool: PoolInfo, class_name: str, demand: dict[str, int]) -> Status | None:
        """The verdict for a plain request of ``class_name``; None when the pool passes."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    """Higher is better."""

    def __init__(self, args: dict[str, Any] | None = None, weight: int = 1) -> None:
        super().__init__(args)
        self.weight = weight

    def pre_score(self, state: CycleState, req: SchedulingRequest) -> Status:
        """PreScore: SKIP means this plugin has nothing to say about ``req``."""
        return SUCCESS

    def score(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> float:
        raise NotImplementedError

    def normalize(self, scores: list[float]) -> list[float]:
        """NormalizeScore: map raw scores onto 0..100 (min-max), keeping their order."""
        lo, hi = min(scores), max(scores)
        if hi <= lo:
            return [100.0] * len(scores)
        return [(s - lo) * 100.0 / (hi - lo) for s in scores]


class ClassStaticScorePlugin(ScorePlugin):
    """A scorer whose score depends only on the pool's state and the class's demand (a profile's
    scoring strategy: LeastAllocated, MostAllocated), so a per-class index sorted by
    :meth:`static_score` finds the best pool for a plain request without scoring every pool."""

    def static_score(self, pool: PoolInfo, demand: dict[str, int]) -> float:
        """The score of placing an object demanding ``demand`` on ``pool``."""
        raise NotImplementedError

    def score(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> float:
        return self.static_score(pool, state.demand)


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> Status:
        raise NotImplementedError

    def unreserve(self, state: CycleState, req: SchedulingRequest, pool: PoolInfo) -> None:
        """Undo :meth:`reserve`; must be safe to call when reserve did nothing."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    async def pre_bind(self, client: AsyncClient, state: CycleState, req: SchedulingRequest,
                       pool: str) -> Status:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, client: AsyncClient, state: CycleState, req: SchedulingRequest,
                   pool: str) -> Status:
        """Write the binding; SKIP leaves the object to the next Bind plugin."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, req: SchedulingRequest, pool: str) -> None:
        raise NotImplementedError
