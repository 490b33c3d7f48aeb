"""``get``'s tables as the server prints them: the CLI asks for a ``meta.k8s.io/v1`` Table, as kubectl
does, and shows its columns, so it prints what the server it talks to serves (a newer server's
columns included) instead of columns built into the CLI.

``-o wide`` shows the columns of priority 1 too; listing every namespace puts a NAMESPACE column
first; listing several kinds names each row ``kind.group/name``. A server that answers a plain list
instead gets NAME and AGE, from the objects themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.columns import age
from ironpool.api.resources import ResourceInfo
from ironpool.cli.printers import cell, column_widths, format_table, qualified_name
from ironpool.client.rest import Client
from ironpool.client.wire import TABLE_ACCEPT

Obj = dict[str, Any]


@dataclass
class TablePrinter:
    """Prints the rows of one kind's Tables as they come (a list's pages, then a watch's events),
    with the header once and column widths fixed by the first rows."""

    info: ResourceInfo
    wide: bool = False
    all_namespaces: bool = False
    qualify: bool = False
    columns: list[Obj] = field(default_factory=list)
    widths: list[int] | None = None
    printed: int = 0

    def rows(self, table: Obj) -> tuple[list[str], list[tuple[Obj, list[str]]]]:
        """The header and ``(object metadata, cells)`` of each row of ``table`` (a Table, or a plain
        object or list from a server that does not print)."""
        if table.get("kind") != "Table":
            return self._plain(table)
        if table.get("columnDefinitions"):
            self.columns = list(table["columnDefinitions"])
        shown = [i for i, c in enumerate(self.columns) if self.wide or not c.get("priority")]
        header = [str(self.columns[i].get("name", "")).upper() for i in shown]
        out = []
        for row in table.get("rows") or []:
            cells = row.get("cells") or []
            meta = (row.get("object") or {}).get("metadata") or {}
            out.append((meta, [self._value(cells, i, meta) for i in shown]))
        return self._framed(header, out)

    def _value(self, cells: list[Any], index: int, meta: Obj) -> str:
        value = cell(cells[index] if index < len(cells) else None)
        if self.qualify and self.columns[index].get("format") == "name":
            return qualified_name(self.info, str(meta.get("name") or value))
        return value

    def _plain(self, body: Obj) -> tuple[list[str], list[tuple[Obj, list[str]]]]:
        items = body.get("items") if "items" in body else [body]
        out = []
        for obj in items or []:
            meta = obj.get("metadata") or {}
            name = qualified_name(self.info, obj) if self.qualify else cell(meta.get("name"))
            out.append((meta, [name, age(meta.get("creationTimestamp"))]))
        return self._framed(["NAME", "AGE"], out)

    def _framed(self, header: list[str], rows: list[tuple[Obj, list[str]]]
                ) -> tuple[list[str], list[tuple[Obj, list[str]]]]:
        if self.all_namespaces and self.info.namespaced:
            header = ["NAMESPACE", *header]
            rows = [(meta, [cell(meta.get("namespace")), *cells]) for meta, cells in rows]
        return header, rows

    def render(self, header: list[str], rows: list[list[str]]) -> str | None:
        """The lines for ``rows`` (the header before the first ones); None when there are none."""
        if not rows:
            return None
        if self.widths is None:
            self.widths = column_widths(header, rows)
        text = format_table(header, rows, self.widths, show_header=not self.printed)
        self.printed += len(rows)
        return text


def list_tables(client: Client, info: ResourceInfo, namespace: str | None, label_selector: str | None,
                field_selector: str | None, page_size: int = 500) -> Iterator[Obj]:
    """The server's Tables of a list, one per page; the last one's ``metadata.resourceVersion`` is
    where a watch goes on from."""
    token: str | None = None
    while True:
        table = client.table_raw(info, namespace, label_selector, field_selector, page_size, token)
        yield table
        token = (table.get("metadata") or {}).get("continue") or None
        if not token:
            return


def get_table(client: Client, info: ResourceInfo, name: str, namespace: str | None) -> Obj:
    """One object as the server prints it (a Table of one row)."""
    return client.get_raw(info, name, namespace, accept=TABLE_ACCEPT)
