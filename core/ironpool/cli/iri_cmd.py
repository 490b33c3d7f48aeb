"""``ironpool iri``: talk to an IRI runtime directly, like IronCore's irictl, for debugging.

The endpoint comes from ``--address`` or IronCore's discovery (``IRI_MACHINE_RUNTIME_ENDPOINT`` /
``IRI_VOLUME_RUNTIME_ENDPOINT``, then the well-known sockets); ``ssh://user@host/path.sock``
reaches a runtime on another host through sshd. Input files are YAML or JSON in the protobuf
JSON mapping with snake_case field names (``local_disk``, ``size_bytes``), as irictl reads them.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
import grpc
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

from ironpool.api.quantity import parse_quantity
from ironpool.iri import format as fmt
from ironpool.iri.client import MachineRuntimeClient, VolumeRuntimeClient
from ironpool.iri.endpoint import EndpointError, RuntimeKind, resolve_endpoint
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.ssh import SSHOptions, SSHTunnelError
from ironpool.iri.transport import reachable_url

M = TypeVar("M", bound=Message)
_Named = TypeVar("_Named", machine_pb2.Volume, machine_pb2.NetworkInterface)

_output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(fmt.OUTPUTS),
    default="table",
    show_default=True,
    help="Output format.",
)
_runtime_option = click.option(
    "--runtime",
    type=click.Choice(["machine", "volume"]),
    default="machine",
    show_default=True,
    help="Which runtime to ask.",
)
_labels_option = click.option(
    "-l", "--label", "labels", multiple=True, metavar="K=V[,K=V]", help="Exact-match label selector."
)


@dataclass
class IriContext:
    """Connection settings shared by the subcommands; clients are opened on first use."""

    address: str | None
    timeout: float
    discovery_timeout: float
    ssh_options: SSHOptions
    _clients: dict[str, Any] = field(default_factory=dict)

    def _endpoint(self, kind: RuntimeKind) -> str:
        return resolve_endpoint(kind, self.address, timeout=self.discovery_timeout)

    def machine(self) -> MachineRuntimeClient:
        if "machine" not in self._clients:
            self._clients["machine"] = MachineRuntimeClient(
                self._endpoint("machine"), timeout=self.timeout, ssh_options=self.ssh_options
            )
        client: MachineRuntimeClient = self._clients["machine"]
        return client

    def volume(self) -> VolumeRuntimeClient:
        if "volume" not in self._clients:
            self._clients["volume"] = VolumeRuntimeClient(
                self._endpoint("volume"), timeout=self.timeout, ssh_options=self.ssh_options
            )
        client: VolumeRuntimeClient = self._clients["volume"]
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


@contextmanager
def _errors() -> Iterator[None]:
    """Turn transport and gRPC failures into one-line CLI errors."""
    try:
        yield
    except grpc.RpcError as exc:
        code = exc.code()
        raise click.ClickException(f"{code.name if code else 'UNKNOWN'}: {exc.details()}") from None
    except (EndpointError, SSHTunnelError) as exc:
        raise click.ClickException(str(exc)) from None


def _ctx(ctx: click.Context) -> IriContext:
    obj = ctx.find_object(IriContext)
    assert obj is not None
    return obj


def parse_labels(values: tuple[str, ...]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for value in values:
        for pair in filter(None, value.split(",")):
            key, sep, val = pair.partition("=")
            if not sep or not key:
                raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="'-l/--label'")
            labels[key] = val
    return labels


_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?|[kMGT]B?)?\s*$")


def parse_size(text: str) -> int:
    """10Gi, 512Mi, 1G or plain bytes ("K"/"kB"/"MB"... are taken as the decimal SI suffixes)."""
    m = _SIZE.match(text)
    if not m:
        raise click.BadParameter(f"{text!r}: expected a size such as 10Gi, 512Mi or bytes")
    number, unit = m.group(1), m.group(2) or ""
    if not unit.endswith("i"):
        unit = unit.removesuffix("B").replace("K", "k")
    return parse_quantity(number + unit).value()


def load_message(path: str, cls: type[M]) -> M:
    """Read path ("-" = stdin) as YAML/JSON into cls; errors name the file and field."""
    try:
        with click.open_file(path, "r") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise click.BadParameter(f"{path}: {exc.strerror or exc}", param_hint="'-f'") from None
    except yaml.YAMLError as exc:
        raise click.BadParameter(f"{path}: not valid YAML/JSON: {exc}", param_hint="'-f'") from None
    if not isinstance(data, dict):
        raise click.BadParameter(
            f"{path}: expected an object of type {cls.DESCRIPTOR.full_name}", param_hint="'-f'"
        )
    try:
        return json_format.ParseDict(data, cls())
    except json_format.ParseError as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="'-f'") from None


def _echo(text: str) -> None:
    if text:
        click.echo(text)


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
@_labels_option
@_output_option
@click.pass_context
def get_machines(ctx: click.Context, machine_id: str, labels: tuple[str, ...], output: str) -> None:
    """List machines (or one by ID)."""
    selector = parse_labels(labels)
    with _errors():
        items = _ctx(ctx).machine().list_machines(machine_id, labels=selector)
    if machine_id and not items:
        raise click.ClickException(f"machine {machine_id!r} not found")
    _echo(fmt.render(items, output, fmt.machines_table, single=bool(machine_id)))


@get.command("volumes")
@click.argument("volume_id", required=False, default="")
@_labels_option
@_output_option
@click.pass_context
def get_volumes(ctx: click.Context, volume_id: str, labels: tuple[str, ...], output: str) -> None:
    """List volumes of the volume runtime (or one by ID)."""
    selector = parse_labels(labels)
    with _errors():
        items = _ctx(ctx).volume().list_volumes(volume_id, labels=selector)
    if volume_id and not items:
        raise click.ClickException(f"volume {volume_id!r} not found")
    _echo(fmt.render(items, output, fmt.volumes_table, single=bool(volume_id)))


def _status(ctx: click.Context, runtime: str, output: str) -> None:
    with _errors():
        if runtime == "machine":
            _echo(fmt.render(_ctx(ctx).machine().status(), output, fmt.machine_classes_table))
        else:
            _echo(fmt.render(_ctx(ctx).volume().status(), output, fmt.volume_classes_table))


@get.command("status")
@_runtime_option
@_output_option
@click.pass_context
def get_status(ctx: click.Context, runtime: str, output: str) -> None:
    """Classes the runtime offers and how many of each it can still host."""
    _status(ctx, runtime, output)


@get.command("classes")
@_runtime_option
@_output_option
@click.pass_context
def get_classes(ctx: click.Context, runtime: str, output: str) -> None:
    """Same as get status (class capabilities and quantities)."""
    _status(ctx, runtime, output)


@get.command("version")
@_runtime_option
@_output_option
@click.pass_context
def get_version(ctx: click.Context, runtime: str, output: str) -> None:
    """The runtime's name and version."""
    with _errors():
        client = _ctx(ctx).machine() if runtime == "machine" else _ctx(ctx).volume()
        resp = client.version()
    _echo(fmt.render([resp], output, fmt.version_table, single=True))


