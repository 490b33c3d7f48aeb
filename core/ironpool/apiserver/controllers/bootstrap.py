"""The objects every installation has from its first request on: the ``kube-system`` and ``default``
namespaces (as Kubernetes makes them at start-up) and the default RBAC policy
(:mod:`ironpool.apiserver.auth.rbac.defaults`); and the authorizer's indexes, started once those
exist.

``kube-system``'s ``metadata.uid`` is the installation's identity (the cluster uid), as in Kubernetes,
where tools that need a stable cluster id read the uid of ``kube-system``. It is made once, with the
database, and cannot be deleted, so a restart keeps it and a fresh or lost database gets a new one.
The poollets label every runtime object they create with it and collect only objects carrying their
own. Default ClusterRoles and bindings that are missing are made again at each start; one still
annotated ``autoupdate: "true"`` gets its rules (an aggregated role its aggregationRule, a binding its
subjects) back.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import orjson

from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.auth.rbac.defaults import AUTOUPDATE, CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES
from ironpool.apiserver.namespaces import NAMESPACES
from ironpool.apiserver.registry.generic import Registry

SYSTEM_NAMESPACE = "kube-system"
DEFAULT_NAMESPACE = "default"


class Startable(Protocol):
    async def start(self) -> None: ...


class Bootstrap:
    """Creates the system namespace and the default policy once per process, before the first API
    request is served, then starts ``then`` (the authorizer's indexes)."""

    def __init__(self, registry: Registry, then: Startable | None = None) -> None:
        self.registry = registry
        self.then = then
        self.done = False
        self._lock = asyncio.Lock()

    async def ensure(self) -> None:
        if self.done:
            return
        async with self._lock:
            if self.done:
                return
            for name in (SYSTEM_NAMESPACE, DEFAULT_NAMESPACE):
                body = {"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}
                # Made by an earlier start (or by another apiserver on the same store): that one stays.
                with contextlib.suppress(errors.AlreadyExists):
                    await self.registry.create(NAMESPACES, None, body)
            for obj in (*CLUSTER_ROLES, *CLUSTER_ROLE_BINDINGS):
                await self._reconcile(obj)
            if self.then is not None:
                await self.then.start()
            self.done = True

    async def _reconcile(self, obj: dict[str, Any]) -> None:
        info = resolve(obj["kind"])
        name = obj["metadata"]["name"]
        # An aggregated role's rules are the aggregation controller's to keep: its rule is put back.
        fields = ("subjects",) if obj["kind"] != "ClusterRole" else (
            ("aggregationRule",) if "aggregationRule" in obj else ("rules",))
        try:
            await self.registry.create(info, None, obj)
            return
        except errors.AlreadyExists:
            pass
        try:
            current = orjson.loads(await self.registry.get_raw(info, None, name))
        except errors.NotFound:
            return  # deleted in between: the next start makes it again
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        if annotations.get(AUTOUPDATE) != "true" or all(current.get(f) == obj[f] for f in fields):
            return
        with contextlib.suppress(errors.NotFound, errors.Conflict):  # another apiserver was quicker
            await self.registry.patch(info, None, name, {f: obj[f] for f in fields})
