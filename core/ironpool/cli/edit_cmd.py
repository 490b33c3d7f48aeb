"""``ironpool create namespace | label | annotate | patch``: the kubectl verbs that change one field of
an object without a manifest.

``label`` and ``annotate`` take ``KEY=VALUE`` to set and ``KEY-`` to remove, and refuse to change a
value that is set unless ``--overwrite``; ``patch`` sends a strategic (the default, as kubectl) or a
JSON merge patch. Each writes as the CLI's field manager and prints what kubectl prints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import yaml

from ironpool.api.resources import resolve
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import CommandError, handle_errors
from ironpool.cli.objects import Target, parse_targets
from ironpool.cli.printers import qualified_name
from ironpool.client.declare import FIELD_MANAGERS
from ironpool.client.rest import Client
from ironpool.client.wire import MERGE_PATCH, STRATEGIC_PATCH, Obj

FIELD_MANAGER = FIELD_MANAGERS["cli"]
_PATCH_TYPES = {"strategic": STRATEGIC_PATCH, "merge": MERGE_PATCH}
_CHANGE = re.compile(r"([^=\s]+)=(.*)|([^=\s]+)-")


def _suffix(dry_run: bool) -> str:
    return " (server dry run)" if dry_run else ""


@click.group()
def create() -> None:
    """Create an object from the command line (`ironpool apply -f` takes manifests)."""


@create.command("namespace")
@click.argument("name")
@click.option("--dry-run", is_flag=True, help="Ask the server whether it would be created; write nothing.")
@connection_options(namespace=False)
@handle_errors
def create_namespace(name: str, dry_run: bool, server: str | None, token: str | None,
                     token_file: Path | None) -> None:
    """Create the Namespace NAME."""
    config = client_config(server, token, token_file)
    info = resolve("namespaces")
    with Client(config) as client:
        client.create_raw(info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                          dry_run=dry_run, field_manager=FIELD_MANAGER)
    click.echo(f"{qualified_name(info, name)} created{_suffix(dry_run)}")


def split_changes(args: tuple[str, ...], what: str) -> tuple[tuple[str, ...], dict[str, str | None]]:
    """``KIND NAME... KEY=VALUE... KEY-...``: the object arguments, and each key's new value (None:
    remove it). The first argument that sets or removes a key ends the objects."""
    objects: list[str] = []
    changes: dict[str, str | None] = {}
    for i, arg in enumerate(args):
        # Object names never hold "=" nor end with "-" (DNS names): anything else that does is a change.
        if not changes and (i == 0 or not ("=" in arg or arg.endswith("-"))):
            objects.append(arg)
            continue
        match = _CHANGE.fullmatch(arg)
        if match is None:
            raise CommandError(f"{arg!r}: expected KEY=VALUE or KEY- after the first {what}")
        key = match.group(1) or match.group(3)
        if key in changes:
            raise CommandError(f"{what} {key!r} is given twice")
        changes[key] = match.group(2) if match.group(1) else None
    if not changes:
        raise CommandError(f"give at least one {what} to set (KEY=VALUE) or remove (KEY-)")
    return tuple(objects), changes


def _edit_metadata(field: str, verb: str, args: tuple[str, ...], overwrite: bool, dry_run: bool,
                   server: str | None, token: str | None, token_file: Path | None,
                   namespace: str | None) -> None:
    objects, changes = split_changes(args, field[:-1])
    config = client_config(server, token, token_file, namespace)
    targets = parse_targets(objects, config.namespace)
    with Client(config) as client:
        for target in targets:
            current = client.get_raw(target.info, target.name, target.namespace)
            have = (current.get("metadata") or {}).get(field) or {}
            for key, value in changes.items():
                if value is not None and key in have and have[key] != value and not overwrite:
                    raise CommandError(f"{target.label}: {key!r} already has a value ({have[key]}), and "
                                       f"--overwrite is false")
            if all(have.get(k) == v for k, v in changes.items()):
                click.echo(f"{target.label} not {verb}{_suffix(dry_run)}")
                continue
            patch = {"metadata": {field: changes,
                                  "resourceVersion": (current.get("metadata") or {}).get("resourceVersion")}}
            client.patch_raw(target.info, target.name, patch, target.namespace, dry_run=dry_run,
                             field_manager=FIELD_MANAGER)
            click.echo(f"{target.label} {verb}{_suffix(dry_run)}")


def _metadata_command(name: str, field: str, verb: str, doc: str) -> click.Command:
    """``label`` or ``annotate``: set and remove keys of ``metadata.<field>``."""

    @click.command(name, help=doc)
    @click.argument("args", nargs=-1, required=True)
    @click.option("--overwrite", is_flag=True, help="Change a value that is set already.")
    @click.option("--dry-run", is_flag=True, help="Ask the server what would change; write nothing.")
    @connection_options()
    @handle_errors
    def command(args: tuple[str, ...], overwrite: bool, dry_run: bool, server: str | None, token: str | None,
                token_file: Path | None, namespace: str | None) -> None:
        _edit_metadata(field, verb, args, overwrite, dry_run, server, token, token_file, namespace)

    return command


_OBJECTS_THEN_KEYS = "KIND NAME... or KIND/NAME..., then KEY=VALUE to set and KEY- to remove."
label = _metadata_command("label", "labels", "labeled",
                          f"Set or remove labels of objects: {_OBJECTS_THEN_KEYS}")
annotate = _metadata_command("annotate", "annotations", "annotated",
                             f"Set or remove annotations of objects: {_OBJECTS_THEN_KEYS}")


def _patch_body(text: str) -> Obj:
    try:
        body: Any = yaml.safe_load(text)  # JSON is YAML; kubectl takes either
    except yaml.YAMLError as exc:
        raise CommandError(f"--patch: not JSON or YAML: {exc}") from None
    if not isinstance(body, dict):
        raise CommandError(f"--patch: must be an object, got {type(body).__name__}")
    return body


@click.command()
@click.argument("args", nargs=-1, required=True)
@click.option("-p", "--patch", "patch_text", required=True, help="The patch, as JSON or YAML.")
@click.option("--type", "patch_type", type=click.Choice(sorted(_PATCH_TYPES)), default="strategic",
              show_default=True, help="strategic merge patch or JSON merge patch (RFC 7386).")
@click.option("--subresource", type=click.Choice(["status"]), default=None,
              help="Patch the status instead of the object.")
@click.option("--dry-run", is_flag=True, help="Ask the server what would change; write nothing.")
@connection_options()
@handle_errors
def patch(args: tuple[str, ...], patch_text: str, patch_type: str, subresource: str | None, dry_run: bool,
          server: str | None, token: str | None, token_file: Path | None, namespace: str | None) -> None:
    """Patch objects (KIND NAME... or KIND/NAME...) on the server."""
    body = _patch_body(patch_text)
    config = client_config(server, token, token_file, namespace)
    targets: list[Target] = parse_targets(args, config.namespace)
    with Client(config) as client:
        for target in targets:
            before = client.get_raw(target.info, target.name, target.namespace)
            after = client.patch_raw(target.info, target.name, body, target.namespace, subresource,
                                     dry_run=dry_run, field_manager=FIELD_MANAGER,
                                     patch_type=_PATCH_TYPES[patch_type])
            same = json.dumps(_content(before), sort_keys=True) == json.dumps(_content(after), sort_keys=True)
            click.echo(f"{target.label} patched{' (no change)' if same else ''}{_suffix(dry_run)}")


def _content(obj: Obj) -> Obj:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("resourceVersion", "managedFields", "generation")}
    return {**obj, "metadata": meta}
