"""``ironpool rig up|status|down``: a multi-host rig on this machine (:mod:`ironpool.rig`)."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_DIR = "/var/tmp/ironpool-rig"

dir_option = click.option(
    "--dir", "root", type=click.Path(path_type=Path, file_okay=False), envvar="IRONPOOL_RIG_DIR",
    default=DEFAULT_DIR, show_default=True, show_envvar=True,
    help="Where the rig keeps its state, data and logs.",
)


def _rows(title: str, rows: list[tuple[str, str]]) -> None:
    click.echo(title)
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        click.echo(f"  {key + ':':<{width}} {value}")


@click.group("rig")
def rig() -> None:
    """A fleet's processes on this machine: 3 etcd members, 2 HTTPS apiservers, 2 schedulers electing
    a leader, the controller-manager and N hosts joined with `ironpool join` (one libvirtd serves all).

    For trying ironpool as a fleet and its failures (kill a scheduler, the etcd leader, an apiserver);
    etcd comes from the host (Debian's etcd-server package).
    """


@rig.command("up")
@dir_option
@click.option("--hosts", type=click.IntRange(1, 20), default=3, show_default=True, help="Joined hosts.")
@click.option("--images", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Image catalog the hosts share [default: DIR/images, with the tiny image built there].")
def up(root: Path, hosts: int, images: Path | None) -> None:
    """Start a rig and print where everything is; it runs on after this command returns."""
    from ironpool.rig.rig import Rig, RigError

    root = root.absolute()
    rig_ = Rig(root, (images or root / "images").absolute(), host_count=hosts)
    click.echo(f"starting the rig in {root} ...")
    try:
        rig_.up()
    except RigError as exc:
        raise click.ClickException(str(exc)) from None
    _rows("rig is up:", rig_.status())
    click.echo(f"Try: IRONPOOL_CONFIG={rig_.admin_config} ironpool get machinepools -o wide\n"
               f"Stop and remove everything: ironpool rig down --dir {root}")


@rig.command("status")
@dir_option
def status(root: Path) -> None:
    """What runs, where, and which scheduler leads."""
    from ironpool.rig.rig import Rig, RigError

    try:
        _rows(f"rig at {root.absolute()}:", Rig.load(root.absolute()).status())
    except RigError as exc:
        raise click.ClickException(str(exc)) from None


@rig.command("down")
@dir_option
def down(root: Path) -> None:
    """Stop the rig and remove every domain, volume, storage pool and file it made."""
    from ironpool.rig.rig import Rig, RigError

    try:
        problems = Rig.load(root.absolute()).down(click.echo)
    except RigError as exc:
        raise click.ClickException(str(exc)) from None
    if problems:
        raise click.ClickException("left behind:\n  " + "\n  ".join(problems))
