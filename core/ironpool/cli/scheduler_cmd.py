"""``ironpool scheduler`` (run the scheduler against an apiserver) and ``ironpool schedule --dry-run``
(preview where a set of Machines/Volumes would land, writing nothing)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from ironpool.cli.apiserver_cmd import parse_listen
from ironpool.cli.common import log_level_option, run_until_signalled, setup_logging
from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import cli_errors


def _scheduler_config(path: Path | None) -> Any:
    from ironpool.scheduler.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from exc


def _election(name: str, namespace: str, lease: float, renew: float, retry: float) -> Any:
    from ironpool.client.leaderelection import LeaderElectionConfig

    try:
        return LeaderElectionConfig(name, namespace, lease_duration=lease, renew_deadline=renew,
                                    retry_period=retry)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--leader-elect-*") from None


@click.command("scheduler")
@connection_options(token=False, namespace=False)
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Scheduler configuration YAML (profiles, queue timings).")
@click.option("--bind-concurrency", default=64, show_default=True, type=click.IntRange(1, 1024),
              help="Bindings in flight at once.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Run as one of several replicas: only the holder of a coordination.k8s.io Lease "
                   "schedules.")
@click.option("--leader-elect-resource-name", default="ironpool-scheduler", show_default=True)
@click.option("--leader-elect-resource-namespace", default="kube-system", show_default=True)
@click.option("--leader-elect-lease-duration", default=10.0, show_default=True, type=click.FloatRange(0.5),
              help="Seconds a standby waits after the Lease was last seen renewed before taking it over.")
@click.option("--leader-elect-renew-deadline", default=7.0, show_default=True, type=click.FloatRange(0.2),
              help="Seconds the leader keeps trying to renew before it stops scheduling.")
@click.option("--leader-elect-retry-period", default=2.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds between tries to take or renew the Lease.")
@click.option("--metrics-listen", default=None, metavar="HOST:PORT",
              help="Serve Prometheus /metrics here (who leads, what was scheduled).")
@log_level_option
def scheduler(server: str | None, token_file: Path | None, config_path: Path | None, bind_concurrency: int,
              leader_elect: bool, leader_elect_resource_name: str, leader_elect_resource_namespace: str,
              leader_elect_lease_duration: float, leader_elect_renew_deadline: float,
              leader_elect_retry_period: float, metrics_listen: str | None, log_level: str) -> None:
    """Place Machines on MachinePools and Volumes on VolumePools until stopped (SIGINT/SIGTERM).

    Several replicas may run against one control plane (each given every apiserver with
    ``--server URL1,URL2``): they elect one leader through a Lease, and a standby takes over when it
    stops renewing it.
    """
    from ironpool.client.rest import AsyncClient
    from ironpool.scheduler.app import SchedulerOptions, run

    setup_logging(log_level)
    election = _election(leader_elect_resource_name, leader_elect_resource_namespace,
                         leader_elect_lease_duration, leader_elect_renew_deadline, leader_elect_retry_period)
    options = SchedulerOptions(
        config=_scheduler_config(config_path), bind_concurrency=bind_concurrency,
        election=election if leader_elect else None,
        metrics_listen=parse_listen(metrics_listen, "--metrics-listen") if metrics_listen else None,
    )
    with cli_errors():
        cfg = client_config(server, token_file=token_file)

    async def main(stop: asyncio.Event) -> None:
        async with AsyncClient(cfg) as client:
            await run(client, options, stop)

    run_until_signalled(main)


@click.command("schedule")
@click.option("--dry-run", is_flag=True, help="Required: only answer where objects would go.")
@click.option("-f", "--filename", "files", multiple=True, required=True,
              help="Manifest file(s) with Machines/Volumes ('-' for stdin).")
@connection_options()
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
    with cli_errors():
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
