"""``ironpool down``: stop the ``ironpool up`` (or ``ironpool join``) of a data dir; ``--purge`` also
removes what it made."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("down")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR",
              help="Data dir of the installation [default: /var/lib/ironpool as root, else "
                   "~/.local/share/ironpool].")
@click.option("--purge", is_flag=True,
              help="Also delete the installation's domains, volumes, storage pool and data dir.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before purging.")
@click.option("--libvirt-uri", default=None,
              help="libvirt connection URI [default: the one `ironpool up` recorded in the data dir].")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(1),
              help="Seconds to wait for `ironpool up` to stop.")
def down(data_dir: Path | None, purge: bool, yes: bool, libvirt_uri: str | None, timeout: float) -> None:
    """Stop the running `ironpool up` of a data dir cleanly (as Ctrl-C does). Running `ironpool up`
    again resumes. With --purge, also remove everything that installation made on this host; other
    installations on the same libvirtd are never touched."""
    from ironpool.allinone.datadir import DataDirError, default_data_dir
    from ironpool.allinone.down import DownError, open_data_dir, plan_purge, stop_up
    from ironpool.allinone.down import purge as remove

    try:
        dirs = open_data_dir(data_dir or default_data_dir())
        shown = [False]

        def tick(waited: float) -> None:
            if not shown[0]:
                click.echo("waiting for ironpool up to stop ", nl=False)
                shown[0] = True
            elif int(waited * 10) % 10 == 0:
                click.echo(".", nl=False)

        what = "ironpool join" if dirs.read_installation().get("role") == "join" else "ironpool up"
        pid = stop_up(dirs, timeout, tick)
        if shown[0]:
            click.echo()
        click.echo(f"stopped {what} (PID {pid})" if pid else f"{what} is not running ({dirs.root})")
        if not purge:
            return
        plan = plan_purge(dirs, libvirt_uri)
    except (DownError, DataDirError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo("This removes, for good:")
    for line in plan.lines():
        click.echo(f"  - {line}")
    for note in plan.notes:
        click.echo(f"  (left alone: {note})")
    if not yes:
        if not sys.stdin.isatty():
            raise click.ClickException("not purging without confirmation; pass --yes")
        click.confirm("Remove all of this?", abort=True)
    problems = remove(plan, lambda msg: click.echo(f"  {msg}"))
    if problems:
        raise click.ClickException("some things could not be removed:\n  " + "\n  ".join(problems))
    click.echo("purged.")
