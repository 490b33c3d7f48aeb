"""The ClusterRole aggregation controller: an aggregated ClusterRole (one with an ``aggregationRule``)
carries the rules of the ClusterRoles its selectors pick, as Kubernetes' clusterrole-aggregation
controller keeps them (:mod:`ironpool.apiserver.auth.rbac.aggregation` computes them).

It runs inside every apiserver and hears of ClusterRole writes as a commit observer; writes through
another apiserver over the same store are found every :data:`RESYNC` seconds. Reconciling is
level-based (every ClusterRole read from the store, the aggregated ones whose rules differ patched),
so several apiservers write the same rules once, and a write it makes itself settles on the next look.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import resolve
from ironpool.apiserver.auth.rbac.aggregation import aggregated_rules
from ironpool.apiserver.controllers.reconcile_queue import ReconcileQueue
from ironpool.apiserver.registry.generic import Registry
from ironpool.store.interface import Document, StoreError

log = logging.getLogger("ironpool.apiserver.clusterrole-aggregation")

CLUSTER_ROLES = resolve("clusterroles")
RESYNC = 30.0  # seconds between looks for ClusterRoles written through other apiservers
_ALL = "clusterroles"  # the queue's one key: every look reconciles all aggregated roles


class ClusterRoleAggregationController:
    """Keeps the rules of aggregated ClusterRoles (see the module docstring)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.store = registry.store
        self._queue: ReconcileQueue[str] = ReconcileQueue(
            self.reconcile, name="ironpool-clusterrole-aggregation", log=log,
            describe=lambda _: "aggregated ClusterRoles", first=0.5, most=RESYNC)
        self._resync: asyncio.Task[None] | None = None
        registry.observers.append(self)

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        if info is CLUSTER_ROLES:
            self._queue.add(_ALL)

    async def resume(self) -> None:
        """Reconcile now and every :data:`RESYNC` seconds."""
        self._queue.add(_ALL)
        if self._resync is None:
            self._resync = asyncio.get_running_loop().create_task(self._resync_loop(),
                                                                  name="ironpool-clusterrole-aggregation-resync")

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(RESYNC)
            self._queue.add(_ALL)

    async def reconcile(self, _: str) -> None:
        """Patch every aggregated ClusterRole whose rules are not what its selectors pick."""
        try:
            listed = await self.store.list(CLUSTER_ROLES.prefix(None))
            roles = {r["metadata"]["name"]: r for r in listed.items}
        except StoreError:
            return  # the store is closed: the process is stopping
        for name, rules in aggregated_rules(roles).items():
            if (roles[name].get("rules") or []) == rules:
                continue
            # Changed meanwhile: that write is a commit, which queues another look.
            with contextlib.suppress(errors.NotFound, errors.Conflict):
                await self.registry.patch(CLUSTER_ROLES, None, name, {"rules": rules},
                                          manager="clusterrole-aggregation-controller")
