"""``ironpool image``: the guest images of this host."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.group("image")
def image() -> None:
    """Guest images: build them from Debian's packages."""


@image.command("build")
@click.argument("name")
@click.option("--images", "output_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Image catalog folder to build into [default: DATA_DIR/images, the one `ironpool up` "
                   "offers].")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR", help="Data dir whose image catalog gets the image.")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_CACHE",
              help="Work folder and downloaded packages [default: /var/cache/ironpool].")
@click.option("--mirror", default=None, help="Debian mirror [default: http://deb.debian.org/debian].")
@click.option("--rebuild", is_flag=True, help="Build anew even if the recipe is unchanged (newer packages).")
@click.option("-v", "--verbose", is_flag=True, help="Show what the tools print.")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
              help="How to print the result.")
def build(name: str, output_dir: Path | None, data_dir: Path | None, cache_dir: Path | None,
          mirror: str | None, rebuild: bool, verbose: bool, fmt: str) -> None:
    """Build guest image NAME (debian-12) into the image catalog, unless the one there was built
    from the same recipe. Needs root (mmdebstrap), Debian's mirror, and mmdebstrap, fdisk,
    e2fsprogs, grub-pc-bin and qemu-utils (`make host` installs them)."""
    from ironpool.allinone.datadir import default_data_dir
    from ironpool.images.build import DEFAULT_CACHE
    from ironpool.images.build import build as build_image
    from ironpool.images.tools import ImageBuildError

    from .printers import format_table, to_json, to_yaml

    out = output_dir or (data_dir or default_data_dir()) / "images"

    def progress(message: str) -> None:
        click.echo(f"==> {message}", err=True)

    def log(line: str) -> None:
        if verbose:
            click.echo(f"    {line}", err=True)

    try:
        built = build_image(name, out, cache_dir or DEFAULT_CACHE, mirror, rebuild, progress, log)
    except ImageBuildError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("interrupted; nothing was kept", err=True)
        sys.exit(130)
    result = {"name": built.name, "path": str(built.path), "file": str(built.path.resolve()),
              "cached": built.cached, "seconds": round(built.seconds, 1), "sizeBytes": built.size_bytes}
    if fmt == "json":
        click.echo(to_json(result))
    elif fmt == "yaml":
        click.echo(to_yaml(result), nl=False)
    else:
        rows = [[built.name, "cached" if built.cached else "built", f"{built.seconds:.1f}s",
                 f"{built.size_bytes / 1024**2:.0f}Mi", str(built.path)]]
        click.echo(format_table(["IMAGE", "RESULT", "TIME", "SIZE", "PATH"], rows))
