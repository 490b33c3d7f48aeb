"""``ironpool machinepoollet`` and ``ironpool volumepoollet``: one pool of one host, as a process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import click

from ironpool.api.quantity import parse_quantity


def read_token(path: Path) -> str:
    """A bearer token from a file: the whole (stripped) content, or the first column of a token CSV."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint="--token-file") from exc
    first = text.splitlines()[0].strip() if text else ""
    token = first.split(",")[0].strip() if "," in first else first
    if not token:
        raise click.BadParameter(f"{path} holds no token", param_hint="--token-file")
    return token


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


def _quantity(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        q = parse_quantity(value).value()
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: {exc}", param_hint=option) from exc
    if q < 0:
        raise click.BadParameter(f"{value!r} must not be negative", param_hint=option)
    return q


def _client(server: str | None, token_file: Path | None) -> Any:
    from ironpool.client.config import ClientConfig, ConfigError
    from ironpool.client.rest import AsyncClient

    token = read_token(token_file) if token_file else None
    try:
        config = ClientConfig.load(server=server, token=token).require_server()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    return AsyncClient(config)


def _run(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(runner())


def _common(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--pool", required=True, help="Name of the pool this poollet announces."),
        click.option("--provider-id", required=True, help="spec.providerID of the pool."),
        click.option("--iri", "iri_endpoint", default=None,
                     help="IRI runtime endpoint: unix:///path, tcp://host:port or ssh://user@host/path "
                          "(default: IRI_*_RUNTIME_ENDPOINT, then the well-known sockets)."),
        click.option("--server", default=None,
                     help="apiserver URL (default: client config / IRONPOOL_SERVER)."),
        click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="File holding the bearer token."),
        click.option("--region", default=None, help="Value of the topology.ironcore.dev/region label."),
        click.option("--zone", default=None, help="Value of the topology.ironcore.dev/zone label."),
        click.option("--workers", default=4, show_default=True, type=click.IntRange(1, 64)),
        click.option("--heartbeat-interval", default=10.0, show_default=True, type=click.FloatRange(0.1)),
        click.option("--relist-period", default=5.0, show_default=True, type=click.FloatRange(0.05),
                     help="Seconds between runtime relists (state changes, garbage collection)."),
        click.option("--log-level", default="INFO", show_default=True,
                     type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


@click.command("machinepoollet")
@_common
@click.option("--address", "addresses", multiple=True, help="Pool address TYPE=ADDRESS (repeatable).")
@click.option("--capacity-cpu", default=None, help="Host cores (default: this host's).")
@click.option("--capacity-memory", default=None, help="Host memory, e.g. 16Gi (default: this host's).")
@click.option("--reserved-cpu", default="0", show_default=True, help="Cores kept from ironpool machines.")
@click.option("--reserved-memory", default="0", show_default=True, help="Memory kept from ironpool machines.")
def machinepoollet(pool: str, provider_id: str, iri_endpoint: str | None, server: str | None,
                   token_file: Path | None, region: str | None, zone: str | None, workers: int,
                   heartbeat_interval: float, relist_period: float, log_level: str,
                   addresses: tuple[str, ...],
                   capacity_cpu: str | None, capacity_memory: str | None, reserved_cpu: str,
                   reserved_memory: str) -> None:
    """Announce a MachinePool and drive the Machines bound to it through an IRI machine runtime."""
    from ironpool.iri.endpoint import EndpointError, resolve_endpoint
    from ironpool.poollet.capacity import HostResources, local_host_resources
    from ironpool.poollet.machinepoollet import MachinePoolletOptions, run_machinepoollet
    from ironpool.poollet.runtime import MachineRuntime

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cpu, mem = _quantity(capacity_cpu, "--capacity-cpu"), _quantity(capacity_memory, "--capacity-memory")
    capacity = None
    if cpu is not None or mem is not None:
        local = local_host_resources()
        capacity = HostResources(cpu if cpu is not None else local.cpu,
                                 mem if mem is not None else local.memory)
    reserved = HostResources(_quantity(reserved_cpu, "--reserved-cpu") or 0,
                             _quantity(reserved_memory, "--reserved-memory") or 0)
    options = MachinePoolletOptions(
        pool=pool, provider_id=provider_id, region=region, zone=zone, addresses=_addresses(addresses),
        workers=workers, heartbeat_interval=heartbeat_interval, relist_period=relist_period,
        capacity=capacity, reserved=reserved,
    )
    try:
        endpoint = resolve_endpoint("machine", iri_endpoint, timeout=20.0)
    except EndpointError as exc:
        raise click.BadParameter(str(exc), param_hint="--iri") from exc
    if capacity is None and not endpoint.startswith("unix://"):
        logging.getLogger("ironpool.poollet").warning(
            "runtime %s may be on another host, but the pool's capacity is taken from this host; "
            "pass --capacity-cpu/--capacity-memory", endpoint)
    client = _client(server, token_file)

    async def main(stop: asyncio.Event) -> None:
        runtime = MachineRuntime.connect(endpoint)
        try:
            await run_machinepoollet(client, runtime, options, stop)
        finally:
            await runtime.close()
            await client.aclose()

    _run(main)


@click.command("volumepoollet")
@_common
@click.option("--capacity-storage", default=None,
              help="Total storage of the pool, e.g. 500Gi (default: what the runtime can provide).")
def volumepoollet(pool: str, provider_id: str, iri_endpoint: str | None, server: str | None,
                  token_file: Path | None, region: str | None, zone: str | None, workers: int,
                  heartbeat_interval: float, relist_period: float, log_level: str,
                  capacity_storage: str | None) -> None:
    """Announce a VolumePool and drive the Volumes bound to it through an IRI volume runtime."""
    from ironpool.iri.endpoint import EndpointError, resolve_endpoint
    from ironpool.poollet.runtime import VolumeRuntime
    from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = VolumePoolletOptions(
        pool=pool, provider_id=provider_id, region=region, zone=zone, workers=workers,
        heartbeat_interval=heartbeat_interval, relist_period=relist_period,
        capacity_bytes=_quantity(capacity_storage, "--capacity-storage"),
    )
    try:
        endpoint = resolve_endpoint("volume", iri_endpoint, timeout=20.0)
    except EndpointError as exc:
        raise click.BadParameter(str(exc), param_hint="--iri") from exc
    client = _client(server, token_file)

    async def main(stop: asyncio.Event) -> None:
        runtime = VolumeRuntime.connect(endpoint)
        try:
            await run_volumepoollet(client, runtime, options, stop)
        finally:
            await runtime.close()
            await client.aclose()

    _run(main)
