"""Every kind ironpool serves, as one strategy object each (see :mod:`ironpool.api.strategy`).

:data:`STRATEGIES` is the registration: the apiserver serves these kinds, the OpenAPI document and
discovery list them, clients and the CLI resolve names against them, in this order.

Adding a kind, given its pydantic model (``Network`` in ``api/networking.py``, say), is one module
and one line::

    # api/strategies/network.py
    class NetworkStrategy(Strategy[Network]):
        \"\"\"Networks: ...\"\"\"

        info = ResourceInfo("networking.ironcore.dev", "v1alpha1", "Network", "networks", "network",
                            ("net",), True, Network, True)
        columns = (NAME, Column("HANDLE", field("spec.providerID")), AGE)

        def validate(self, obj: Network, errs: FieldErrors) -> None:
            ...  # the kind's own rules, reported with field paths

    # here
    STRATEGIES = (..., NetworkStrategy())

Everything a kind does not override is the common behaviour: decoding, metadata checks, the status
subresource, generations, finalizers, list/watch/patch, and the default ``NAME``/``AGE`` columns.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.strategies.classes import MachineClassStrategy, VolumeClassStrategy
from ironpool.api.strategies.csr import CertificateSigningRequestStrategy
from ironpool.api.strategies.event import EventStrategy
from ironpool.api.strategies.lease import LeaseStrategy
from ironpool.api.strategies.machine import MachineStrategy
from ironpool.api.strategies.namespace import NamespaceStrategy
from ironpool.api.strategies.network import NetworkStrategy
from ironpool.api.strategies.networkinterface import NetworkInterfaceStrategy
from ironpool.api.strategies.pools import MachinePoolStrategy, VolumePoolStrategy
from ironpool.api.strategies.prefix import PrefixStrategy
from ironpool.api.strategies.rbac import (
    ClusterRoleBindingStrategy,
    ClusterRoleStrategy,
    RoleBindingStrategy,
    RoleStrategy,
)
from ironpool.api.strategies.reservation import ReservationStrategy
from ironpool.api.strategies.resourcequota import ResourceQuotaStrategy
from ironpool.api.strategies.secret import SecretStrategy
from ironpool.api.strategies.volume import VolumeStrategy
from ironpool.api.strategies.volumesnapshot import VolumeSnapshotStrategy
from ironpool.api.strategy import Strategy

STRATEGIES: tuple[Strategy[Any], ...] = (
    MachineClassStrategy(),
    MachinePoolStrategy(),
    MachineStrategy(),
    ReservationStrategy(),
    VolumeClassStrategy(),
    VolumePoolStrategy(),
    VolumeStrategy(),
    VolumeSnapshotStrategy(),
    ResourceQuotaStrategy(),
    NetworkStrategy(),
    NetworkInterfaceStrategy(),
    PrefixStrategy(),
    SecretStrategy(),
    NamespaceStrategy(),
    EventStrategy(),
    LeaseStrategy(),
    RoleStrategy(), ClusterRoleStrategy(), RoleBindingStrategy(), ClusterRoleBindingStrategy(),
    CertificateSigningRequestStrategy(),
)