@get.command("events")
@_labels_option
@click.option("--id", "object_id", default="", help="Only events of this object.")
@click.option("--since", type=int, default=0, help="Unix seconds; 0 = no lower bound.")
@_runtime_option
@_output_option
@click.pass_context
def get_events(
    ctx: click.Context, labels: tuple[str, ...], object_id: str, since: int, runtime: str, output: str
) -> None:
    """Events the runtime recorded."""
    selector = parse_labels(labels)
    with _errors():
        client = _ctx(ctx).machine() if runtime == "machine" else _ctx(ctx).volume()
        items = client.list_events(object_id, labels=selector, since=since)
    _echo(fmt.render(items, output, fmt.events_table))


# --- create / delete ----------------------------------------------------------------------


_file_option = click.option(
    "-f",
    "--filename",
    "path",
    required=True,
    metavar="FILE",
    help="YAML/JSON of the IRI message ('-' = stdin).",
)


@iri.group("create")
def create() -> None:
    """Create a machine or volume from a file."""


@create.command("machine")
@_file_option
@_output_option
@click.pass_context
def create_machine(ctx: click.Context, path: str, output: str) -> None:
    """Create a machine from a machine.v1alpha1.Machine document."""
    machine = load_message(path, machine_pb2.Machine)
    with _errors():
        created = _ctx(ctx).machine().create_machine(machine)
    _echo(
        created.metadata.id if output == "table" else fmt.render([created], output, fmt.machines_table, True)
    )


@create.command("volume")
@_file_option
@_output_option
@click.pass_context
def create_volume(ctx: click.Context, path: str, output: str) -> None:
    """Create a volume from a volume.v1alpha1.Volume document."""
    volume = load_message(path, volume_pb2.Volume)
    with _errors():
        created = _ctx(ctx).volume().create_volume(volume)
    _echo(
        created.metadata.id if output == "table" else fmt.render([created], output, fmt.volumes_table, True)
    )


@iri.group("delete")
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
    with _errors():
        client = _ctx(ctx).machine()
    _delete_all(ids, client.delete_machine, "machine")


