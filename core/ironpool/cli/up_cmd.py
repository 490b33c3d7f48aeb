"""``ironpool up``: apiserver, scheduler, poollets and libvirt runtimes for this host, in one process."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ironpool.cli.common import (
    allocation_options,
    cluster_signing_duration_option,
    collect_options,
    fence_margin_option,
    gc_options,
    guest_cpu_options,
    local_fence_after_option,
    quantity_option,
    run_in_foreground,
)


def _listen(value: str) -> tuple[str, int]:
    host, sep, port_s = value.rpartition(":")
    if not sep or not port_s.isdigit() or not 0 <= int(port_s) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT", param_hint="--listen")
    return host.strip("[]") or "127.0.0.1", int(port_s)


@click.command("up")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR", help="Database, tokens, sockets, images, volumes, logs "
                   "[default: /var/lib/ironpool as root, else ~/.local/share/ironpool].")
@click.option("--libvirt-uri", default="qemu:///system", show_default=True, help="libvirt connection URI.")
@click.option("--listen", default="127.0.0.1:6443", show_default=True, metavar="HOST:PORT",
              help="Where the apiserver listens, HTTPS with a local CA (port 0: any free port).")
@click.option("--insecure-http", is_flag=True,
              help="Serve plain HTTP instead of HTTPS (only on a loopback --listen address; kubectl "
                   "sends no token over plain HTTP).")
@click.option("--pool", default=None,
              help="Name of this host's MachinePool and VolumePool [default: hostname].")
@click.option("--provider-id", default=None, help="spec.providerID of the pools [default: ironpool://HOSTNAME].")
@click.option("--storage-pool", default=None,
              help="libvirt dir storage pool for volumes, created in DATA_DIR/volumes if missing "
                   "[default: ironpool-<hash of DATA_DIR>, one per data dir].")
@click.option("--share-storage-pool", is_flag=True,
              help="Use --storage-pool even if another installation owns it (both then see its volumes).")
@click.option("--classes", "classes", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="MachineClass/VolumeClass manifests (file or folder, repeatable) "
                   "[default: the classes shipped with ironpool, as in examples/classes].")
@click.option("--images", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Image catalog folder [default: DATA_DIR/images].")
@click.option("--tiny-image/--no-tiny-image", default=True, show_default=True,
              help="Build the tiny bootable image into the catalog if it is missing.")
@click.option("--domain-type", type=click.Choice(["auto", "kvm", "qemu"]), default="auto", show_default=True)
@guest_cpu_options
@click.option("--network-mode", type=click.Choice(["user", "nat", "isolated", "bridge"]), default="user",
              show_default=True, help="How Networks without a networking.ironpool.dev/mode label are "
              "realised: QEMU user networking with SSH forwarded on 127.0.0.1, a libvirt network, or a host "
              "bridge.")
@click.option("--network-bridge", default="", help="The host bridge of --network-mode bridge.")
@click.option("--capacity-cpu", default=None, help="Cores the MachinePool offers [default: this host's].")
@click.option("--capacity-memory", default=None,
              help="Memory the MachinePool offers, e.g. 8Gi [default: this host's].")
@allocation_options
@click.option("--capacity-storage", default=None, help="Storage the VolumePool offers [default: free space].")
@click.option("--write-client-config/--no-write-client-config", default=True, show_default=True,
              help="Write the client configuration ($IRONPOOL_CONFIG or ~/.config/ironpool/config.yaml).")
@click.option("--heartbeat-interval", default=10.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds between renewals of the pools' Leases (and runtime probes).")
@click.option("--pool-monitor-grace-period", default=40.0, show_default=True, type=click.FloatRange(0.5),
              help="Seconds a pool's Lease may go unrenewed before the pool is Ready=Unknown and its "
                   "Machines are evicted.")
@local_fence_after_option
@fence_margin_option
@cluster_signing_duration_option
@click.option("--registry", "registry_port", type=click.IntRange(0, 65535), default=None, is_flag=False,
              flag_value=5000, metavar="[PORT]",
              help="Also run an OCI registry (Debian's docker-registry) on 127.0.0.1:PORT [5000], its "
                   "storage in DATA_DIR/registry: push images with `ironpool image push 127.0.0.1:PORT/"
                   "os/NAME:TAG FILE` and boot them by that reference.")
@gc_options
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="Level of DATA_DIR/logs/ironpool.log.")
def up(data_dir: Path | None, libvirt_uri: str, listen: str, insecure_http: bool, pool: str | None,
       provider_id: str | None,
       storage_pool: str | None, share_storage_pool: bool, classes: tuple[Path, ...], images: Path | None,
       tiny_image: bool, domain_type: str, vcpu_slice_ms: float, max_booting: int | None, network_mode: str,
       network_bridge: str,
       capacity_cpu: str | None, capacity_memory: str | None, cpu_allocation_ratio: float, reserved_cpu: str,
       reserved_memory: str,
       capacity_storage: str | None, write_client_config: bool, heartbeat_interval: float,
       pool_monitor_grace_period: float, fence_after: float, fence_margin: float,
       cluster_signing_duration: float, registry_port: int | None,
       gc_policy: str, gc_grace: float,
       gc_max_per_pass: int, log_level: str) -> None:
    """Run ironpool for this host: apiserver (SQLite), scheduler, controller-manager, machinepoollet and
    volumepoollet, libvirt machine and volume runtimes. Ctrl-C stops it; running it again resumes."""
    from ironpool.allinone.datadir import DataDirError, default_data_dir, dns_label
    from ironpool.allinone.progress import Progress
    from ironpool.allinone.up import AllInOne, UpError, UpOptions
    from ironpool.apiserver import is_loopback
    host, port = _listen(listen)
    if insecure_http and not is_loopback(host):
        raise click.BadParameter(f"--insecure-http serves plain HTTP only on a loopback address, not {host}",
                                 param_hint="--listen")
    if pool is not None and dns_label(pool) != pool:
        raise click.BadParameter(f"{pool!r} is not a DNS label (lower case a-z, 0-9 and '-'; "
                                 f"e.g. {dns_label(pool)!r})", param_hint="--pool")
    cpu = quantity_option(capacity_cpu, "--capacity-cpu")
    try:
        options = UpOptions(
            data_dir=data_dir or default_data_dir(), libvirt_uri=libvirt_uri, listen_host=host,
            listen_port=port,
            insecure_http=insecure_http,
            storage_pool=storage_pool or "", share_storage_pool=share_storage_pool, images=images,
            tiny_image=tiny_image, domain_type=domain_type, vcpu_slice_ms=vcpu_slice_ms,
            max_booting=max_booting,
            network_mode=network_mode, network_bridge=network_bridge,
            capacity_cpu=cpu, capacity_memory=quantity_option(capacity_memory, "--capacity-memory"),
            reserved_cpu=quantity_option(reserved_cpu, "--reserved-cpu") or 0,
            reserved_memory=quantity_option(reserved_memory, "--reserved-memory") or 0,
            cpu_allocation_ratio=cpu_allocation_ratio,
            capacity_storage=quantity_option(capacity_storage, "--capacity-storage"),
            write_client_config=write_client_config, heartbeat_interval=heartbeat_interval,
            log_level=log_level,
            gc=collect_options(gc_policy, gc_grace, gc_max_per_pass),
            pool_monitor_grace_period=pool_monitor_grace_period, fence_after=fence_after,
            fence_margin=fence_margin, cluster_signing_duration=cluster_signing_duration,
        )
    except ValueError as exc:  # options that do not fit together, named
        raise click.UsageError(str(exc)) from None
    if pool:
        options.pool = pool
    if provider_id:
        options.provider_id = provider_id
    if classes:
        options.classes = list(classes)
    progress = Progress(sys.stdout)
    progress.note(f"starting ironpool for pool {options.pool} (data dir {options.data_dir})")
    system = AllInOne(options, progress)

    def started(aio: AllInOne) -> None:
        progress.block(f"ironpool is up ({progress.elapsed():.1f}s):", aio.summary())
        progress.note(f"Try: ironpool get machinepools -o wide; ironpool apply -f examples/manifests/\n"
                      f"     KUBECONFIG={aio.dirs.kubeconfig} kubectl get machines -o wide\n"
                      f"Stop with Ctrl-C (or: kill {os.getpid()}).")

    registry = None if registry_port is None else _start_registry(options.data_dir, registry_port, progress)
    try:
        run_in_foreground(system, progress, started, "ironpool up", (UpError, DataDirError))
    finally:
        if registry is not None:
            registry.stop()
    progress.note("ironpool stopped.")


def _start_registry(data_dir: Path, port: int, progress: Any) -> Any:
    """The local OCI registry of ``--registry``, started before the rest so its address is known."""
    from ironpool.allinone.registry import LocalRegistry, RegistryError

    registry = LocalRegistry(data_dir / "registry", port)
    try:
        registry.start()
    except RegistryError as exc:
        raise click.ClickException(f"--registry: {exc}") from exc
    progress.note(f"OCI registry on {registry.address} (push: ironpool image push "
                  f"{registry.address}/os/NAME:TAG FILE; log {registry.log_file})")
    return registry
