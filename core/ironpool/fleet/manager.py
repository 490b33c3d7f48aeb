"""``ironpool controller-manager``: the fleet controllers, active in one replica at a time.

Like kube-controller-manager, every replica campaigns for one Lease (``kube-system/
ironpool-controller-manager``) through :mod:`ironpool.client.leaderelection`; the holder runs a
fresh :class:`~ironpool.fleet.lifecycle.PoolLifecycleController`, which lists everything again, so a
standby that takes over resumes from what the store holds. Its Lease-age clocks start over, so a new
leader gives every pool a whole grace period before it calls it unreachable. Beside it runs the
certificate controller (:mod:`ironpool.certificates.controller`): it approves the pool client
certificate requests of joining hosts and, given the signing CA, signs them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ironpool.certificates.controller import CertificateController
from ironpool.certificates.signer import CsrSigner
from ironpool.client.leaderelection import LeaderElectionConfig, LeaderElector
from ironpool.client.rest import AsyncClient
from ironpool.fleet.lifecycle import LifecycleOptions, PoolLifecycleController

ELECTION_NAME = "ironpool-controller-manager"


async def run_controller_manager(client: AsyncClient, options: LifecycleOptions, stop: asyncio.Event,
                                 election: LeaderElectionConfig | None = None,
                                 on_change: Callable[[LeaderElector], None] | None = None,
                                 signer: CsrSigner | None = None) -> None:
    """Run the fleet controllers until ``stop``; with ``election``, only while holding its Lease.
    ``signer``: the CA that signs approved pool client certificates (None: they are approved only)."""

    async def lead(lost: asyncio.Event) -> None:
        await asyncio.gather(PoolLifecycleController(client, options).run(lost),
                             CertificateController(client, signer).run(lost))

    if election is None:
        await lead(stop)
        return

    await LeaderElector(client, election, on_change).run(lead, stop)
