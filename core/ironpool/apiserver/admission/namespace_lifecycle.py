"""Kubernetes' ``NamespaceLifecycle`` admission: content only in live namespaces, and the system
namespaces stay.

A namespaced object may be created only in a namespace that exists and is not terminating
(``default`` counts as existing even before the apiserver's start-up has made its object, as have
the pools' lease namespaces). ``default`` and
``kube-system`` cannot be deleted; ``kube-system``'s uid is the cluster uid.
"""

from __future__ import annotations

from typing import ClassVar

from ironpool.api import errors
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes
from ironpool.apiserver.namespaces import IMPLICIT_NAMESPACES, NAMESPACES, UNDELETABLE_NAMESPACES
from ironpool.store.interface import Store


class NamespaceLifecycle(AdmissionPlugin):
    """Refuses creates in missing or terminating namespaces and deletes of system namespaces."""

    name: ClassVar[str] = "NamespaceLifecycle"

    def __init__(self, store: Store) -> None:
        self.store = store

    async def admit(self, attrs: Attributes) -> None:
        op, info = attrs.operation, attrs.info
        if op == "CREATE" and info.namespaced and attrs.namespace not in IMPLICIT_NAMESPACES:
            await self._live(attrs.namespace or "")
        elif op == "DELETE" and info is NAMESPACES and attrs.name in UNDELETABLE_NAMESPACES:
            raise errors.Forbidden(
                f'namespace "{attrs.name}" may not be deleted', kind="namespaces", name=attrs.name
            )

    async def _live(self, namespace: str) -> None:
        ns = await self.store.get(NAMESPACES.key(None, namespace))
        if ns is None:
            raise errors.NotFound(f'namespaces "{namespace}" not found', kind="namespaces", name=namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.Forbidden(
                f"unable to create new content in namespace {namespace} because it is being terminated",
                kind="namespaces",
                name=namespace,
            )
