"""What the ``ironpool iri`` commands share: the runtime connections, options, input parsing, errors.

The endpoint comes from ``--address`` or IronCore's discovery (``IRI_MACHINE_RUNTIME_ENDPOINT`` /
``IRI_VOLUME_RUNTIME_ENDPOINT``, then the well-known sockets); ``ssh://user@host/path.sock``
reaches a runtime on another host through sshd. Input files are YAML or JSON in the protobuf
JSON mapping with snake_case field names (``local_disk``, ``size_bytes``), as irictl reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
import grpc
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

from ironpool.api.quantity import parse_quantity
from ironpool.cli import iri_format as fmt
from ironpool.iri.client import MachineRuntimeClient, VolumeRuntimeClient
from ironpool.iri.endpoint import EndpointError, RuntimeKind, resolve_endpoint
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.ssh import SSHOptions, SSHTunnelError

M = TypeVar("M", bound=Message)
_Named = TypeVar("_Named", machine_pb2.Volume, machine_pb2.NetworkInterface)

output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(fmt.OUTPUTS),
    default="table",
    show_default=True,
    help="Output format.",
)
runtime_option = click.option(
    "--runtime",
    type=click.Choice(["machine", "volume"]),
    default="machine",
    show_default=True,
    help="Which runtime to ask.",
)
labels_option = click.option(
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
def rpc_errors() -> Iterator[None]:
    """Turn transport and gRPC failures into one-line CLI errors."""
    try:
        yield
    except grpc.RpcError as exc:
        code = exc.code()
        raise click.ClickException(f"{code.name if code else 'UNKNOWN'}: {exc.details()}") from None
    except (EndpointError, SSHTunnelError) as exc:
        raise click.ClickException(str(exc)) from None


def iri_context(ctx: click.Context) -> IriContext:
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


def echo(text: str) -> None:
    if text:
        click.echo(text)


file_option = click.option(
    "-f",
    "--filename",
    "path",
    required=True,
    metavar="FILE",
    help="YAML/JSON of the IRI message ('-' = stdin).",
)


def load_named(path: str, message_type: type[_Named]) -> _Named:
    """An IRI Volume/NetworkInterface from ``-f``; these are addressed by name, so it must have one."""
    message = load_message(path, message_type)
    if not message.name:
        raise click.BadParameter(f"{path}: name: must not be empty", param_hint="'-f'")
    return message
