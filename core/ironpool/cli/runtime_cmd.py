"""``ironpool libvirt-runtime``: serve IronCore's ``MachineRuntime`` (IRI) on a libvirt host."""

from __future__ import annotations

from pathlib import Path

import click

from ironpool.cli.common import (
    allocation_options,
    guest_cpu_options,
    quantity_option,
    run_until_signalled,
    setup_logging,
)
from ironpool.cli.image_options import image_options, parse_size


@click.command("libvirt-runtime")
@click.option("--libvirt-uri", default="qemu:///system", show_default=True, help="libvirt connection URI.")
@click.option(
    "--classes",
    "classes_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="YAML list of IronCore MachineClass manifests offered by this host.",
)
@click.option(
    "--images",
    "images_dir",
    default="/var/lib/ironpool/images",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Image catalog directory.",
)
@image_options
@click.option(
    "--address",
    default="unix:///var/run/iri-machineprovider.sock",
    show_default=True,
    help="Where to serve IRI: unix:///path or tcp://host:port.",
)
@click.option(
    "--state-dir",
    default="/var/lib/ironpool/machine-runtime",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Per-machine files: disks, console logs, ignition.",
)
@click.option(
    "--domain-type",
    type=click.Choice(["auto", "kvm", "qemu"]),
    default="auto",
    show_default=True,
    help="auto: kvm only when hardware virtualisation really works, else qemu (emulation).",
)
@click.option("--machine-type", default="pc", show_default=True, help="QEMU machine type of new domains.")
@click.option("--ovmf-code", default=None,
              help="UEFI firmware that machines whose image asks for UEFI boot (default: Debian's ovmf).")
@click.option("--ovmf-vars", default=None,
              help="The OVMF variable store a UEFI machine's NVRAM starts from (matching --ovmf-code).")
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds a guest gets to honour ACPI shutdown before it is destroyed.",
)
@guest_cpu_options
@click.option(
    "--streaming-address",
    default="127.0.0.1:20251",
    show_default=True,
    help="host:port of the console (Exec) endpoint; port 0 picks a free one.",
)
@click.option("--base-url", default="", help="Public base URL of the console endpoint (default ws://ADDR).")
@click.option("--event-max", type=click.IntRange(min=1), default=100, show_default=True)
@click.option(
    "--event-ttl",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds an event is kept.",
)
@click.option(
    "--network-mode",
    type=click.Choice(["user", "nat", "isolated", "bridge"]),
    default="user",
    show_default=True,
    help="How Networks without a networking.ironpool.dev/mode label are realised on this host.",
)
@click.option("--network-bridge", default="", help="The host bridge of --network-mode bridge.")
@click.option(
    "--ssh-forward-address",
    default="127.0.0.1",
    show_default=True,
    help="Where user-mode NICs forward SSH from (a port per NIC on this address).",
)
@click.option("--capacity-cpu", default=None, help="Host cores to hand out from (default: libvirt's count).")
@click.option("--capacity-memory", default=None,
              help="Host memory to hand out from, e.g. 16Gi (default: libvirt's).")
@allocation_options
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
def libvirt_runtime(
    libvirt_uri: str,
    classes_file: str,
    images_dir: str,
    image_cache: Path,
    image_cache_size: str,
    insecure_registries: tuple[str, ...],
    file_images: tuple[Path, ...],
    image_pull_wait: float,
    address: str,
    state_dir: str,
    domain_type: str,
    machine_type: str,
    ovmf_code: str | None,
    ovmf_vars: str | None,
    shutdown_timeout: float,
    vcpu_slice_ms: float,
    max_booting: int | None,
    streaming_address: str,
    base_url: str,
    event_max: int,
    event_ttl: float,
    network_mode: str,
    network_bridge: str,
    ssh_forward_address: str,
    capacity_cpu: str | None,
    capacity_memory: str | None,
    cpu_allocation_ratio: float,
    reserved_cpu: str,
    reserved_memory: str,
    log_level: str,
) -> None:
    """Serve the IRI MachineRuntime on libvirt: real domains, power, volumes, console."""
    setup_logging(log_level)
    # Imported here so `ironpool --help` does not load libvirt and grpc.
    from ironpool.runtime.machine.app import MachineRuntimeConfig, build
    from ironpool.runtime.machine.capacity import CapacityPolicy
    from ironpool.runtime.machine.classes import ClassFileError
    from ironpool.runtime.machine.firmware import OvmfPaths
    from ironpool.runtime.machine.nics import NetworkSettings
    from ironpool.runtime.machine.server import serve
    from ironpool.runtime.machine.vcpu_slice import ms_to_ns
    from ironpool.runtime.qemu_access import QemuAccessError

    host, sep, port_text = streaming_address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise click.BadParameter(f"{streaming_address!r} is not host:port", param_hint="--streaming-address")
    try:
        networks = NetworkSettings(network_mode, network_bridge, ssh_forward_address)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--network-mode/--network-bridge") from exc
    try:
        capacity = CapacityPolicy(cpu_allocation_ratio,
                                  quantity_option(reserved_memory, "--reserved-memory") or 0,
                                  quantity_option(capacity_cpu, "--capacity-cpu") or None,
                                  quantity_option(capacity_memory, "--capacity-memory") or None,
                                  quantity_option(reserved_cpu, "--reserved-cpu") or 0)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--capacity-cpu/--capacity-memory") from exc
    cfg = MachineRuntimeConfig(
        classes_file=Path(classes_file),
        images_dir=Path(images_dir),
        image_cache=image_cache,
        image_cache_size=parse_size(image_cache_size, "--image-cache-size"),
        insecure_registries=insecure_registries,
        file_images=file_images,
        image_pull_wait=image_pull_wait,
        libvirt_uri=libvirt_uri,
        address=address,
        state_dir=Path(state_dir),
        domain_type=domain_type,
        machine_type=machine_type,
        ovmf=OvmfPaths(ovmf_code or OvmfPaths.code, ovmf_vars or OvmfPaths.vars_template),
        shutdown_timeout=shutdown_timeout,
        vcpu_slice_ns=ms_to_ns(vcpu_slice_ms),
        max_booting=max_booting,
        streaming_host=host.strip("[]") or "127.0.0.1",
        streaming_port=int(port_text),
        base_url=base_url,
        event_max=event_max,
        event_ttl=event_ttl,
        networks=networks,
        capacity=capacity,
    )
    try:
        core, console = build(cfg)
    except ClassFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--classes") from exc
    except (ConnectionError, QemuAccessError) as exc:
        raise click.ClickException(str(exc)) from exc

    try:
        run_until_signalled(lambda stop: serve(core, address, console, stop))
    except ValueError as exc:  # the address (the message names --address)
        raise click.ClickException(str(exc)) from exc
    finally:
        core.close()
