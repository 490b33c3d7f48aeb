"""``ironpool iri`` commands that change a runtime: create, delete, power, attach, detach, update,
expand, and the serial console."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

import click
import grpc

from ironpool.cli import iri_format as fmt
from ironpool.cli.iri_common import (
    echo,
    file_option,
    iri_context,
    load_message,
    load_named,
    output_option,
    parse_size,
    rpc_errors,
)
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.ssh import SSHTunnelError
from ironpool.iri.transport import reachable_url

# --- create / delete ----------------------------------------------------------------------


@click.group("create")
def create() -> None:
    """Create a machine or volume from a file."""


@create.command("machine")
@file_option
@output_option
@click.pass_context
def create_machine(ctx: click.Context, path: str, output: str) -> None:
    """Create a machine from a machine.v1alpha1.Machine document."""
    machine = load_message(path, machine_pb2.Machine)
    with rpc_errors():
        created = iri_context(ctx).machine().create_machine(machine)
    echo(
        created.metadata.id if output == "table" else fmt.render([created], output, fmt.machines_table, True)
    )


@create.command("volume")
@file_option
@output_option
@click.pass_context
def create_volume(ctx: click.Context, path: str, output: str) -> None:
    """Create a volume from a volume.v1alpha1.Volume document."""
    volume = load_message(path, volume_pb2.Volume)
    with rpc_errors():
        created = iri_context(ctx).volume().create_volume(volume)
    echo(
        created.metadata.id if output == "table" else fmt.render([created], output, fmt.volumes_table, True)
    )


@click.group("delete")
def delete() -> None:
    """Delete machines or volumes by ID."""


def _delete_all(ids: tuple[str, ...], delete_one: Callable[[str], object], kind: str) -> None:
    failed = False
    for object_id in ids:
        try:
            delete_one(object_id)
            click.echo(f"{kind} {object_id} deleted")
        except grpc.RpcError as exc:
            code = exc.code()
            click.echo(
                f"error: {kind} {object_id}: {code.name if code else 'UNKNOWN'}: {exc.details()}", err=True
            )
            failed = True
    if failed:
        sys.exit(1)


@delete.command("machine")
@click.argument("ids", nargs=-1, required=True)
@click.pass_context
def delete_machine(ctx: click.Context, ids: tuple[str, ...]) -> None:
    """Delete machines (deletion may finish asynchronously)."""
    with rpc_errors():
        client = iri_context(ctx).machine()
    _delete_all(ids, client.delete_machine, "machine")


@delete.command("volume")
@click.argument("ids", nargs=-1, required=True)
@click.pass_context
def delete_volume(ctx: click.Context, ids: tuple[str, ...]) -> None:
    """Delete volumes."""
    with rpc_errors():
        client = iri_context(ctx).volume()
    _delete_all(ids, client.delete_volume, "volume")


# --- machine operations --------------------------------------------------------------------


@click.command("power")
@click.argument("machine_id")
@click.argument("state", type=click.Choice(["on", "off"], case_sensitive=False))
@click.pass_context
def power(ctx: click.Context, machine_id: str, state: str) -> None:
    """Power a machine on or off."""
    value = machine_pb2.POWER_ON if state.lower() == "on" else machine_pb2.POWER_OFF
    with rpc_errors():
        iri_context(ctx).machine().update_machine_power(machine_id, value)
    click.echo(f"machine {machine_id} power {state.lower()}")


@click.group("attach")
def attach() -> None:
    """Attach a volume or network interface to a machine."""


@attach.command("volume")
@click.argument("machine_id")
@file_option
@click.pass_context
def attach_volume(ctx: click.Context, machine_id: str, path: str) -> None:
    """Attach a machine.v1alpha1.Volume (name, device, connection or local_disk)."""
    volume = load_named(path, machine_pb2.Volume)
    with rpc_errors():
        iri_context(ctx).machine().attach_volume(machine_id, volume)
    click.echo(f"volume {volume.name} attached to machine {machine_id}")


@attach.command("nic")
@click.argument("machine_id")
@file_option
@click.pass_context
def attach_nic(ctx: click.Context, machine_id: str, path: str) -> None:
    """Attach a machine.v1alpha1.NetworkInterface."""
    nic = load_named(path, machine_pb2.NetworkInterface)
    with rpc_errors():
        iri_context(ctx).machine().attach_network_interface(machine_id, nic)
    click.echo(f"network interface {nic.name} attached to machine {machine_id}")


@click.group("detach")
def detach() -> None:
    """Detach a volume or network interface from a machine."""


@detach.command("volume")
@click.argument("machine_id")
@click.argument("name")
@click.pass_context
def detach_volume(ctx: click.Context, machine_id: str, name: str) -> None:
    """Detach the volume called NAME."""
    with rpc_errors():
        iri_context(ctx).machine().detach_volume(machine_id, name)
    click.echo(f"volume {name} detached from machine {machine_id}")


@detach.command("nic")
@click.argument("machine_id")
@click.argument("name")
@click.pass_context
def detach_nic(ctx: click.Context, machine_id: str, name: str) -> None:
    """Detach the network interface called NAME."""
    with rpc_errors():
        iri_context(ctx).machine().detach_network_interface(machine_id, name)
    click.echo(f"network interface {name} detached from machine {machine_id}")


@click.group("update")
def update() -> None:
    """Update a volume attached to a machine (e.g. its size after an expand)."""


@update.command("volume")
@click.argument("machine_id")
@file_option
@click.pass_context
def update_volume(ctx: click.Context, machine_id: str, path: str) -> None:
    """Send UpdateVolume for an attached volume (e.g. a new effective_storage_bytes)."""
    volume = load_named(path, machine_pb2.Volume)
    with rpc_errors():
        iri_context(ctx).machine().update_volume(machine_id, volume)
    click.echo(f"volume {volume.name} of machine {machine_id} updated")


@click.command("expand")
@click.argument("volume_id")
@click.option("--size", required=True, help="New size, e.g. 20Gi.")
@click.pass_context
def expand(ctx: click.Context, volume_id: str, size: str) -> None:
    """Grow a volume in the volume runtime (ExpandVolume)."""
    n = parse_size(size)
    with rpc_errors():
        iri_context(ctx).volume().expand_volume(volume_id, n)
    click.echo(f"volume {volume_id} expanded to {fmt.human_bytes(n)}")


@click.command("console")
@click.argument("machine_id")
@click.option("--url-only", is_flag=True, help="Print the one-shot console URL instead of attaching.")
@click.pass_context
def console(ctx: click.Context, machine_id: str, url_only: bool) -> None:
    """Attach to a machine's serial console (Exec); Ctrl+] detaches."""
    with rpc_errors():
        client = iri_context(ctx).machine()
        url = client.exec(machine_id)
    try:
        # Over ssh:// the URL names the runtime host's loopback: forward it through the tunnel.
        url = reachable_url(client.channel, url)
    except (ValueError, SSHTunnelError) as exc:
        raise click.ClickException(f"console URL {url!r}: {exc}") from None
    if url_only:
        click.echo(url)
        return
    # Imported lazily: the console client pulls in websocket/terminal code only needed here.
    console_client = importlib.import_module("ironpool.iri.console")
    try:
        result: Any = console_client.attach(url)
    except OSError as exc:
        raise click.ClickException(f"console {url}: {exc}") from None
    if isinstance(result, int) and result:
        sys.exit(result)
