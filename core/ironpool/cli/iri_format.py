"""Human-readable tables and JSON/YAML renderings of IRI messages (for ``ironpool iri``); ages, sizes
and table layout are the ones every other ``ironpool`` table uses.

JSON and YAML use the protobuf JSON mapping with the snake_case proto field names, as irictl does,
so a printed object can be fed back to ``create -f``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

from ironpool.api.columns import NONE, age_of, human_bytes
from ironpool.cli.printers import format_table
from ironpool.iri.gen.event.v1alpha1 import api_pb2 as event_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2

OUTPUTS = ("table", "json", "yaml")


def age_ns(created_ns: int, now_ns: int | None = None) -> str:
    """The age of an IRI timestamp (Unix nanoseconds), as every table shows ages."""
    if not created_ns:
        return NONE
    return age_of(((now_ns if now_ns is not None else time.time_ns()) - created_ns) // 1_000_000_000)


def tabulate(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return format_table(list(headers), [list(r) for r in rows])


def to_dict(msg: Message) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def render(
    items: Sequence[Message], output: str, table: Callable[[Sequence[Any]], str], single: bool = False
) -> str:
    """``items`` as a table, or as a JSON/YAML list (one object when ``single``)."""
    if output == "table":
        return table(items)
    data: Any = [to_dict(m) for m in items]
    if single and len(data) == 1:
        data = data[0]
    if output == "json":
        return json.dumps(data, indent=2, sort_keys=False)
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False).rstrip("\n")
    raise ValueError(f"output: must be one of {', '.join(OUTPUTS)}, not {output!r}")


def _enum_name(enum: Any, value: int) -> str:
    try:
        return str(enum.Name(value))
    except ValueError:
        return str(value)


def machines_table(machines: Sequence[machine_pb2.Machine]) -> str:
    rows = []
    for m in machines:
        state = _enum_name(machine_pb2.MachineState, m.status.state).removeprefix("MACHINE_")
        if m.metadata.deleted_at:
            state += " (deleting)"
        rows.append(
            [
                m.metadata.id,
                getattr(m.spec, "class") or NONE,
                _enum_name(machine_pb2.Power, m.spec.power).removeprefix("POWER_"),
                state,
                str(len(m.spec.volumes)),
                str(len(m.spec.network_interfaces)),
                age_ns(m.metadata.created_at),
            ]
        )
    return tabulate(["ID", "CLASS", "POWER", "STATE", "VOLUMES", "NICS", "AGE"], rows)


def volumes_table(volumes: Sequence[volume_pb2.Volume]) -> str:
    rows = []
    for v in volumes:
        size = v.status.resources.storage_bytes or v.spec.resources.storage_bytes
        state = _enum_name(volume_pb2.VolumeState, v.status.state).removeprefix("VOLUME_")
        if v.metadata.deleted_at:
            state += " (deleting)"
        rows.append(
            [
                v.metadata.id,
                getattr(v.spec, "class") or NONE,
                human_bytes(size),
                state,
                v.status.access.handle or NONE,
                age_ns(v.metadata.created_at),
            ]
        )
    return tabulate(["ID", "CLASS", "SIZE", "STATE", "HANDLE", "AGE"], rows)


def machine_classes_table(statuses: Sequence[machine_pb2.MachineClassStatus]) -> str:
    rows = []
    for s in statuses:
        res = dict(s.machine_class.capabilities.resources)
        cpu = str(res.pop("cpu", 0))
        mem = human_bytes(res.pop("memory", 0))
        extra = ",".join(f"{k}={v}" for k, v in sorted(res.items())) or NONE
        rows.append([s.machine_class.name, cpu, mem, extra, str(s.quantity)])
    return tabulate(["CLASS", "CPU", "MEMORY", "OTHER", "QUANTITY"], rows)


def volume_classes_table(statuses: Sequence[volume_pb2.VolumeClassStatus]) -> str:
    rows = [
        [
            s.volume_class.name,
            str(s.volume_class.capabilities.tps),
            str(s.volume_class.capabilities.iops),
            human_bytes(s.quantity),
        ]
        for s in statuses
    ]
    return tabulate(["CLASS", "TPS", "IOPS", "QUANTITY"], rows)


def events_table(events: Sequence[event_pb2.Event]) -> str:
    now = int(time.time())
    rows = [
        [
            age_of(now - e.spec.event_time) if e.spec.event_time else NONE,
            e.spec.type or NONE,
            e.spec.reason or NONE,
            e.spec.action or NONE,
            e.spec.involved_object_meta.id or NONE,
            e.spec.message,
        ]
        for e in sorted(events, key=lambda e: e.spec.event_time)
    ]
    return tabulate(["LAST SEEN", "TYPE", "REASON", "ACTION", "OBJECT", "MESSAGE"], rows)


def version_table(responses: Sequence[Any]) -> str:
    return tabulate(["RUNTIME", "VERSION"], [[r.runtime_name, r.runtime_version] for r in responses])
