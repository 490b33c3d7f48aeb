"""Output of ``get`` and ``describe``: tables (columns per kind, defined once in :data:`COLUMNS`),
YAML, JSON and ``kind/name``.

Printers work on the wire form (plain dicts), so they print exactly what the server sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from ironpool.api.quantity import parse_quantity
from ironpool.api.resources import ResourceInfo

Obj = dict[str, Any]
NONE = "<none>"


def dig(obj: Any, path: str) -> Any:
    """``obj["a"]["b"]...`` for ``path`` ``"a.b"``; None where a step is missing."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def condition(obj: Obj, ctype: str) -> Obj | None:
    for cond in dig(obj, "status.conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl-style age: ``45s``, ``3m12s``, ``5h``, ``2d3h``."""
    if not timestamp:
        return NONE
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m"
    if days < 2:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h"
    return f"{days}d"


# -- column getters ----------------------------------------------------------------------------

Getter = Callable[[Obj], Any]


def field(path: str) -> Getter:
    return lambda obj: dig(obj, path)


def cond_status(ctype: str, fallback: str | None = None) -> Getter:
    def get(obj: Obj) -> Any:
        cond = condition(obj, ctype)
        if cond is not None:
            return cond.get("status")
        return dig(obj, fallback) if fallback else None
    return get


def count(path: str) -> Getter:
    return lambda obj: len(dig(obj, path) or [])


def names(path: str) -> Getter:
    def get(obj: Obj) -> Any:
        return ",".join(str(i.get("name")) for i in dig(obj, path) or [] if isinstance(i, dict)) or None
    return get


_BINARY_UNITS = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20),
                 ("Ki", 1 << 10))


def human_bytes(value: Any) -> str:
    """A byte quantity for a person: ``24684092Ki`` -> ``23.5Gi`` (tables only; -o yaml stays exact)."""
    try:
        n = parse_quantity(value).value()
    except ValueError:
        return str(value)
    for unit, size in _BINARY_UNITS:
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + unit
    return str(n)


def free_of(resource: str) -> Getter:
    """``allocatable/capacity`` of one shared resource of a pool (bytes shown with binary units)."""
    show = str if resource == "cpu" else human_bytes

    def get(obj: Obj) -> Any:
        alloc, cap = dig(obj, f"status.allocatable.{resource}"), dig(obj, f"status.capacity.{resource}")
        if alloc is None and cap is None:
            return None
        return f"{show(alloc) if alloc is not None else '?'}/{show(cap) if cap is not None else '?'}"
    return get


def mapping(path: str) -> Getter:
    return lambda obj: ",".join(f"{k}={v}" for k, v in sorted((dig(obj, path) or {}).items())) or None


def involved(obj: Obj) -> Any:
    ref = obj.get("involvedObject") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _age(obj: Obj) -> str:
    return age(dig(obj, "metadata.creationTimestamp"))


def _last_seen(obj: Obj) -> str:
    return age(obj.get("lastTimestamp") or obj.get("eventTime") or dig(obj, "metadata.creationTimestamp"))


@dataclass(frozen=True)
class Column:
    """One table column; ``wide`` columns only show with ``-o wide``."""

    header: str
    get: Getter
    wide: bool = False


NAME = Column("NAME", field("metadata.name"))
AGE = Column("AGE", _age)

COLUMNS: dict[str, list[Column]] = {
    "Machine": [
        NAME, Column("MACHINECLASS", field("spec.machineClassRef.name")),
        Column("POOL", field("spec.machinePoolRef.name")), Column("STATE", field("status.state")),
        Column("POWER", field("spec.power")), AGE,
        Column("READY", cond_status("Ready"), wide=True),
        Column("MACHINEID", field("status.machineID"), wide=True),
        Column("POOLSELECTOR", mapping("spec.machinePoolSelector"), wide=True),
    ],
    "MachineClass": [
        NAME, Column("CPU", field("capabilities.cpu")), Column("MEMORY", field("capabilities.memory")), AGE,
        Column("CAPABILITIES", mapping("capabilities"), wide=True),
    ],
    "MachinePool": [
        NAME, Column("READY", cond_status("Ready", "status.state")),
        Column("CLASSES", count("status.availableMachineClasses")),
        Column("CPU", free_of("cpu")), Column("MEMORY", free_of("memory")), AGE,
        Column("PROVIDERID", field("spec.providerID"), wide=True),
        Column("STATE", field("status.state"), wide=True),
        Column("TAINTS", count("spec.taints"), wide=True),
        Column("MACHINECLASSES", names("status.availableMachineClasses"), wide=True),
    ],
    "Volume": [
        NAME, Column("VOLUMECLASS", field("spec.volumeClassRef.name")),
        Column("POOL", field("spec.volumePoolRef.name")), Column("STATE", field("status.state")),
        Column("SIZE", field("spec.resources.storage")), AGE,
        Column("CLAIMER", field("spec.claimRef.name"), wide=True),
        Column("VOLUMEID", field("status.volumeID"), wide=True),
        Column("IMAGE", field("spec.dataSource.osImage.image"), wide=True),
    ],
    "VolumeClass": [
        NAME, Column("TPS", field("capabilities.tps")), Column("IOPS", field("capabilities.iops")), AGE,
        Column("RESIZEPOLICY", field("resizePolicy"), wide=True),
    ],
    "VolumePool": [
        NAME, Column("STATE", field("status.state")),
        Column("CLASSES", count("status.availableVolumeClasses")),
        Column("STORAGE", free_of("storage")), AGE,
        Column("PROVIDERID", field("spec.providerID"), wide=True),
        Column("VOLUMECLASSES", names("status.availableVolumeClasses"), wide=True),
    ],
    "Secret": [NAME, Column("TYPE", field("type")), Column("DATA", count("data")), AGE],
    "Namespace": [NAME, Column("STATUS", field("status.phase")), AGE],
    "Event": [
        Column("LAST SEEN", _last_seen), Column("TYPE", field("type")), Column("REASON", field("reason")),
        Column("OBJECT", involved), Column("MESSAGE", field("message")),
        Column("COUNT", field("count"), wide=True), Column("SOURCE", field("source.component"), wide=True),
    ],
}
DEFAULT_COLUMNS: list[Column] = [NAME, AGE]


