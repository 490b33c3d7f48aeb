"""Running the scheduler as one of several replicas: only the holder of the scheduler Lease places
objects (:mod:`ironpool.client.leaderelection`). Each term has a fresh
:class:`~ironpool.scheduler.runner.SchedulerRunner`, which lists everything from the apiserver and
watches on while the replica campaigns, so a new leader resumes exactly where the store is. Binds
carry the resourceVersion they were decided on and a pool reference is set once, so a bind the old
leader left in flight can never be repeated on top.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ironpool.client.leaderelection import LeaderElectionConfig, LeaderElector
from ironpool.client.rest import AsyncClient
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.runner import SchedulerRunner

if TYPE_CHECKING:  # the exporter is loaded only by a scheduler that serves /metrics
    from ironpool.scheduler.metrics import SchedulerMetrics


async def run_elected(client: AsyncClient, config: SchedulerConfig | None, stop: asyncio.Event,
                      election: LeaderElectionConfig, metrics: SchedulerMetrics | None = None,
                      **options: Any) -> None:
    """Campaign for ``election``'s Lease until ``stop``; schedule while holding it.

    Each term's runner lists and watches while the replica campaigns (kube-scheduler starts its
    informers before it waits for the Lease): a new leader decides as soon as it holds the Lease
    instead of syncing first, and a lost term is followed by a fresh runner at once.
    """
    runner = _started(client, config, options)

    async def lead(lost: asyncio.Event) -> None:
        nonlocal runner
        current = runner
        if metrics is not None:
            metrics.term(current.stats)
        try:
            await current.run(lost)
        finally:
            if metrics is not None:
                metrics.term(None)
            if not stop.is_set():
                runner = _started(client, config, options)  # syncs while campaigning again

    on_change = metrics.elector_changed if metrics is not None else None
    try:
        await LeaderElector(client, election, on_change).run(lead, stop)
    finally:
        await runner.close()  # the runner of a term that never came (closing twice is harmless)


def _started(client: AsyncClient, config: SchedulerConfig | None, options: dict[str, Any]) -> SchedulerRunner:
    runner = SchedulerRunner(client, config, **options)
    runner.start()
    return runner
