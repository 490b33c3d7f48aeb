"""Names of fleet health and maintenance that poollets, the scheduler, the controller-manager and the
CLI share: the taints put on pools and the namespaces their heartbeat Leases live in.

As Kubernetes keeps one Lease per node in ``kube-node-lease``, each poollet renews one Lease per pool,
named after the pool. Machine pools and volume pools of one host usually share a name, so each kind
has its own namespace rather than one namespace with prefixed names: the Lease's name is then exactly
the pool's, as a node's Lease is named after the node.
"""

from __future__ import annotations

from collections.abc import Iterable

from ironpool.api.meta import Taint, Toleration, toleration_tolerates

#: NoExecute taint the pool lifecycle controller puts on a pool whose heartbeat stopped
#: (Kubernetes: ``node.kubernetes.io/unreachable``).
UNREACHABLE_TAINT_KEY = "pool.ironpool.dev/unreachable"
#: NoSchedule taint of a cordoned pool (Kubernetes: ``node.kubernetes.io/unschedulable``).
UNSCHEDULABLE_TAINT_KEY = "pool.ironpool.dev/unschedulable"

MACHINE_POOL_LEASE_NAMESPACE = "ironpool-machinepool-lease"
VOLUME_POOL_LEASE_NAMESPACE = "ironpool-volumepool-lease"
LEASE_NAMESPACES = (MACHINE_POOL_LEASE_NAMESPACE, VOLUME_POOL_LEASE_NAMESPACE)

#: The pool identities, as IronCore's poollets authenticate: user ``<prefix><pool>`` in the pools
#: group (the apiserver's pool authorizer narrows them; the CSR approver signs exactly these names).
MACHINE_POOL_USER_PREFIX = "compute.ironcore.dev:system:machinepool:"
MACHINE_POOLS_GROUP = "compute.ironcore.dev:system:machinepools"
VOLUME_POOL_USER_PREFIX = "storage.ironcore.dev:system:volumepool:"
VOLUME_POOLS_GROUP = "storage.ironcore.dev:system:volumepools"


def lease_namespace(pool_kind: str) -> str:
    """The namespace of the heartbeat Leases of ``pool_kind`` (``MachinePool`` or ``VolumePool``)."""
    if pool_kind == "MachinePool":
        return MACHINE_POOL_LEASE_NAMESPACE
    if pool_kind == "VolumePool":
        return VOLUME_POOL_LEASE_NAMESPACE
    raise ValueError(f"no heartbeat Leases for {pool_kind!r}")


#: Lease annotation by which a machinepoollet publishes its ``--fence-after`` (seconds): after that long
#: without renewing the Lease it shuts off its Machines' domains, so the pool lifecycle controller waits
#: that long plus its ``--fence-margin`` before evicting them. A Lease without it: the poollet does not
#: fence itself.
FENCE_AFTER_ANNOTATION = "pool.ironpool.dev/fence-after-seconds"
#: Lease annotation the pool lifecycle controller sets (with a write conditioned on the Lease's
#: resourceVersion it saw go stale) when it takes a silent pool's Machines over: from then on it moves
#: them, and the poollet keeps their domains off until it removes the annotation again.
FENCED_ANNOTATION = "pool.ironpool.dev/fenced-at"


def tolerates_unreachable_forever(tolerations: Iterable[Toleration] | None) -> bool:
    """Whether ``tolerations`` (a Machine's ``spec.tolerations``) opt out of fencing and eviction: one
    matches the unreachable ``NoExecute`` taint without ``tolerationSeconds``."""
    taint = Taint(key=UNREACHABLE_TAINT_KEY, effect="NoExecute")
    return any(toleration_tolerates(t, taint) and t.toleration_seconds is None for t in tolerations or ())
