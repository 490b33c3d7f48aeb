"""``ironpool controller-manager``: the fleet controllers (pool lifecycle: heartbeat Leases,
``Ready=Unknown``, the unreachable taint, evictions), one active replica at a time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from ironpool.cli.common import (
    cluster_signing_duration_option,
    fence_margin_option,
    log_level_option,
    run_until_signalled,
    setup_logging,
)
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import cli_errors


@click.command("controller-manager")
@connection_options(token=False, namespace=False)
@click.option("--pool-monitor-grace-period", default=40.0, show_default=True, type=click.FloatRange(0.5),
              help="Seconds a pool's Lease may go unrenewed before the pool is Ready=Unknown and "
                   "tainted unreachable (Kubernetes' --node-monitor-grace-period).")
@click.option("--pool-monitor-period", default=5.0, show_default=True, type=click.FloatRange(0.05),
              help="Seconds between looks at the pools' Leases.")
@click.option("--pool-eviction-rate", default=0.1, show_default=True, type=click.FloatRange(0.0001),
              help="Unreachable pools tainted NoExecute (their Machines evicted) per second "
                   "(Kubernetes' --node-eviction-rate).")
@click.option("--pool-eviction-burst", default=1, show_default=True, type=click.IntRange(1),
              help="Unreachable pools that may be tainted at once before the rate applies.")
@fence_margin_option
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Run as one of several replicas: only the holder of a coordination.k8s.io Lease acts.")
@click.option("--leader-elect-resource-name", default="ironpool-controller-manager", show_default=True)
@click.option("--leader-elect-resource-namespace", default="kube-system", show_default=True)
@click.option("--leader-elect-lease-duration", default=15.0, show_default=True, type=click.FloatRange(0.5))
@click.option("--leader-elect-renew-deadline", default=10.0, show_default=True, type=click.FloatRange(0.2))
@click.option("--leader-elect-retry-period", default=2.0, show_default=True, type=click.FloatRange(0.1))
@click.option("--cluster-signing-cert-file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="The CA certificate that signs approved pool client certificate requests "
                                 "(the apiservers' --client-ca-file; without it requests are approved only).")
@click.option("--cluster-signing-key-file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              default=None, help="The key of --cluster-signing-cert-file.")
@cluster_signing_duration_option
@log_level_option
def controller_manager(server: str | None, token_file: Path | None, pool_monitor_grace_period: float,
                       pool_monitor_period: float, pool_eviction_rate: float, pool_eviction_burst: int,
                       fence_margin: float, leader_elect: bool, leader_elect_resource_name: str,
                       leader_elect_resource_namespace: str,
                       leader_elect_lease_duration: float, leader_elect_renew_deadline: float,
                       leader_elect_retry_period: float, cluster_signing_cert_file: Path | None,
                       cluster_signing_key_file: Path | None, cluster_signing_duration: float,
                       log_level: str) -> None:
    """Watch every pool's heartbeat Lease and act on silent pools until stopped (SIGINT/SIGTERM).

    A pool whose Lease is not renewed for the grace period turns Ready=Unknown and gets the
    pool.ironpool.dev/unreachable:NoExecute taint; Machines on it that do not tolerate the taint are
    evicted and scheduled elsewhere; from a pool whose poollet fences itself (--fence-after), only
    once its fence time plus --fence-margin has passed. `ironpool up` runs one; on a fleet, run it
    beside the scheduler (several replicas elect one leader).

    It also approves the client certificate requests of hosts joining with a bootstrap token (and of
    pool identities renewing theirs) and, given --cluster-signing-cert-file and -key-file, signs them.
    """
    from ironpool.certificates.signer import CsrSigner, SignerError, SigningOptions
    from ironpool.client.leaderelection import LeaderElectionConfig
    from ironpool.client.rest import AsyncClient
    from ironpool.fleet.lifecycle import LifecycleOptions
    from ironpool.fleet.manager import run_controller_manager

    setup_logging(log_level)
    with cli_errors():
        cfg = client_config(server, token_file=token_file)
    if (cluster_signing_cert_file is None) != (cluster_signing_key_file is None):
        raise click.UsageError("--cluster-signing-cert-file and --cluster-signing-key-file go together")
    signer = None
    if cluster_signing_cert_file is not None and cluster_signing_key_file is not None:
        try:
            signer = CsrSigner.load(SigningOptions(cluster_signing_cert_file, cluster_signing_key_file,
                                                   cluster_signing_duration))
        except SignerError as exc:
            raise click.UsageError(str(exc)) from None
    options = LifecycleOptions(grace=pool_monitor_grace_period, monitor_period=pool_monitor_period,
                               eviction_rate=pool_eviction_rate, eviction_burst=pool_eviction_burst,
                               fence_margin=fence_margin)
    election = None
    if leader_elect:
        try:
            election = LeaderElectionConfig(leader_elect_resource_name, leader_elect_resource_namespace,
                                            lease_duration=leader_elect_lease_duration,
                                            renew_deadline=leader_elect_renew_deadline,
                                            retry_period=leader_elect_retry_period)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--leader-elect-*") from None

    async def main(stop: asyncio.Event) -> None:
        async with AsyncClient(cfg) as client:
            await run_controller_manager(client, options, stop, election, signer=signer)

    run_until_signalled(main)
