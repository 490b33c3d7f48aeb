"""The built-in plugins, one module each, and the registry profiles refer to by name."""

from __future__ import annotations

from ironpool.scheduler.framework.interface import ClassStaticScorePlugin, Plugin
from ironpool.scheduler.plugins.class_available import ClassAvailable
from ironpool.scheduler.plugins.default_binder import DefaultBinder
from ironpool.scheduler.plugins.least_allocated import LeastAllocated
from ironpool.scheduler.plugins.most_allocated import MostAllocated
from ironpool.scheduler.plugins.pool_ready import PoolReady
from ironpool.scheduler.plugins.pool_selector import PoolSelector
from ironpool.scheduler.plugins.reservation_fit import ReservationFit
from ironpool.scheduler.plugins.resources_fit import ResourcesFit
from ironpool.scheduler.plugins.taint_toleration import TaintToleration
from ironpool.scheduler.plugins.topology_spread import TopologySpread
from ironpool.scheduler.plugins.volume_binding import VolumeBinding
from ironpool.scheduler.plugins.volume_locality import VolumeLocality

REGISTRY: dict[str, type[Plugin]] = {
    cls.name: cls
    for cls in (PoolReady, TaintToleration, PoolSelector, ClassAvailable, ReservationFit, ResourcesFit,
                VolumeLocality, VolumeBinding, TopologySpread, LeastAllocated, MostAllocated, DefaultBinder)
}

#: plugins every profile runs, in filter order (a profile may disable some)
DEFAULT_PLUGINS: tuple[str, ...] = ("PoolReady", "TaintToleration", "PoolSelector", "ClassAvailable",
                                    "ReservationFit", "ResourcesFit", "VolumeLocality", "VolumeBinding",
                                    "TopologySpread")
#: what a profile's ``strategy`` may name: the class-static scorers
SCORING_STRATEGIES: tuple[str, ...] = tuple(
    name for name, cls in REGISTRY.items() if issubclass(cls, ClassStaticScorePlugin)
)
#: the Bind plugin every profile ends with (there is no other way to bind)
BINDER = "DefaultBinder"

__all__ = ["BINDER", "DEFAULT_PLUGINS", "REGISTRY", "SCORING_STRATEGIES"]
