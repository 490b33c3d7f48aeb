"""Wiring of the scheduler: options in, placements until stopped.

Used by ``ironpool scheduler`` and by ``ironpool up``: ``await run(client, options, stop, ready)``.
Alone (no ``election``) it schedules at once; elected, it campaigns for the scheduler Lease and
schedules while it holds it (:mod:`.leading`). Either way the process's garbage collector is tuned
for the long-lived cache (:mod:`ironpool.gc_tuning`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ironpool.client.leaderelection import LeaderElectionConfig
from ironpool.client.rest import AsyncClient
from ironpool.gc_tuning import collect_less
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.leading import run_elected
from ironpool.scheduler.runner import run_scheduler

LEASE_NAME = "ironpool-scheduler"


@dataclass(frozen=True)
class SchedulerOptions:
    """Everything ``ironpool scheduler`` takes besides the apiserver connection."""

    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    bind_concurrency: int = 64
    election: LeaderElectionConfig | None = None  # None: the only scheduler, no Lease
    metrics_listen: tuple[str, int] | None = None  # serve Prometheus /metrics there


async def run(client: AsyncClient, options: SchedulerOptions, stop: asyncio.Event,
              ready: asyncio.Event | None = None) -> None:
    """Schedule until ``stop`` is set; ``ready`` is set once the cache is synced and decisions run."""
    collect_less()  # the runner freezes the synced cache
    metrics = http = None
    if options.metrics_listen is not None:  # only a scheduler that serves /metrics pays for the exporter
        from ironpool.scheduler.metrics import SchedulerMetrics

        election = options.election
        metrics = SchedulerMetrics(election.name if election else LEASE_NAME,
                                   election.identity if election else "")
        http = metrics.serve(*options.metrics_listen)
    try:
        if options.election is not None:
            await run_elected(client, options.config, stop, options.election, metrics,
                              bind_concurrency=options.bind_concurrency, ready=ready)
        else:
            await run_scheduler(client, options.config, stop, bind_concurrency=options.bind_concurrency,
                                ready=ready)
    finally:
        if http is not None:
            http.shutdown()