@delete.command("volume")
@click.argument("ids", nargs=-1, required=True)
@click.pass_context
def delete_volume(ctx: click.Context, ids: tuple[str, ...]) -> None:
    """Delete volumes."""
    with _errors():
        client = _ctx(ctx).volume()
    _delete_all(ids, client.delete_volume, "volume")


# --- machine operations --------------------------------------------------------------------


@iri.command("power")
@click.argument("machine_id")
@click.argument("state", type=click.Choice(["on", "off"], case_sensitive=False))
@click.pass_context
def power(ctx: click.Context, machine_id: str, state: str) -> None:
    """Power a machine on or off."""
    value = machine_pb2.POWER_ON if state.lower() == "on" else machine_pb2.POWER_OFF
    with _errors():
        _ctx(ctx).machine().update_machine_power(machine_id, value)
    click.echo(f"machine {machine_id} power {state.lower()}")


def _load_named(path: str, message_type: type[_Named]) -> _Named:
    """An IRI Volume/NetworkInterface from ``-f``; these are addressed by name, so it must have one."""
    message = load_message(path, message_type)
    if not message.name:
        raise click.BadParameter(f"{path}: name: must not be empty", param_hint="'-f'")
    return message


@iri.group("attach")
def attach() -> None:
    """Attach a volume or network interface to a machine."""


@attach.command("volume")
@click.argument("machine_id")
@_file_option
@click.pass_context
def attach_volume(ctx: click.Context, machine_id: str, path: str) -> None:
    """Attach a machine.v1alpha1.Volume (name, device, connection or local_disk)."""
    volume = _load_named(path, machine_pb2.Volume)
    with _errors():
        _ctx(ctx).machine().attach_volume(machine_id, volume)
    click.echo(f"volume {volume.name} attached to machine {machine_id}")


@attach.command("nic")
@click.argument("machine_id")
@_file_option
@click.pass_context
def attach_nic(ctx: click.Context, machine_id: str, path: str) -> None:
    """Attach a machine.v1alpha1.NetworkInterface."""
    nic = _load_named(path, machine_pb2.NetworkInterface)
    with _errors():
        _ctx(ctx).machine().attach_network_interface(machine_id, nic)
    click.echo(f"network interface {nic.name} attached to machine {machine_id}")


@iri.group("detach")
def detach() -> None:
    """Detach a volume or network interface from a machine."""


@detach.command("volume")
@click.argument("machine_id")
@click.argument("name")
@click.pass_context
def detach_volume(ctx: click.Context, machine_id: str, name: str) -> None:
    """Detach the volume called NAME."""
    with _errors():
        _ctx(ctx).machine().detach_volume(machine_id, name)
    click.echo(f"volume {name} detached from machine {machine_id}")


@detach.command("nic")
@click.argument("machine_id")
@click.argument("name")
@click.pass_context
def detach_nic(ctx: click.Context, machine_id: str, name: str) -> None:
    """Detach the network interface called NAME."""
    with _errors():
        _ctx(ctx).machine().detach_network_interface(machine_id, name)
    click.echo(f"network interface {name} detached from machine {machine_id}")


@iri.group("update")
def update() -> None:
    """Update a volume attached to a machine (e.g. its size after an expand)."""


@update.command("volume")
@click.argument("machine_id")
@_file_option
@click.pass_context
def update_volume(ctx: click.Context, machine_id: str, path: str) -> None:
    """Send UpdateVolume for an attached volume (e.g. a new effective_storage_bytes)."""
    volume = _load_named(path, machine_pb2.Volume)
    with _errors():
        _ctx(ctx).machine().update_volume(machine_id, volume)
    click.echo(f"volume {volume.name} of machine {machine_id} updated")


@iri.command("expand")
@click.argument("volume_id")
@click.option("--size", required=True, help="New size, e.g. 20Gi.")
@click.pass_context
def expand(ctx: click.Context, volume_id: str, size: str) -> None:
    """Grow a volume in the volume runtime (ExpandVolume)."""
    n = parse_size(size)
    with _errors():
        _ctx(ctx).volume().expand_volume(volume_id, n)
    click.echo(f"volume {volume_id} expanded to {fmt.human_bytes(n)}")


@iri.command("console")
@click.argument("machine_id")
@click.option("--url-only", is_flag=True, help="Print the one-shot console URL instead of attaching.")
@click.pass_context
def console(ctx: click.Context, machine_id: str, url_only: bool) -> None:
    """Attach to a machine's serial console (Exec); Ctrl+] detaches."""
    with _errors():
        client = _ctx(ctx).machine()
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


# irictl spells these in the singular.
get.add_command(get_machines, "machine")
get.add_command(get_volumes, "volume")
get.add_command(get_events, "event")
