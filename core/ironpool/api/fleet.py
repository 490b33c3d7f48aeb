"""Names of fleet health and maintenance that poollets, the scheduler, the controller-manager and the
CLI share: the taints put on pools and the namespaces their heartbeat Leases live in.

As Kubernetes keeps one Lease per node in ``kube-node-lease``, each poollet renews one Lease per pool,
named after the pool. Machine pools and volume pools of one host usually share a name, so each kind
has its own namespace rather than one namespace with prefixed names: the Lease's name is then exactly
the pool's, as a node's Lease is named after the node.
"""

from __future__ import annotations

#: NoExecute taint the pool lifecycle controller puts on a pool whose heartbeat stopped
#: (Kubernetes: ``node.kubernetes.io/unreachable``).
UNREACHABLE_TAINT_KEY = "pool.ironpool.dev/unreachable"
#: NoSchedule taint of a cordoned pool (Kubernetes: ``node.kubernetes.io/unschedulable``).
UNSCHEDULABLE_TAINT_KEY = "pool.ironpool.dev/unschedulable"

MACHINE_POOL_LEASE_NAMESPACE = "ironpool-machinepool-lease"
VOLUME_POOL_LEASE_NAMESPACE = "ironpool-volumepool-lease"
LEASE_NAMESPACES = (MACHINE_POOL_LEASE_NAMESPACE, VOLUME_POOL_LEASE_NAMESPACE)


def lease_namespace(pool_kind: str) -> str:
    """The namespace of the heartbeat Leases of ``pool_kind`` (``MachinePool`` or ``VolumePool``)."""
    if pool_kind == "MachinePool":
        return MACHINE_POOL_LEASE_NAMESPACE
    if pool_kind == "VolumePool":
        return VOLUME_POOL_LEASE_NAMESPACE
    raise ValueError(f"no heartbeat Leases for {pool_kind!r}")
