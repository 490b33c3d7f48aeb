"""``ironpool get KIND[,KIND...] [NAME...]``: objects as the server prints them (a Table, as kubectl asks
for), or as YAML, JSON or ``kind/name``; ``-w`` goes on printing changes as they happen."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ironpool.api.errors import NotFound
from ironpool.api.resources import ResourceInfo
from ironpool.cli.common import parse_duration
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import CommandError, format_api_error, handle_errors
from ironpool.cli.objects import list_all, parse_kinds, watch_events
from ironpool.cli.printers import as_list, column_widths, qualified_name, to_json, to_yaml
from ironpool.cli.tables import TablePrinter, get_table, list_tables
from ironpool.client.rest import Client
from ironpool.client.wire import TABLE_ACCEPT, Obj

OUTPUTS = ["wide", "yaml", "json", "name"]


def _matches(meta: Obj, names: tuple[str, ...]) -> bool:
    return not names or meta.get("name") in names


def _echo_objects(info: ResourceInfo, objs: list[Obj], output: str, rv: str, single: bool) -> None:
    if output == "yaml":
        click.echo(to_yaml(objs[0] if single else as_list(info, objs, rv)), nl=False)
    elif output == "json":
        click.echo(to_json(objs[0] if single else as_list(info, objs, rv)))
    else:
        for obj in objs:
            click.echo(qualified_name(info, obj))


def _print_table(client: Client, printer: TablePrinter, ns: str | None, names: tuple[str, ...],
                 selector: str | None, field_selector: str | None, by_name: bool) -> tuple[str, int]:
    """Print one kind's table; returns the revision a watch goes on from and the names not found."""
    info = printer.info
    tables: list[Obj] = []
    missing = 0
    if by_name:
        for name in names:
            try:
                tables.append(get_table(client, info, name, ns))
            except NotFound as exc:
                missing += 1
                click.echo(format_api_error(exc), err=True)
    else:
        tables = list(list_tables(client, info, ns, selector, field_selector))
    header: list[str] = []
    rows: list[list[str]] = []
    for table in tables:
        header, found = printer.rows(table)
        rows += [cells for meta, cells in found if _matches(meta, names)]
    text = printer.render(header, rows)
    if text is not None:
        click.echo(text)
    rv = "" if by_name else str((tables[-1].get("metadata") or {}).get("resourceVersion") or "")
    return rv, missing


@click.command()
@click.argument("kinds")
@click.argument("names", nargs=-1)
@click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
@click.option("-l", "--selector", default=None, help="Label selector, e.g. tier=gold,zone!=a.")
@click.option("--field-selector", default=None, help="Field selector, e.g. spec.machinePoolRef.name=p1.")
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default=None, help="Output format.")
@click.option("-w", "--watch", is_flag=True, help="After listing, print changes as they happen.")
@click.option("--watch-timeout", default=None, help="With -w: stop watching after this long (e.g. 30s).")
@connection_options()
@handle_errors
def get(kinds: str, names: tuple[str, ...], all_namespaces: bool, selector: str | None,
        field_selector: str | None, output: str | None, watch: bool, watch_timeout: str | None,
        server: str | None, token: str | None, token_file: Path | None, namespace: str | None) -> None:
    """Show objects of KINDS (singular, plural or short names, comma-separated), all or by NAME."""
    if "/" in kinds:
        kinds, _, name = kinds.partition("/")
        names = (name, *names)
    infos = parse_kinds(kinds)
    if len(infos) > 1 and (names or watch):
        raise CommandError("name objects or watch with one kind at a time (got a list of kinds)")
    config = client_config(server, token, token_file, namespace)
    deadline = time.monotonic() + parse_duration(watch_timeout, "--watch-timeout") if watch_timeout else None
    missing = 0
    shown = 0
    with Client(config) as client:
        for info in infos:
            ns = None if all_namespaces or not info.namespaced else config.namespace
            by_name = bool(names) and not watch
            if output in (None, "wide"):
                printer = TablePrinter(info, output == "wide", all_namespaces, qualify=len(infos) > 1)
                if shown:
                    click.echo("")  # a blank line between the kinds' tables, as kubectl prints them
                where = (ns or config.namespace) if by_name else ns
                rv, not_found = _print_table(client, printer, where, names, selector, field_selector, by_name)
                missing += not_found
                shown += printer.printed
                if watch:
                    _watch_table(client, printer, ns, selector, field_selector, names, rv, deadline)
                continue
            rv = ""
            if by_name:
                objs = []
                for name in names:
                    try:
                        objs.append(client.get_raw(info, name, ns or config.namespace))
                    except NotFound as exc:
                        missing += 1
                        click.echo(format_api_error(exc), err=True)
            else:
                objs, rv = list_all(client, info, ns, selector, field_selector)
                objs = [o for o in objs if _matches(o.get("metadata") or {}, names)]
            shown += len(objs)
            if objs or not names:
                _echo_objects(info, objs, str(output), rv, single=len(names) == 1 and len(objs) == 1)
            if watch:
                _watch_objects(client, info, ns, selector, field_selector, names, rv, str(output), deadline)
        if not shown and not missing and not watch and output in (None, "wide"):
            where = f" in {config.namespace} namespace" if not all_namespaces and infos[0].namespaced else ""
            click.echo(f"No resources found{where}.", err=True)
    if missing:
        sys.exit(1)


def _watch_table(client: Client, printer: TablePrinter, ns: str | None, selector: str | None,
                 field_selector: str | None, names: tuple[str, ...], rv: str, deadline: float | None) -> None:
    for _, table in watch_events(client, printer.info, ns, selector, field_selector, rv, deadline,
                                 accept=TABLE_ACCEPT):
        header, found = printer.rows(table)
        rows = [cells for meta, cells in found if _matches(meta, names)]
        if printer.widths is None and rows:  # nothing listed before: leave room for what comes later
            printer.widths = [max(12, w) for w in column_widths(header, rows)]
        text = printer.render(header, rows)
        if text is not None:
            click.echo(text)
            sys.stdout.flush()


def _watch_objects(client: Client, info: ResourceInfo, ns: str | None, selector: str | None,
                   field_selector: str | None, names: tuple[str, ...], rv: str, output: str,
                   deadline: float | None) -> None:
    for event_type, obj in watch_events(client, info, ns, selector, field_selector, rv, deadline):
        if not _matches(obj.get("metadata") or {}, names):
            continue
        if output == "yaml":
            click.echo("---\n" + to_yaml(obj), nl=False)
        elif output == "json":
            click.echo(to_json(obj))
        else:
            click.echo(f"{qualified_name(info, obj)} {event_type.lower()}")
        sys.stdout.flush()

