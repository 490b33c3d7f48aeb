"""Admission: plugins that may refuse (or complete) a write before it is stored, run as one chain.

As in Kubernetes, each write passes every plugin: :meth:`AdmissionPlugin.admit` before the object
is validated (may await, e.g. read the namespace), and :meth:`AdmissionPlugin.validate` on the
validated object right before the write. ``validate`` is synchronous: within one apiserver nothing
commits between it and the write. :meth:`AdmissionPlugin.guard` wraps the write itself: a decision
that must hold with several apiservers over one store (capacity) reads shared state there and
attaches guard keys that the store commits in the same transaction as the object, or refuses the
whole write (see :class:`ironpool.store.interface.Guard`). After the write, the registry tells its
observers (every plugin is one) what was committed; :class:`.mirror.StoreMirror` keeps a plugin's
in-memory view current with the writes of the other apiservers too.

The default chain is :func:`default_chain`: ``NamespaceLifecycle``, ``VolumeSnapshotSource`` (a
Volume restored from a snapshot is bound to the snapshot's pool, :mod:`.volume_snapshot_source`),
``VolumeResizePolicy`` (a Volume's size changes only as its class allows, :mod:`.volume_resize`),
``ExclusiveVolumeAttachment`` (a Volume's ``status.attachment`` is never taken from its holder,
:mod:`.volume_attachment`),
``CapacityAdmission``,
``IPAM`` (addresses, MACs and prefixes, :mod:`.ipam`), then ``ResourceQuota`` (a namespace's
Machines and Volumes within its quotas, :mod:`.resource_quota`; last, as in Kubernetes).
Authorization conditions on stored objects (:data:`ironpool.apiserver.auth.ObjectCheck`) are per
request, not plugins: the registry runs them before validation, as Kubernetes authorizes first.
"""

from __future__ import annotations

from ironpool.apiserver.admission.capacity import CapacityAdmission
from ironpool.apiserver.admission.ipam import IPAMAdmission
from ironpool.apiserver.admission.namespace_lifecycle import NamespaceLifecycle
from ironpool.apiserver.admission.plugin import AdmissionChain, AdmissionPlugin, Attributes, Operation
from ironpool.apiserver.admission.resource_quota import ResourceQuotaAdmission
from ironpool.apiserver.admission.volume_attachment import ExclusiveVolumeAttachment
from ironpool.apiserver.admission.volume_resize import VolumeResizePolicy
from ironpool.apiserver.admission.volume_snapshot_source import VolumeSnapshotSource
from ironpool.store.interface import Store

__all__ = ["AdmissionChain", "AdmissionPlugin", "Attributes", "Operation", "default_chain"]


def default_chain(store: Store) -> AdmissionChain:
    """The apiserver's chain: namespace lifecycle, a restored volume's pool, volume resize policy, a
    volume's one attachment, pool capacity, IP address management, then resource quotas."""
    return AdmissionChain([NamespaceLifecycle(store), VolumeSnapshotSource(store), VolumeResizePolicy(store),
                           ExclusiveVolumeAttachment(), CapacityAdmission(store), IPAMAdmission(store),
                           ResourceQuotaAdmission(store)])
