"""The scheduling framework: extension points (PreFilter, Filter, Score, NormalizeScore, Reserve,
Bind) as in kube-scheduler, and the runtime that drives a profile's plugins over the cache."""

from ironpool.scheduler.framework.interface import (
    BindPlugin,
    Code,
    CycleState,
    FilterPlugin,
    Plugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
)

__all__ = ["BindPlugin", "Code", "CycleState", "FilterPlugin", "Plugin", "PreFilterPlugin",
           "ReservePlugin", "ScorePlugin", "Status"]
