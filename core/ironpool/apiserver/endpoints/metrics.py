"""Prometheus metrics of the apiserver: requests by verb/resource/code, latencies, watchers, revision."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from ironpool.store.interface import Store


class Metrics:
    """One app's metrics in their own registry (several apps may live in one process, e.g. tests)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ironpool_apiserver_requests",
            "API requests by verb, resource and HTTP code",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ironpool_apiserver_request_duration_seconds",
            "API request latency (watches: time to start)",
            ["verb", "resource"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
        self.watchers = Gauge("ironpool_apiserver_watchers", "Open watch streams", registry=self.registry)
        self.revision = Gauge(
            "ironpool_store_revision", "The store's current revision", registry=self.registry
        )
        # Children are cached: labels() costs a lock and a dict lookup on every request otherwise.
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe(self, verb: str, resource: str, code: int, seconds: float) -> None:
        key = (verb, resource, code)
        children = self._children.get(key)
        if children is None:
            children = (self.requests.labels(verb, resource, str(code)), self.latency.labels(verb, resource))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    async def render(self) -> tuple[bytes, str]:
        self.revision.set(await self.store.current_revision())
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
