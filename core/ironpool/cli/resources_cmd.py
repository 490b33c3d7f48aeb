"""``ironpool apply | describe | delete | wait``: kubectl-like commands over ``ironpool.client``.

``apply`` declares each manifest through :mod:`ironpool.client.declare`, as the Ansible collection
and the Pulumi provider do: a new object is created, an existing one gets the manifest as a JSON merge
patch (fields the manifest leaves out are kept, status and server-owned metadata are never touched),
sent first as a server-side dry run, so re-applying an unchanged manifest writes nothing and reports
``unchanged``. ``apply --server-side`` leaves the merge to the server's server-side apply instead,
which tracks field owners and refuses to change another manager's fields unless
``--force-conflicts``. ``wait`` and ``delete --wait`` wait through :mod:`ironpool.client.wait`,
printing on stderr where each object is as it changes (for a Machine or Volume not placed yet, the
scheduler's reason).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ironpool.api.errors import AlreadyExists, ApiError, NotFound
from ironpool.api.resources import ResourceInfo, resolve
from ironpool.cli.common import parse_duration
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import CommandError, format_api_error, handle_errors
from ironpool.cli.manifests import Manifest, load_manifests
from ironpool.cli.objects import Target, list_all, manifest_target, parse_condition, parse_targets
from ironpool.cli.printers import describe as describe_text
from ironpool.cli.printers import dig, to_json, to_yaml
from ironpool.client.declare import FIELD_MANAGERS, Declarer
from ironpool.client.readiness import Readiness, Verdict, gone
from ironpool.client.rest import Client
from ironpool.client.wait import Gone, Progress, Unschedulable, WaitTimeout, wait_for_one
from ironpool.client.wire import Obj

FIELD_MANAGER = FIELD_MANAGERS["cli"]
_WORDS = {"created": "created", "updated": "configured", "unchanged": "unchanged"}


# -- apply --------------------------------------------------------------------------------------------

def manifest_body(target: Target, m: Manifest) -> Obj:
    """What is sent of a manifest: no status, and its apiVersion as the API serves it (a group spelt
    with capitals, ``compute.OpenKCM.dev/v1alpha1``, in lower case, as every Kubernetes API names it)."""
    body = {k: v for k, v in m.obj.items() if k != "status"}
    body["apiVersion"] = target.info.api_version
    return body


def apply_one(client: Client, target: Target, m: Manifest, dry_run: bool) -> str:
    """Create or update one object; returns ``created``, ``configured`` or ``unchanged``."""
    declarer = Declarer(client, target.info, target.namespace, FIELD_MANAGER, dry_run=dry_run)
    body = manifest_body(target, m)
    current = declarer.get(target.name)
    try:
        outcome = declarer.present(body, current)
    except AlreadyExists:  # made by someone else since we looked
        current = declarer.get(target.name)
        if current is None:
            raise
        outcome = declarer.update(body, current)
    return _WORDS[outcome.action]


def server_side_apply(client: Client, target: Target, m: Manifest, field_manager: str, force: bool,
                      dry_run: bool) -> str:
    """Apply one manifest on the server as ``field_manager``; ``serverside-applied`` as kubectl says."""
    body = manifest_body(target, m)
    client.apply_raw(target.info, target.name, body, field_manager, target.namespace, force=force,
                     dry_run=dry_run)
    return "serverside-applied"


@click.command()
@click.option("-f", "--filename", "filenames", multiple=True, required=True,
              help="Manifest file, directory (recursive) or - for stdin; repeatable.")
@click.option("--dry-run", is_flag=True, help="Ask the server what would change; write nothing.")
@click.option("--server-side", is_flag=True,
              help="Server-side apply: the server merges the manifest and tracks who owns which field.")
@click.option("--field-manager", default=FIELD_MANAGER, show_default=True,
              help="With --server-side: the name the fields are owned under.")
@click.option("--force-conflicts", is_flag=True,
              help="With --server-side: take over fields another manager owns instead of failing.")
@connection_options()
@handle_errors
def apply(filenames: tuple[str, ...], dry_run: bool, server_side: bool, field_manager: str,
          force_conflicts: bool, server: str | None, token: str | None, token_file: Path | None,
          namespace: str | None) -> None:
    """Create or update the objects in manifests (multi-document YAML or JSON)."""
    if force_conflicts and not server_side:
        raise CommandError("--force-conflicts only works with --server-side")
    manifests = load_manifests(filenames)
    config = client_config(server, token, token_file, namespace)
    failed = 0
    suffix = " (server dry run)" if dry_run else ""
    with Client(config) as client:
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
@connection_options()
@handle_errors
def describe(args: tuple[str, ...], server: str | None, token: str | None, token_file: Path | None,
             namespace: str | None) -> None:
    """Show one object in detail: fields, conditions and its Events."""
    config = client_config(server, token, token_file, namespace)
    targets = parse_targets(args, config.namespace)
    with Client(config) as client:
        for i, target in enumerate(targets):
            obj = client.get_raw(target.info, target.name, target.namespace)
            if i:
                click.echo("")
            click.echo(describe_text(target.info, obj, _events_for(client, target.info, obj)), nl=False)


# -- waiting -------------------------------------------------------------------------------------------

def _progress(target: Target) -> Progress:
    def show(_name: str, verdict: Verdict) -> None:
        if not verdict.done:
            click.echo(f"{target.label}: {verdict.progress}", err=True)
    return show


def await_target(client: Client, target: Target, readiness: Readiness, deadline: float,
                 fail_unschedulable: bool = False) -> Obj | None:
    """Wait for one target, showing its progress on stderr; a failed wait is a CommandError saying
    where the object was last."""
    try:
        return wait_for_one(client, target.info, target.namespace, target.name, readiness, deadline,
                            progress=_progress(target),
                            fail_unschedulable=fail_unschedulable)
    except WaitTimeout as exc:
        last = next(iter(exc.pending.values()), None)
        where = f": {last.progress}" if last else ""
        raise CommandError(f"timed out waiting for the condition on {target.info.plural}/{target.name}"
                           f"{where}") from None
    except (Unschedulable, Gone) as exc:
        raise CommandError(f"{target.label}: {exc}") from None


@click.command()
@click.argument("args", nargs=-1, required=True)
@click.option("--for", "for_", required=True,
              help="delete | running | scheduled | available | ready | condition=Ready[=True] | "
                   "jsonpath={.status.state}=Running")
@click.option("--timeout", default="30s", show_default=True, help="How long to wait (30s, 5m, ...).")
@click.option("--fail-on-unschedulable", is_flag=True,
              help="Fail as soon as the scheduler says no pool offers the class or matches the selector "
                   "(instead of waiting for the fleet to change).")
@click.option("-o", "--output", type=click.Choice(["yaml", "json", "name"]), default=None,
              help="Print the objects once they meet the condition.")
@connection_options()
@handle_errors
def wait(args: tuple[str, ...], for_: str, timeout: str, fail_on_unschedulable: bool, output: str | None,
         server: str | None, token: str | None, token_file: Path | None, namespace: str | None) -> None:
    """Wait until objects (KIND/NAME or KIND NAME...) meet a condition; uses a watch, not polling.

    Named conditions are the readiness the Ansible collection and the Pulumi provider wait for too:
    a Machine is `running` once its poollet acted on its current spec, it is in its power state and
    its volumes and network interfaces are attached; a Volume is `available` at its size."""
    deadline = time.monotonic() + parse_duration(timeout)
    config = client_config(server, token, token_file, namespace)
    targets = parse_targets(args, config.namespace)
    readiness = {t.info.kind: parse_condition(for_, t.info) for t in targets}
    with Client(config) as client:
        for target in targets:
            obj = await_target(client, target, readiness[target.info.kind], deadline, fail_on_unschedulable)
            if output == "yaml":
                click.echo(to_yaml(obj), nl=False)
            elif output == "json":
                click.echo(to_json(obj))
            elif output == "name":
                click.echo(target.label)
            else:
                click.echo(f"{target.label} condition met")


# -- delete ----------------------------------------------------------------------------------------------

@click.command()
@click.argument("args", nargs=-1)
@click.option("-f", "--filename", "filenames", multiple=True, help="Delete the objects in these manifests.")
@click.option("--wait/--no-wait", "wait_", default=False, help="Wait until the objects are gone.")
@click.option("--timeout", default="60s", show_default=True, help="With --wait: how long to wait.")
@click.option("--ignore-not-found", is_flag=True, help="Treat a missing object as deleted.")
@connection_options()
@handle_errors
def delete(args: tuple[str, ...], filenames: tuple[str, ...], wait_: bool, timeout: str,
           ignore_not_found: bool, server: str | None, token: str | None, token_file: Path | None,
           namespace: str | None) -> None:
    """Delete objects by KIND NAME..., KIND/NAME... or -f FILE|DIR."""
    if bool(args) == bool(filenames):
        raise CommandError("specify either KIND NAME... / KIND/NAME... or -f FILE|DIR, not both or neither")
    deadline = time.monotonic() + parse_duration(timeout)
    config = client_config(server, token, token_file, namespace)
    if filenames:
        targets = [manifest_target(m, config.namespace, namespace) for m in load_manifests(filenames)]
    else:
        targets = parse_targets(args, config.namespace)
    failed = 0
    with Client(config) as client:
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
            for target in deleted:
                await_target(client, target, gone, deadline)
    if failed:
        sys.exit(1)

