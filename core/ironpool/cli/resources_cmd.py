"""``ironpool apply | get | describe | delete | wait``: kubectl-like commands over ``ironpool.client``.

``apply`` is create-or-update: an existing object gets the manifest as a JSON merge patch (fields the
manifest leaves out are kept, status is never touched). It first sends the patch as a server-side dry
run and compares the result with the stored object, so re-applying an unchanged manifest writes
nothing and reports ``unchanged``. ``apply --server-side`` leaves the merge to the server's
server-side apply instead, which tracks field owners and refuses to change another manager's fields
unless ``--force-conflicts``.
"""

from __future__ import annotations

import sys
import time

import click

from ironpool.api.errors import AlreadyExists, ApiError, NotFound
from ironpool.api.resources import ResourceInfo, resolve
from ironpool.cli.config import (
    CommandError,
    connection_options,
    format_api_error,
    handle_errors,
    load_config,
    make_client,
    parse_duration,
)
from ironpool.cli.manifests import Manifest, load_manifests
from ironpool.cli.objects import (
    Target,
    WaitTimeout,
    list_all,
    manifest_target,
    parse_condition,
    parse_targets,
    wait_for,
    watch_events,
)
from ironpool.cli.printers import (
    as_list,
    column_widths,
    dig,
    format_table,
    qualified_name,
    table_rows,
    to_json,
    to_yaml,
)
from ironpool.cli.printers import describe as describe_text
from ironpool.client.rest import Client
from ironpool.client.wire import Obj

OUTPUTS = ["wide", "yaml", "json", "name"]


# -- helpers -----------------------------------------------------------------------------------------

_IDENTITY_KEYS = ("apiVersion", "kind", "metadata", "status")
_PATCHABLE_META = ("labels", "annotations", "finalizers", "ownerReferences")


def apply_patch(obj: Obj) -> Obj:
    """The merge patch ``apply`` sends for an existing object: the manifest minus identity and status."""
    patch = {k: v for k, v in obj.items() if k not in _IDENTITY_KEYS}
    md = obj.get("metadata") or {}
    meta_patch = {k: md[k] for k in _PATCHABLE_META if k in md}
    if meta_patch:
        patch["metadata"] = meta_patch
    return patch


def _comparable(obj: Obj) -> Obj:
    volatile = ("resourceVersion", "managedFields")
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in volatile}
    return {**obj, "metadata": md}


def apply_one(client: Client, target: Target, m: Manifest, dry_run: bool) -> str:
    """Create or update one object; returns ``created``, ``configured`` or ``unchanged``."""
    try:
        current = client.get_raw(target.info, target.name, target.namespace)
    except NotFound:
        body = {k: v for k, v in m.obj.items() if k != "status"}
        try:
            client.create_raw(target.info, body, target.namespace, dry_run=dry_run)
            return "created"
        except AlreadyExists:
            current = client.get_raw(target.info, target.name, target.namespace)
    patch = apply_patch(m.obj)
    preview = client.patch_raw(target.info, target.name, patch, target.namespace, dry_run=True)
    if _comparable(preview) == _comparable(current):
        return "unchanged"
    if not dry_run:
        client.patch_raw(target.info, target.name, patch, target.namespace)
    return "configured"


def _echo_objects(info: ResourceInfo, objs: list[Obj], output: str | None, rv: str, single: bool) -> None:
    if output == "yaml":
        click.echo(to_yaml(objs[0] if single else as_list(info, objs, rv)), nl=False)
    elif output == "json":
        click.echo(to_json(objs[0] if single else as_list(info, objs, rv)))
    elif output == "name":
        for obj in objs:
            click.echo(qualified_name(info, obj))


def _matches_names(obj: Obj, names: tuple[str, ...]) -> bool:
    return not names or dig(obj, "metadata.name") in names


# -- apply --------------------------------------------------------------------------------------------

def server_side_apply(client: Client, target: Target, m: Manifest, field_manager: str, force: bool,
                      dry_run: bool) -> str:
    """Apply one manifest on the server as ``field_manager``; ``serverside-applied`` as kubectl says."""
    body = {k: v for k, v in m.obj.items() if k != "status"}
    client.apply_raw(target.info, target.name, body, field_manager, target.namespace, force=force,
                     dry_run=dry_run)
    return "serverside-applied"


@click.command()
@click.option("-f", "--filename", "filenames", multiple=True, required=True,
              help="Manifest file, directory (recursive) or - for stdin; repeatable.")
@click.option("--dry-run", is_flag=True, help="Ask the server what would change; write nothing.")
@click.option("--server-side", is_flag=True,
              help="Server-side apply: the server merges the manifest and tracks who owns which field.")