def _cell(value: Any) -> str:
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def table_rows(info: ResourceInfo, objs: Iterable[Obj], wide: bool = False,
               all_namespaces: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and cells for ``objs``; a NAMESPACE column leads when listing every namespace."""
    columns = [c for c in COLUMNS.get(info.kind, DEFAULT_COLUMNS) if wide or not c.wide]
    header = [c.header for c in columns]
    if all_namespaces and info.namespaced:
        header.insert(0, "NAMESPACE")
    rows = []
    for obj in objs:
        row = [_cell(c.get(obj)) for c in columns]
        if all_namespaces and info.namespaced:
            row.insert(0, _cell(dig(obj, "metadata.namespace")))
        rows.append(row)
    return header, rows


def format_table(header: list[str], rows: list[list[str]], widths: list[int] | None = None,
                 show_header: bool = True) -> str:
    """Columns left-aligned, three spaces apart, as kubectl prints them."""
    all_rows = ([header] if show_header else []) + rows
    if widths is None:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in all_rows:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def column_widths(header: list[str], rows: list[list[str]]) -> list[int]:
    return [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]


def qualified_name(info: ResourceInfo, obj: Obj | str) -> str:
    """``machineclass.compute.ironcore.dev/name`` (``secret/name`` for core kinds), as kubectl names it."""
    name = obj if isinstance(obj, str) else dig(obj, "metadata.name")
    kind = f"{info.singular}.{info.group}" if info.group else info.singular
    return f"{kind}/{name}"


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True)


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


def as_list(info: ResourceInfo, items: list[Obj], resource_version: str = "") -> Obj:
    """A ``List`` object for ``-o yaml|json`` of several objects."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": resource_version},
            "items": items}


# -- describe ------------------------------------------------------------------------------------

def _indent(text: str, by: int = 2) -> str:
    pad = " " * by
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").splitlines())


def _kv(value: Any) -> str:
    if not value:
        return NONE
    if isinstance(value, dict):
        return "\n".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def describe(info: ResourceInfo, obj: Obj, events: list[Obj]) -> str:
    """kubectl-describe-like text: identity, metadata, spec/top-level fields, status, conditions, events."""
    md = obj.get("metadata") or {}
    out: list[str] = []

    def line(label: str, value: Any) -> None:
        text = _kv(value)
        first, *rest = text.splitlines() or [NONE]
        out.append(f"{label + ':':<20}{first}")
        out.extend(" " * 20 + r for r in rest)

    line("Name", md.get("name"))
    if info.namespaced:
        line("Namespace", md.get("namespace"))
    line("Labels", md.get("labels"))
    line("Annotations", md.get("annotations"))
    line("API Version", obj.get("apiVersion") or info.api_version)
    line("Kind", obj.get("kind") or info.kind)
    line("UID", md.get("uid"))
    line("Resource Version", md.get("resourceVersion"))
    line("Generation", md.get("generation"))
    line("Created", md.get("creationTimestamp"))
    if md.get("deletionTimestamp"):
        line("Deleting Since", md.get("deletionTimestamp"))
    line("Finalizers", md.get("finalizers"))
    if md.get("ownerReferences"):
        line("Owners", [f"{o.get('kind')}/{o.get('name')}" for o in md["ownerReferences"]])
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        if key == "data" and info.kind == "Secret":
            value = {k: f"<{len(str(v))} bytes base64>" for k, v in (value or {}).items()}
        out.append(f"{key[0].upper() + key[1:]}:")
        out.append(_indent(to_yaml(value)) if isinstance(value, dict | list) else f"  {value}")
    status = dict(obj.get("status") or {})
    conditions = status.pop("conditions", None) or []
    if status:
        out.append("Status:")
        out.append(_indent(to_yaml(status)))
    if conditions:
        out.append("Conditions:")
        header = ["Type", "Status", "Reason", "Message", "LastTransitionTime"]
        keys = ("type", "status", "reason", "message", "lastTransitionTime")
        rows = [[_cell(c.get(k)) for k in keys] for c in conditions]
        out.append(_indent(format_table(header, rows)))
    out.append("Events:" if events else f"{'Events:':<20}{NONE}")
    if events:
        header = ["Type", "Reason", "Age", "From", "Message"]
        rows = [[_cell(e.get("type")), _cell(e.get("reason")), _last_seen(e),
                 _cell(dig(e, "source.component") or e.get("reportingComponent")), _cell(e.get("message"))]
                for e in events]
        out.append(_indent(format_table(header, rows)))
    return "\n".join(out) + "\n"
