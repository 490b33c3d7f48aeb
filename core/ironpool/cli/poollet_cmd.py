"""``ironpool machinepoollet`` and ``ironpool volumepoollet``: one pool of one host, as a process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ironpool.cli.common import (
    allocation_options,
    collect_options,
    fence_after_option,
    gc_options,
    log_level_option,
    quantity_option,
    run_until_signalled,
    setup_logging,
)
from ironpool.cli.connection import client_config, connection_options, read_token
from ironpool.cli.errors import cli_errors

if TYPE_CHECKING:
    from ironpool.iri.endpoint import RuntimeKind


def _addresses(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    allowed = ("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")
    out = []
    for v in values:
        kind, sep, addr = v.partition("=")
        if not sep or kind not in allowed or not addr:
            raise click.BadParameter(f"{v!r} must be TYPE=ADDRESS with TYPE one of {', '.join(allowed)}",
                                     param_hint="--address")
        out.append((kind, addr))
    return tuple(out)


def _endpoint(kind: RuntimeKind, iri_endpoint: str | None) -> str:
    from ironpool.iri.endpoint import EndpointError, resolve_endpoint

    try:
        return resolve_endpoint(kind, iri_endpoint, timeout=20.0)
    except EndpointError as exc:
        raise click.BadParameter(str(exc), param_hint="--iri") from exc


def _run_poollet(server: str | None, token_file: Path | None, connect: Callable[[], Any],
                 run: Callable[[Any, Any, asyncio.Event], Awaitable[None]]) -> None:
    """Run ``run(client, runtime, stop)`` until signalled, closing the runtime and client after."""
    from ironpool.client.rest import AsyncClient

    with cli_errors():
        config = client_config(server, token_file=token_file)
    client = AsyncClient(config)

    async def main(stop: asyncio.Event) -> None:
        runtime = connect()
        try:
            await run(client, runtime, stop)
        finally:
            await runtime.close()
            await client.aclose()

    run_until_signalled(main)


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--pool", required=True, help="Name of the pool this poollet announces."),
        click.option("--provider-id", required=True, help="spec.providerID of the pool."),
        click.option("--iri", "iri_endpoint", default=None,
                     help="IRI runtime endpoint: unix:///path, tcp://host:port or ssh://user@host/path "
                          "(default: IRI_*_RUNTIME_ENDPOINT, then the well-known sockets)."),
        connection_options(token=False, namespace=False),
        click.option("--region", default=None, help="Value of the topology.ironcore.dev/region label."),
        click.option("--zone", default=None, help="Value of the topology.ironcore.dev/zone label."),
        click.option("--workers", default=4, show_default=True, type=click.IntRange(1, 64)),
        click.option("--heartbeat-interval", default=10.0, show_default=True, type=click.FloatRange(0.1),
                     help="Seconds between renewals of the pool's Lease (and runtime probes)."),
        click.option("--lease-duration", default=40.0, show_default=True, type=click.FloatRange(1),
                     help="leaseDurationSeconds written into the pool's Lease."),
        click.option("--relist-period", default=5.0, show_default=True, type=click.FloatRange(0.05),
                     help="Seconds between runtime relists (state changes, garbage collection)."),
        gc_options,
        log_level_option,
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _check_fence_after(fence_after: float, heartbeat_interval: float) -> None:
    from ironpool.poollet.fencing import check_fence_after

    try:
        check_fence_after(fence_after, heartbeat_interval)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--fence-after") from None


def _console_options(address: str | None, token_file: Path | None) -> dict[str, Any]:
    """``exec_address`` and ``exec_token`` of the flags; both or neither."""
    if (address is None) != (token_file is None):
        raise click.UsageError("--exec-address and --exec-token-file go together")
    if address is None or token_file is None:
        return {}
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{address!r}: expected HOST:PORT", param_hint="--exec-address")
    return {"exec_address": (host.strip("[]") or "0.0.0.0", int(port)), "exec_token": read_token(token_file)}


@click.command("machinepoollet")
@_common
@click.option("--address", "addresses", multiple=True, help="Pool address TYPE=ADDRESS (repeatable).")
@click.option("--capacity-cpu", default=None, help="Host cores (default: this host's).")
@click.option("--capacity-memory", default=None, help="Host memory, e.g. 16Gi (default: this host's).")
@click.option("--exec-address", default=None, metavar="HOST:PORT",
              help="serve the console endpoint the apiserver relays machines/exec to here (IronCore's "
                   "--address, :20250); needs --exec-token-file [default: no consoles]")
@click.option("--exec-token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the bearer token the apiserver presents (its --machinepoollet-token-file)")
@allocation_options
@fence_after_option
def machinepoollet(pool: str, provider_id: str, iri_endpoint: str | None, server: str | None,
                   token_file: Path | None, region: str | None, zone: str | None, workers: int,
                   heartbeat_interval: float, lease_duration: float, relist_period: float, gc_policy: str,
                   gc_grace: float, gc_max_per_pass: int, log_level: str, addresses: tuple[str, ...],
                   capacity_cpu: str | None, capacity_memory: str | None, exec_address: str | None,
                   exec_token_file: Path | None, cpu_allocation_ratio: float, reserved_cpu: str,
                   reserved_memory: str, fence_after: float) -> None:
    """Announce a MachinePool and drive the Machines bound to it through an IRI machine runtime."""
    from ironpool.iri.client import AsyncMachineRuntimeClient
    from ironpool.poollet.capacity import HostResources, given_capacity
    from ironpool.poollet.machinepoollet import MachinePoolletOptions, run_machinepoollet

    setup_logging(log_level)
    capacity = given_capacity(quantity_option(capacity_cpu, "--capacity-cpu"),
                              quantity_option(capacity_memory, "--capacity-memory"))
    reserved = HostResources(quantity_option(reserved_cpu, "--reserved-cpu") or 0,
                             quantity_option(reserved_memory, "--reserved-memory") or 0)
    options = MachinePoolletOptions(
        pool=pool, provider_id=provider_id, region=region, zone=zone, addresses=_addresses(addresses),
        workers=workers, heartbeat_interval=heartbeat_interval, lease_duration=lease_duration,
        relist_period=relist_period, capacity=capacity, reserved=reserved,
        cpu_allocation_ratio=cpu_allocation_ratio, gc=collect_options(gc_policy, gc_grace, gc_max_per_pass),
        fence_after=fence_after, **_console_options(exec_address, exec_token_file),
    )
    _check_fence_after(fence_after, heartbeat_interval)
    endpoint = _endpoint("machine", iri_endpoint)
    if capacity is None and not endpoint.startswith("unix://"):
        logging.getLogger("ironpool.poollet").warning(
            "runtime %s may be on another host, but the pool's capacity is taken from this host; "
            "pass --capacity-cpu/--capacity-memory", endpoint)
    _run_poollet(server, token_file, lambda: AsyncMachineRuntimeClient.connect(endpoint),
                 lambda client, runtime, stop: run_machinepoollet(client, runtime, options, stop))


@click.command("volumepoollet")
@_common
@click.option("--capacity-storage", default=None,
              help="Total storage of the pool, e.g. 500Gi (default: what the runtime can provide).")
def volumepoollet(pool: str, provider_id: str, iri_endpoint: str | None, server: str | None,
                  token_file: Path | None, region: str | None, zone: str | None, workers: int,
                  heartbeat_interval: float, lease_duration: float, relist_period: float, gc_policy: str,
                  gc_grace: float, gc_max_per_pass: int, log_level: str,
                  capacity_storage: str | None) -> None:
    """Announce a VolumePool and drive the Volumes bound to it through an IRI volume runtime."""
    from ironpool.iri.client import AsyncVolumeRuntimeClient
    from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet

    setup_logging(log_level)
    options = VolumePoolletOptions(
        pool=pool, provider_id=provider_id, region=region, zone=zone, workers=workers,
        heartbeat_interval=heartbeat_interval, lease_duration=lease_duration, relist_period=relist_period,
        capacity_bytes=quantity_option(capacity_storage, "--capacity-storage"),
        gc=collect_options(gc_policy, gc_grace, gc_max_per_pass),
    )
    endpoint = _endpoint("volume", iri_endpoint)
    _run_poollet(server, token_file, lambda: AsyncVolumeRuntimeClient.connect(endpoint),
                 lambda client, runtime, stop: run_volumepoollet(client, runtime, options, stop))
