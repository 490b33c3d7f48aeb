"""Namespaces as the apiserver treats them: the resource, the namespace that exists without an
object, and the ones that can never be deleted."""

from __future__ import annotations

from ironpool.api.fleet import LEASE_NAMESPACES
from ironpool.api.resources import by_path

NAMESPACES = by_path("", "v1", "namespaces")
#: Namespaces that exist without an object (Kubernetes creates ``default`` and ``kube-node-lease`` at
#: start-up): the pools' heartbeat Leases live in theirs from a poollet's first renewal on.
IMPLICIT_NAMESPACES = frozenset({"default", *LEASE_NAMESPACES})
#: Kubernetes' NamespaceLifecycle admission refuses to delete these; kube-system's uid is the cluster uid.
UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", *LEASE_NAMESPACES})
