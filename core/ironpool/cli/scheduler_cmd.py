"""``ironpool scheduler`` (run the scheduler against an apiserver) and ``ironpool schedule --dry-run``
(preview where a set of Machines/Volumes would land, writing nothing)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from ironpool.cli.common import (
    client_config,
    log_level_option,
    run_until_signalled,
    server_options,
    setup_logging,
)


def _scheduler_config(path: Path | None) -> Any:
    from ironpool.scheduler.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from exc


@click.command("scheduler")
@server_options
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Scheduler configuration YAML (profiles, queue timings).")
@click.option("--bind-concurrency", default=64, show_default=True, type=click.IntRange(1, 1024),
              help="Bindings in flight at once.")
@log_level_option
def scheduler(server: str | None, token_file: Path | None, config_path: Path | None, bind_concurrency: int,
              log_level: str) -> None:
    """Place Machines on MachinePools and Volumes on VolumePools until stopped (SIGINT/SIGTERM)."""
    from ironpool.client.rest import AsyncClient
    from ironpool.scheduler.runner import run_scheduler

    setup_logging(log_level)
    config = _scheduler_config(config_path)
    cfg = client_config(server, None, token_file)

    async def main(stop: asyncio.Event) -> None:
        async with AsyncClient(cfg) as client:
            await run_scheduler(client, config, stop, bind_concurrency=bind_concurrency)

    run_until_signalled(main)


@click.command("schedule")
@click.option("--dry-run", is_flag=True, help="Required: only answer where objects would go.")
@click.option("-f", "--filename", "files", multiple=True, required=True,
              help="Manifest file(s) with Machines/Volumes ('-' for stdin).")
@click.option("--server", default=None, help="apiserver URL (default: client config / IRONPOOL_SERVER).")
@click.option("--token", default=None, help="Bearer token (default: IRONPOOL_TOKEN).")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="File holding the bearer token.")
@click.option("-n", "--namespace", default=None, help="Namespace for objects without one.")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Scheduler configuration YAML (the profiles to preview with).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def schedule(dry_run: bool, files: tuple[str, ...], server: str | None, token: str | None,
             token_file: Path | None, namespace: str | None, config_path: Path | None, output: str) -> None:
    """Preview where each Machine/Volume in FILE would be placed now, placed together; writes nothing.

    Exits 0 when everything fits, 2 when some object would not be placed.
    """
    import yaml

    from ironpool.api.errors import ApiError
    from ironpool.client.rest import Client
    from ironpool.client.wire import ServerUnreachable
    from ironpool.scheduler.preview import preview_with_client

    if not dry_run:
        raise click.UsageError("only --dry-run is supported: the scheduler binds objects once they exist "
                               "(create them with `ironpool apply`)")
    objects: list[dict[str, Any]] = []
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
            docs = list(yaml.safe_load_all(text))
        except (OSError, yaml.YAMLError) as exc:
            raise click.BadParameter(f"{name}: {exc}", param_hint="-f") from exc
        for i, doc in enumerate(docs):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise click.BadParameter(f"{name}: document {i} is not a mapping", param_hint="-f")
            if str(doc.get("kind", "")).endswith("List"):
                objects.extend(item for item in doc.get("items") or [] if isinstance(item, dict))
            else:
                objects.append(doc)
    config = _scheduler_config(config_path)
    cfg = client_config(server, token, token_file, namespace)
    try:
        with Client(cfg) as client:
            results = preview_with_client(client, objects, config, cfg.namespace)
    except (ApiError, ServerUnreachable) as exc:
        raise click.ClickException(str(exc)) from exc
    if output == "json":
        click.echo(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        rows = [("KIND", "NAME", "POOL", "REASON")] + [
            (r.kind, r.key, r.pool or "<none>", r.reason) for r in results]
        widths = [max(len(row[c]) for row in rows) for c in range(3)]
        for row in rows:
            click.echo("   ".join(row[c].ljust(widths[c]) for c in range(3)) + "   " + row[3])
    if any(r.pool is None for r in results):
        raise SystemExit(2)
