"""The rig fixture: one multi-host rig (:mod:`ironpool.rig`) per test module, removed afterwards.

Other fault tests reuse it: ``rig.hosts``, ``rig.stop_host(name)`` / ``rig.start_host(name)``,
``rig.apiservers``, ``rig.etcd``, ``rig.schedulers``, ``rig.restart(proc)``, ``rig.client()`` (both
apiservers, failover) and :func:`tests.rig.harness.admin_http` (httpx to one apiserver); a module
that needs other options makes its own fixture with :func:`tests.rig.harness.started_rig`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ironpool.rig.rig import Rig

from tests.rig.harness import started_rig


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    # The burst test's pools have no host to renew their heartbeat Leases: a grace period longer than
    # the module keeps the controller-manager from marking them unreachable under a slow machine.
    with started_rig(controller_manager_args=["--pool-monitor-grace-period", "600"]) as running:
        yield running
