"""``ironpool cordon / uncordon / drain POOL``: pool maintenance as kubectl does it for nodes
(:mod:`ironpool.fleet.maintenance`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ironpool.cli.connection import client_config, connection_options
from ironpool.cli.errors import cli_errors

T = TypeVar("T")
_KINDS = click.Choice(["machinepool", "volumepool"])


def _run(server: str | None, token: str | None, token_file: Path | None,
         work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(client)``; API errors become a clear message and exit status 1."""
    from ironpool.api.errors import ApiError
    from ironpool.client.rest import AsyncClient
    from ironpool.client.wire import ServerUnreachable

    with cli_errors():
        cfg = client_config(server, token, token_file)

    async def main() -> T:
        async with AsyncClient(cfg) as client:
            return await work(client)

    try:
        return asyncio.run(main())
    except (ApiError, ServerUnreachable) as exc:
        raise click.ClickException(str(exc)) from None


def _cordon(kind: str, pool: str, cordoned: bool, server: str | None, token: str | None,
            token_file: Path | None) -> None:
    from ironpool.fleet.maintenance import set_cordoned

    changed = _run(server, token, token_file, lambda c: set_cordoned(c, kind, pool, cordoned))
    verb = "cordoned" if cordoned else "uncordoned"
    click.echo(f"{kind}/{pool} {verb}" if changed else f"{kind}/{pool} already {verb}")


@click.command("cordon")
@click.argument("pool")
@click.option("--kind", type=_KINDS, default="machinepool", show_default=True)
@connection_options(namespace=False)
def cordon(pool: str, kind: str, server: str | None, token: str | None, token_file: Path | None) -> None:
    """Mark POOL unschedulable: nothing new is placed there (taint
    pool.ironpool.dev/unschedulable:NoSchedule); what runs there stays."""
    _cordon(kind, pool, True, server, token, token_file)


@click.command("uncordon")
@click.argument("pool")
@click.option("--kind", type=_KINDS, default="machinepool", show_default=True)
@connection_options(namespace=False)
def uncordon(pool: str, kind: str, server: str | None, token: str | None, token_file: Path | None) -> None:
    """Mark POOL schedulable again (removes the cordon taint)."""
    _cordon(kind, pool, False, server, token, token_file)


@click.command("drain")
@click.argument("pool")
@click.option("--policy", type=click.Choice(["move", "delete"]), default="move", show_default=True,
              help="move: evict each Machine so the scheduler places it on another pool (same name and "
                   "uid); delete: delete each Machine.")
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(0),
              help="Seconds to wait for every Machine to run elsewhere or be gone.")
@click.option("--wait-for", "wait_for", type=click.Choice(["running", "bound"]), default="running",
              show_default=True, help="With --policy move: wait until each Machine runs on its new pool, or "
                                      "only until it is bound there.")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@connection_options(namespace=False)
def drain(pool: str, policy: str, timeout: float, wait_for: str, output: str, server: str | None,
          token: str | None, token_file: Path | None) -> None:
    """Cordon machine pool POOL, then move (or delete) every Machine on it and wait for them.

    Progress goes to stderr line by line (with -o json, the summary goes to stdout). Volumes are not
    moved. Exits 1 if a Machine did not get elsewhere within --timeout.
    """
    from ironpool.fleet.maintenance import drain as run_drain

    def progress(line: str) -> None:
        click.echo(line, err=output == "json")

    report = _run(server, token, token_file, lambda c: run_drain(
        c, pool, policy, timeout, wait_for, progress))  # type: ignore[arg-type]
    if output == "json":
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif report.complete:
        click.echo(f"machinepool/{pool} drained ({len(report.machines)} machine(s), {report.seconds:.1f}s)")
    if not report.complete:
        late = ", ".join(m.key for m in report.machines if m.result not in ("moved", "deleted", "gone"))
        raise click.ClickException(f"machinepool/{pool} not drained: {late}")
