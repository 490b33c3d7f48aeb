"""ironpool.scheduler: places Machines on MachinePools and Volumes on VolumePools.

kube-scheduler's structure (framework with extension points, scheduling queue, assume cache) over
IronCore's API, with shared-resource accounting (each class charged once against a pool's total
allocatable) and a per-class candidate index that keeps decisions O(log n) in the number of pools.
The HTTP-facing parts (runner, preview over a client) build on ``SchedulerCore``.
"""

from ironpool.scheduler.config import SchedulerConfig, load_config, parse_config
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.framework.profile import Decision
from ironpool.scheduler.queue import SchedulingQueue

__all__ = ["Decision", "SchedulerConfig", "SchedulerCore", "SchedulingQueue", "load_config", "parse_config"]
