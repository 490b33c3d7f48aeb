"""Whose is a runtime object? This installation's poollet of this pool, an older one of it, or a stranger.

Several installations may share one libvirtd (a test run beside the demo, two users, a fresh try), and
their pools may carry the same name (each defaults to the hostname). A poollet therefore stamps every
IRI object it creates with its pool *and* its installation's cluster uid (the uid of the
``kube-system`` namespace, made with the database), and treats anything else as not its own:

- ``OURS``: both labels match; the object may be garbage-collected once its API object is gone;
- ``LEGACY``: our pool label but no cluster label (made before ownership labels existed); it is adopted
  by the reconciler when an API object with its uid exists, and never collected;
- ``FOREIGN``: another installation's or another pool's; reported, never touched.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ironpool.api.core import Namespace
from ironpool.client.rest import AsyncClient

SYSTEM_NAMESPACE = "kube-system"


class Owner(enum.Enum):
    """The answer of :meth:`Ownership.classify`."""

    OURS = "ours"
    LEGACY = "legacy"
    FOREIGN = "foreign"


@dataclass(frozen=True)
class Ownership:
    """The labels that mark a runtime object as made by one pool's poollet of one installation."""

    pool_label: str
    cluster_label: str
    pool: str
    cluster_uid: str

    def labels(self) -> dict[str, str]:
        """What to put on every runtime object this poollet creates."""
        return {self.pool_label: self.pool, self.cluster_label: self.cluster_uid}

    def classify(self, labels: Mapping[str, str]) -> Owner:
        if labels.get(self.pool_label) != self.pool:
            return Owner.FOREIGN
        cluster = labels.get(self.cluster_label)
        if cluster is None:
            return Owner.LEGACY
        return Owner.OURS if cluster == self.cluster_uid else Owner.FOREIGN


async def cluster_uid(client: AsyncClient) -> str:
    """This installation's identity: the uid of its ``kube-system`` namespace."""
    ns = await client.get(Namespace, SYSTEM_NAMESPACE)
    if not ns.metadata.uid:
        raise RuntimeError(f"namespace {SYSTEM_NAMESPACE} has no uid")
    return ns.metadata.uid