@click.option("--field-manager", default="ironpool", show_default=True,
              help="With --server-side: the name the fields are owned under.")
@click.option("--force-conflicts", is_flag=True,
              help="With --server-side: take over fields another manager owns instead of failing.")
@connection_options
@handle_errors
def apply(filenames: tuple[str, ...], dry_run: bool, server_side: bool, field_manager: str,
          force_conflicts: bool, server: str | None, token: str | None, namespace: str | None) -> None:
    """Create or update the objects in manifests (multi-document YAML or JSON)."""
    if force_conflicts and not server_side:
        raise CommandError("--force-conflicts only works with --server-side")
    manifests = load_manifests(filenames)
    config = load_config(server, token, namespace)
    failed = 0
    suffix = " (server dry run)" if dry_run else ""
    with make_client(config) as client:
        for m in manifests:
            label = f"{m.obj.get('kind')}/{m.name}"
            try:
                target = manifest_target(m, config.namespace, namespace)
                label = target.label
                if server_side:
                    result = server_side_apply(client, target, m, field_manager, force_conflicts, dry_run)
                else:
                    result = apply_one(client, target, m, dry_run)
            except (ApiError, CommandError) as exc:
                failed += 1
                detail = format_api_error(exc) if isinstance(exc, ApiError) else f"error: {exc}"
                click.echo(f"error applying {label} from {m.where}:\n{detail}", err=True)
                continue
            click.echo(f"{target.label} {result}{suffix}")
    if failed:
        sys.exit(1)


# -- get ------------------------------------------------------------------------------------------------

@click.command()
@click.argument("kind")
@click.argument("names", nargs=-1)
@click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
@click.option("-l", "--selector", default=None, help="Label selector, e.g. tier=gold,zone!=a.")
@click.option("--field-selector", default=None, help="Field selector, e.g. spec.machinePoolRef.name=p1.")
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default=None, help="Output format.")
@click.option("-w", "--watch", is_flag=True, help="After listing, print changes as they happen.")
@click.option("--watch-timeout", default=None, help="With -w: stop watching after this long (e.g. 30s).")
@connection_options
@handle_errors
def get(kind: str, names: tuple[str, ...], all_namespaces: bool, selector: str | None,
        field_selector: str | None, output: str | None, watch: bool, watch_timeout: str | None,
        server: str | None, token: str | None, namespace: str | None) -> None:
    """Show objects of KIND (singular, plural or short name), all or by NAME."""
    if "/" in kind:
        kind, _, name = kind.partition("/")
        names = (name, *names)
    info = resolve(kind)
    config = load_config(server, token, namespace)
    ns: str | None = None if all_namespaces or not info.namespaced else config.namespace
    deadline = time.monotonic() + parse_duration(watch_timeout, "--watch-timeout") if watch_timeout else None
    with make_client(config) as client:
        if names and not watch:
            objs: list[Obj] = []
            errors = 0
            for name in names:
                try:
                    objs.append(client.get_raw(info, name, ns or config.namespace))
                except NotFound as exc:
                    errors += 1
                    click.echo(format_api_error(exc), err=True)
            rv = ""
        else:
            objs, rv = list_all(client, info, ns, selector, field_selector)
            objs = [o for o in objs if _matches_names(o, names)]
            errors = 0
        wide = output == "wide"
        widths: list[int] | None = None
        if output in (None, "wide"):
            header, rows = table_rows(info, objs, wide, all_namespaces)
            if rows:
                widths = column_widths(header, rows)
                click.echo(format_table(header, rows, widths))
            elif not watch and not errors:
                where = f" in {ns} namespace" if ns else ""
                click.echo(f"No resources found{where}.", err=True)
        elif objs or not names:
            _echo_objects(info, objs, output, rv, single=len(names) == 1 and len(objs) == 1)
        if watch:
            _watch_and_print(client, info, ns, selector, field_selector, names, rv, output, all_namespaces,
                             widths, deadline)
    if errors:
        sys.exit(1)


def _watch_and_print(client: Client, info: ResourceInfo, ns: str | None, selector: str | None,
                     field_selector: str | None, names: tuple[str, ...], rv: str, output: str | None,
                     all_namespaces: bool, widths: list[int] | None, deadline: float | None) -> None:
    header_done = widths is not None
    for event_type, obj in watch_events(client, info, ns, selector, field_selector, rv, deadline):
        if not _matches_names(obj, names):
            continue
        if output in (None, "wide"):
            header, rows = table_rows(info, [obj], output == "wide", all_namespaces)
            if widths is None:
                widths = [max(w, 12) for w in column_widths(header, rows)]
            click.echo(format_table(header, rows, widths, show_header=not header_done))
            header_done = True
        elif output == "yaml":
            click.echo("---\n" + to_yaml(obj), nl=False)
        elif output == "json":
            click.echo(to_json(obj))
        else:
            click.echo(f"{qualified_name(info, obj)} {event_type.lower()}")
        sys.stdout.flush()


