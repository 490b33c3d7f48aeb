"""The scheduling framework, shaped like kube-scheduler's: extension points (PreEnqueue, PreFilter,
Filter, PreScore, Score, NormalizeScore, Reserve, PreBind, Bind, PostBind), statuses that name the
rejecting plugin and the cluster events that can undo the rejection, and the per-profile
:class:`~ironpool.scheduler.framework.profile.Framework` that runs the plugins."""

from ironpool.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from ironpool.scheduler.framework.interface import (
    BindPlugin,
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
)

__all__ = ["ActionType", "BindPlugin", "ClusterEvent", "ClusterEventWithHint", "Code", "CycleState",
           "EventResource", "FilterPlugin", "Plugin", "PostBindPlugin", "PreBindPlugin", "PreEnqueuePlugin",
           "PreFilterPlugin", "ReservePlugin", "ScorePlugin", "Status"]
