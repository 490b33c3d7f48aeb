"""Running the scheduler as one of several replicas: only the holder of the scheduler Lease places
objects (:mod:`ironpool.client.leaderelection`); a replica that becomes the leader starts a fresh
:class:`~ironpool.scheduler.runner.SchedulerRunner`, which lists everything from the apiserver, so it
resumes exactly where the store is. Binds carry the resourceVersion they were decided on and a pool
reference is set once, so a bind the old leader left in flight can never be repeated on top.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ironpool.client.leaderelection import LeaderElectionConfig, LeaderElector
from ironpool.client.rest import AsyncClient
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.metrics import SchedulerMetrics
from ironpool.scheduler.runner import SchedulerRunner


async def run_elected(client: AsyncClient, config: SchedulerConfig | None, stop: asyncio.Event,
                      election: LeaderElectionConfig, metrics: SchedulerMetrics | None = None,
                      **options: Any) -> None:
    """Campaign for ``election``'s Lease until ``stop``; schedule while holding it."""

    async def lead(lost: asyncio.Event) -> None:
        runner = SchedulerRunner(client, config, **options)
        if metrics is not None:
            metrics.term(runner.stats)
        try:
            await runner.run(lost)
        finally:
            if metrics is not None:
                metrics.term(None)

    on_change = metrics.elector_changed if metrics is not None else None
    await LeaderElector(client, election, on_change).run(lead, stop)