# -- describe ------------------------------------------------------------------------------------------

def _events_for(client: Client, info: ResourceInfo, obj: Obj) -> list[Obj]:
    events_info = resolve("events")
    ns = dig(obj, "metadata.namespace")
    try:
        events, _ = list_all(client, events_info, ns, None, None)
    except ApiError:
        return []  # describing must not fail because events are not readable

    def ours(ev: Obj) -> bool:
        ref = ev.get("involvedObject") or {}
        return (ref.get("kind") == info.kind and ref.get("name") == dig(obj, "metadata.name")
                and (not ns or ref.get("namespace") in (None, ns)))

    found = [e for e in events if ours(e)]
    found.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return found


@click.command()
@click.argument("args", nargs=-1, required=True)
@connection_options
@handle_errors
def describe(args: tuple[str, ...], server: str | None, token: str | None, namespace: str | None) -> None:
    """Show one object in detail: fields, conditions and its Events."""
    config = load_config(server, token, namespace)
    targets = parse_targets(args, config.namespace)
    with make_client(config) as client:
        for i, target in enumerate(targets):
            obj = client.get_raw(target.info, target.name, target.namespace)
            if i:
                click.echo("")
            click.echo(describe_text(target.info, obj, _events_for(client, target.info, obj)), nl=False)


# -- waiting -------------------------------------------------------------------------------------------

@click.command()
@click.argument("args", nargs=-1, required=True)
@click.option("--for", "for_", required=True,
              help="delete | condition=Ready[=True] | jsonpath={.status.state}=Running")
@click.option("--timeout", default="30s", show_default=True, help="How long to wait (30s, 5m, ...).")
@connection_options
@handle_errors
def wait(args: tuple[str, ...], for_: str, timeout: str, server: str | None, token: str | None,
         namespace: str | None) -> None:
    """Wait until objects (KIND/NAME or KIND NAME...) meet a condition; uses a watch, not polling."""
    predicate = parse_condition(for_)
    deadline = time.monotonic() + parse_duration(timeout)
    config = load_config(server, token, namespace)
    targets = parse_targets(args, config.namespace)
    with make_client(config) as client:
        for target in targets:
            try:
                wait_for(client, target, predicate, deadline)
            except WaitTimeout as exc:
                raise CommandError(str(exc)) from exc
            click.echo(f"{target.label} condition met")


# -- delete ----------------------------------------------------------------------------------------------

@click.command()
@click.argument("args", nargs=-1)
@click.option("-f", "--filename", "filenames", multiple=True, help="Delete the objects in these manifests.")
@click.option("--wait/--no-wait", "wait_", default=False, help="Wait until the objects are gone.")
@click.option("--timeout", default="60s", show_default=True, help="With --wait: how long to wait.")
@click.option("--ignore-not-found", is_flag=True, help="Treat a missing object as deleted.")
@connection_options
@handle_errors
def delete(args: tuple[str, ...], filenames: tuple[str, ...], wait_: bool, timeout: str,
           ignore_not_found: bool, server: str | None, token: str | None, namespace: str | None) -> None:
    """Delete objects by KIND NAME..., KIND/NAME... or -f FILE|DIR."""
    if bool(args) == bool(filenames):
        raise CommandError("specify either KIND NAME... / KIND/NAME... or -f FILE|DIR, not both or neither")
    deadline = time.monotonic() + parse_duration(timeout)
    config = load_config(server, token, namespace)
    if filenames:
        targets = [manifest_target(m, config.namespace, namespace) for m in load_manifests(filenames)]
    else:
        targets = parse_targets(args, config.namespace)
    failed = 0
    with make_client(config) as client:
        deleted: list[Target] = []
        for target in targets:
            try:
                client.delete_raw(target.info, target.name, target.namespace)
            except NotFound as exc:
                if not ignore_not_found:
                    failed += 1
                    click.echo(format_api_error(exc), err=True)
                continue
            except ApiError as exc:
                failed += 1
                click.echo(format_api_error(exc), err=True)
                continue
            click.echo(f"{target.label} deleted")
            deleted.append(target)
        if wait_:
            gone = parse_condition("delete")
            for target in deleted:
                try:
                    wait_for(client, target, gone, deadline)
                except WaitTimeout as exc:
                    raise CommandError(str(exc)) from exc
    if failed:
        sys.exit(1)
