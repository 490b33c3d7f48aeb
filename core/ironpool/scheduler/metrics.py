"""The scheduler's ``/metrics`` (Prometheus): who leads, and what this scheduler has done.

* ``leader_election_master_status{name}`` is 1 while this process leads (client-go's metric, which
  kube-scheduler exports), 0 while it stands by;
* ``ironpool_scheduler_leader{name,holder}`` is 1 for the identity this process last saw holding the
  Lease (every replica tells who leads, the standbys too); ``ironpool_scheduler_identity`` names
  this process and ``ironpool_scheduler_leader_transitions`` counts hand-overs of the Lease;
* ``ironpool_scheduler_{decisions,bound,unschedulable,conflicts,errors}_total`` count the work of
  the terms this process led.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ironpool.client.leaderelection import LeaderElector
from ironpool.scheduler.binding import RunnerStats

_STATS = ("decisions", "bound", "unschedulable", "conflicts", "errors")


class _Work(Collector):
    """The runner counters, summed over the terms this process led, read at scrape time."""

    def __init__(self) -> None:
        self.done = RunnerStats()
        self.current: RunnerStats | None = None

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name in _STATS:
            total = getattr(self.done, name) + (getattr(self.current, name) if self.current else 0)
            family = CounterMetricFamily(f"ironpool_scheduler_{name}", f"Scheduler {name}, all terms")
            family.add_metric([], total)
            yield family


class SchedulerMetrics:
    """One scheduler process's metrics in their own registry."""

    def __init__(self, lease_name: str, identity: str) -> None:
        self.lease_name = lease_name
        self.registry = CollectorRegistry()
        self.master = Gauge("leader_election_master_status", "1 while this process leads",
                            ["name"], registry=self.registry)
        self.leader = Gauge("ironpool_scheduler_leader", "1 for the holder of the scheduler Lease",
                            ["name", "holder"], registry=self.registry)
        self.identity = Gauge("ironpool_scheduler_identity", "this process's leader election identity",
                              ["identity"], registry=self.registry)
        self.transitions = Gauge("ironpool_scheduler_leader_transitions", "hand-overs of the Lease",
                                 ["name"], registry=self.registry)
        self.identity.labels(identity).set(1)
        self.master.labels(lease_name).set(0)
        self._work = _Work()
        self.registry.register(self._work)
        self._lock = threading.Lock()  # the HTTP thread reads while the loop writes

    def elector_changed(self, elector: LeaderElector) -> None:
        with self._lock:
            self.master.labels(self.lease_name).set(1 if elector.leading else 0)
            self.leader.clear()
            if elector.holder:
                self.leader.labels(self.lease_name, elector.holder).set(1)
            self.transitions.labels(self.lease_name).set(elector.transitions)

    def term(self, stats: RunnerStats | None) -> None:
        """A leadership term starts with ``stats`` or (None) ends."""
        with self._lock:
            if self._work.current is not None:
                for name in _STATS:
                    setattr(self._work.done, name, getattr(self._work.done, name) +
                            getattr(self._work.current, name))
            self._work.current = stats

    def serve(self, host: str, port: int) -> Any:
        """Serve ``/metrics`` on ``host:port`` from a thread; the server (``shutdown()`` stops it)."""
        server, _thread = start_http_server(port, host, registry=self.registry)
        return server
