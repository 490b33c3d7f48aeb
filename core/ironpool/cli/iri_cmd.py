"""``ironpool iri``: talk to an IRI runtime directly, like IronCore's irictl, for debugging.

The endpoint comes from ``--address`` or IronCore's discovery (``IRI_MACHINE_RUNTIME_ENDPOINT`` /
``IRI_VOLUME_RUNTIME_ENDPOINT``, then the well-known sockets); ``ssh://user@host/path.sock``
reaches a runtime on another host through sshd. Input files are YAML or JSON in the protobuf
JSON mapping with snake_case field names (``local_disk``, ``size_bytes``), as irictl reads them.
"""

from __future__ import annotations

import click

from ironpool.cli import iri_format as fmt
from ironpool.cli import iri_write_cmd as write
from ironpool.cli.iri_common import (
    IriContext,
    echo,
    iri_context,
    labels_option,
    output_option,
    parse_labels,
    rpc_errors,
    runtime_option,
)
from ironpool.iri.ssh import SSHOptions


@click.group("iri")
@click.option(
    "-a",
    "--address",
    metavar="ENDPOINT",
    default=None,
    help="unix:///path, tcp://host:port or ssh://user@host[:port]/path.sock "
    "(default: IRI_{MACHINE,VOLUME}_RUNTIME_ENDPOINT, then the well-known sockets).",
)
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Deadline per call, seconds.")
@click.option(
    "--discovery-timeout",
    type=float,
    default=3.0,
    show_default=True,
    help="How long to wait for a well-known socket to appear.",
)
@click.option(
    "--ssh-key", type=click.Path(dir_okay=False), default=None, help="Private key for ssh:// endpoints."
)
@click.option("--known-hosts", type=click.Path(dir_okay=False), default=None, help="Extra known_hosts file.")
@click.option(
    "--accept-new-host-key",
    is_flag=True,
    help="Trust (and record) an unknown ssh host key, never a changed one.",
)
@click.pass_context
def iri(
    ctx: click.Context,
    address: str | None,
    timeout: float,
    discovery_timeout: float,
    ssh_key: str | None,
    known_hosts: str | None,
    accept_new_host_key: bool,
) -> None:
    """Debug an IRI machine or volume runtime directly (like IronCore's irictl)."""
    if timeout <= 0:
        raise click.BadParameter("must be > 0", param_hint="'--timeout'")
    opts = SSHOptions(key_filename=ssh_key, known_hosts=known_hosts, accept_new_host_keys=accept_new_host_key)
    obj = IriContext(address, timeout, max(0.0, discovery_timeout), opts)
    ctx.obj = obj
    ctx.call_on_close(obj.close)



# --- get --------------------------------------------------------------------------------


@iri.group("get")
def get() -> None:
    """List objects, classes, events or the runtime version."""


@get.command("machines")
@click.argument("machine_id", required=False, default="")
@labels_option
@output_option
@click.pass_context
def get_machines(ctx: click.Context, machine_id: str, labels: tuple[str, ...], output: str) -> None:
    """List machines (or one by ID)."""
    selector = parse_labels(labels)
    with rpc_errors():
        items = iri_context(ctx).machine().list_machines(machine_id, labels=selector)
    if machine_id and not items:
        raise click.ClickException(f"machine {machine_id!r} not found")
    echo(fmt.render(items, output, fmt.machines_table, single=bool(machine_id)))


@get.command("volumes")
@click.argument("volume_id", required=False, default="")
@labels_option
@output_option
@click.pass_context
def get_volumes(ctx: click.Context, volume_id: str, labels: tuple[str, ...], output: str) -> None:
    """List volumes of the volume runtime (or one by ID)."""
    selector = parse_labels(labels)
    with rpc_errors():
        items = iri_context(ctx).volume().list_volumes(volume_id, labels=selector)
    if volume_id and not items:
        raise click.ClickException(f"volume {volume_id!r} not found")
    echo(fmt.render(items, output, fmt.volumes_table, single=bool(volume_id)))


def _status(ctx: click.Context, runtime: str, output: str) -> None:
    with rpc_errors():
        if runtime == "machine":
            echo(fmt.render(iri_context(ctx).machine().status(), output, fmt.machine_classes_table))
        else:
            echo(fmt.render(iri_context(ctx).volume().status(), output, fmt.volume_classes_table))


@get.command("status")
@runtime_option
@output_option
@click.pass_context
def get_status(ctx: click.Context, runtime: str, output: str) -> None:
    """Classes the runtime offers and how many of each it can still host."""
    _status(ctx, runtime, output)


@get.command("classes")
@runtime_option
@output_option
@click.pass_context
def get_classes(ctx: click.Context, runtime: str, output: str) -> None:
    """Same as get status (class capabilities and quantities)."""
    _status(ctx, runtime, output)


@get.command("version")
@runtime_option
@output_option
@click.pass_context
def get_version(ctx: click.Context, runtime: str, output: str) -> None:
    """The runtime's name and version."""
    with rpc_errors():
        client = iri_context(ctx).machine() if runtime == "machine" else iri_context(ctx).volume()
        resp = client.version()
    echo(fmt.render([resp], output, fmt.version_table, single=True))


@get.command("events")
@labels_option
@click.option("--id", "object_id", default="", help="Only events of this object.")
@click.option("--since", type=int, default=0, help="Unix seconds; 0 = no lower bound.")
@runtime_option
@output_option
@click.pass_context
def get_events(
    ctx: click.Context, labels: tuple[str, ...], object_id: str, since: int, runtime: str, output: str
) -> None:
    """Events the runtime recorded."""
    selector = parse_labels(labels)
    with rpc_errors():
        client = iri_context(ctx).machine() if runtime == "machine" else iri_context(ctx).volume()
        items = client.list_events(object_id, labels=selector, since=since)
    echo(fmt.render(items, output, fmt.events_table))


# irictl spells these in the singular.
get.add_command(get_machines, "machine")
get.add_command(get_volumes, "volume")
get.add_command(get_events, "event")

# The write commands live in iri_write_cmd; registered here so `ironpool iri --help` lists them all.
for _command in (write.create, write.delete, write.power, write.attach, write.detach, write.update,
                 write.expand, write.console):
    iri.add_command(_command)
