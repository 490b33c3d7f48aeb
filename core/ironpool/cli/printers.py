"""Output of ``get`` and ``describe``: aligned tables (their rows come from the server's Table,
:mod:`ironpool.cli.tables`), YAML, JSON, ``kind/name`` and describe's text.

Printers work on the wire form (plain dicts), so they print exactly what the server sent.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from ironpool.api.columns import NONE, dig, last_seen
from ironpool.api.resources import ResourceInfo

Obj = dict[str, Any]


def cell(value: Any) -> str:
    """A value as a table cell: ``<none>`` for nothing, booleans in lower case."""
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


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
        rows = [[cell(c.get(k)) for k in keys] for c in conditions]
        out.append(_indent(format_table(header, rows)))
    out.append("Events:" if events else f"{'Events:':<20}{NONE}")
    if events:
        header = ["Type", "Reason", "Age", "From", "Message"]
        rows = [[cell(e.get("type")), cell(e.get("reason")), last_seen(e),
                 cell(dig(e, "source.component") or e.get("reportingComponent")), cell(e.get("message"))]
                for e in events]
        out.append(_indent(format_table(header, rows)))
    return "\n".join(out) + "\n"
