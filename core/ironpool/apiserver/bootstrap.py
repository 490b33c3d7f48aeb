"""The objects every installation has from its first request on: the ``kube-system`` namespace.

Its ``metadata.uid`` is the installation's identity (the cluster uid), as in Kubernetes, where tools
that need a stable cluster id read the uid of ``kube-system``. It is made once, with the database, and
cannot be deleted, so a restart keeps it and a fresh or lost database gets a new one. The poollets
label every runtime object they create with it and collect only objects carrying their own.
"""

from __future__ import annotations

import asyncio
import contextlib

from ironpool.api import errors
from ironpool.apiserver.namespaces import NAMESPACES
from ironpool.apiserver.registry import Registry

SYSTEM_NAMESPACE = "kube-system"


class Bootstrap:
    """Creates the system namespace once per process, before the first API request is served."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.done = False
        self._lock = asyncio.Lock()

    async def ensure(self) -> None:
        if self.done:
            return
        async with self._lock:
            if self.done:
                return
            body = {"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": SYSTEM_NAMESPACE,
                                 "labels": {"kubernetes.io/metadata.name": SYSTEM_NAMESPACE}}}
            # Made by an earlier start (or by another apiserver on the same store): that one stays.
            with contextlib.suppress(errors.AlreadyExists):
                await self.registry.create(NAMESPACES, None, body)
            self.done = True
