"""``ironpool image``: build OS images, publish them to a registry, pull them into this host's cache,
list it."""

from __future__ import annotations

import logging
import socket
import sys
import time
from pathlib import Path
from typing import Any

import click

from ironpool.cli.image_options import DEFAULT_CACHE
from ironpool.cli.printers import format_table, to_json, to_yaml

MiB = 1024 * 1024


def _credentials(authfile: Path | None, username: str | None, password_stdin: bool, ref: str) -> Any:
    from ironpool.runtime.images import Credentials
    from ironpool.runtime.images.errors import ImageError
    from ironpool.runtime.images.reference import parse

    if authfile is not None:
        try:
            return Credentials.from_secret({".dockerconfigjson": authfile.read_bytes()}, "--authfile")
        except (OSError, ImageError) as exc:
            raise click.BadParameter(str(getattr(exc, "message", exc)), param_hint="--authfile") from exc
    if username:
        if not password_stdin:
            raise click.BadParameter("give the password on standard input with --password-stdin",
                                     param_hint="--username")
        password = sys.stdin.readline().rstrip("\n")
        try:
            registry = parse(ref).registry
        except ImageError as exc:
            raise click.BadParameter(exc.message, param_hint="REF") from exc
        return Credentials.basic(registry, username, password)
    return None


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


@click.group("image")
def image() -> None:
    """OS images: build from Debian's packages, publish to an OCI registry, pull into this host's
    cache, list the cache."""


@image.command("build")
@click.argument("name")
@click.option("--images", "output_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Image catalog folder to build into [default: DATA_DIR/images, the one `ironpool up` "
                   "offers].")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR", help="Data dir whose image catalog gets the image.")
@click.option("--build-cache", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_CACHE",
              help="Downloaded packages and the work folder [default: /var/cache/ironpool].")
@click.option("--mirror", default=None, help="Debian mirror [default: http://deb.debian.org/debian].")
@click.option("--rebuild", is_flag=True, help="Build anew even if the recipe is unchanged (newer packages).")
@click.option("-v", "--verbose", is_flag=True, help="Show what the tools print.")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table",
              help="How to print the result.")
def build(name: str, output_dir: Path | None, data_dir: Path | None, build_cache: Path | None,
          mirror: str | None, rebuild: bool, verbose: bool, fmt: str) -> None:
    """Build OS image NAME (debian-12, debian-13) into the image catalog, unless the one there was built from
    the same recipe. Boot it by its name (localDisk.image: NAME), as file:// of the printed path, or
    publish it with `ironpool image push REF PATH`. Needs root (mmdebstrap), Debian's mirror, and
    mmdebstrap, fdisk, e2fsprogs, grub-pc-bin and qemu-utils (`make host` installs them)."""
    from ironpool.allinone.datadir import default_data_dir
    from ironpool.images.build import BUILD_CACHE
    from ironpool.images.build import build as build_image
    from ironpool.images.tools import ImageBuildError

    out = output_dir or (data_dir or default_data_dir()) / "images"

    def log(line: str) -> None:
        if verbose:
            click.echo(f"    {line}", err=True)

    try:
        built = build_image(name, out, build_cache or BUILD_CACHE, mirror, rebuild,
                            lambda m: click.echo(f"==> {m}", err=True), log)
    except ImageBuildError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("interrupted; nothing was kept", err=True)
        sys.exit(130)
    result = {"name": built.name, "path": str(built.path), "file": str(built.path.resolve()),
              "cached": built.cached, "seconds": round(built.seconds, 1), "sizeBytes": built.size_bytes}
    if fmt in ("json", "yaml"):
        click.echo(to_json(result) if fmt == "json" else to_yaml(result), nl=fmt == "json")
        return
    rows = [[built.name, "cached" if built.cached else "built", f"{built.seconds:.1f}s",
             _size(built.size_bytes), str(built.path)]]
    click.echo(format_table(["IMAGE", "RESULT", "TIME", "SIZE", "PATH"], rows))


@image.command("push")
@click.argument("ref")
@click.argument("file", type=click.Path(path_type=Path, exists=True))
@click.option("--kernel", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="A kernel to boot directly (beside a disk, or instead of one with --initrd).")
@click.option("--initrd", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="The initramfs for --kernel.")
@click.option("--cmdline", default=None, help="The kernel command line (the image config's commandLine).")
@click.option("--layout", type=click.Choice(["classic", "index"]), default="classic", show_default=True,
              help="classic: one manifest as IronCore's ironcore-image builds it; index: an image index "
                   "with a manifest for this platform, variant virtualization.")
@click.option("--authfile", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Registry credentials as a Docker config.json (what a dockerconfigjson Secret holds).")
@click.option("--username", help="Registry user (with --password-stdin).")
@click.option("--password-stdin", is_flag=True, help="Read the registry password from standard input.")
@click.option("--insecure-registry", "insecure", multiple=True, metavar="HOST[:PORT]",
              help="Speak plain HTTP or unverified TLS to this registry (loopback always is).")
def push(ref: str, file: Path, kernel: Path | None, initrd: Path | None, cmdline: str | None, layout: str,
         authfile: Path | None, username: str | None, password_stdin: bool,
         insecure: tuple[str, ...]) -> None:
    """Publish FILE to REF (registry[:port]/repository[:tag]) in IronCore's image format.

    FILE is a qcow2 or raw disk, or a kernel bundle folder (kernel, initrd, cmdline) such as the
    tiny image in the catalog. Prints the digest; boot it with localDisk.image REF or REF@DIGEST.
    """
    from ironpool.runtime.images.errors import ImageError
    from ironpool.runtime.images.publish import ImageFiles
    from ironpool.runtime.images.publish import push as do_push
    from ironpool.runtime.images.registry import RegistryOptions

    creds = _credentials(authfile, username, password_stdin, ref)
    started = time.monotonic()
    try:
        files = ImageFiles.from_path(file, kernel, initrd, cmdline)
        digest = do_push(ref, files, creds, RegistryOptions(frozenset(insecure)),
                         layout="index" if layout == "index" else "classic",
                         progress=lambda m: click.echo(m, err=True))
    except ImageError as exc:
        raise click.ClickException(exc.message) from exc
    click.echo(f"pushed {ref} in {time.monotonic() - started:.1f}s", err=True)
    click.echo(digest)


@image.command("pull")
@click.argument("ref")
@click.option("--image-cache", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_CACHE,
              show_default=True, help="The host's image cache.")
@click.option("--authfile", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Registry credentials as a Docker config.json.")
@click.option("--insecure-registry", "insecure", multiple=True, metavar="HOST[:PORT]")
@click.option("--file-images", "file_images", multiple=True, type=click.Path(path_type=Path, file_okay=False),
              help="A folder file:// images may come from.")
def pull(ref: str, image_cache: Path, authfile: Path | None, insecure: tuple[str, ...],
         file_images: tuple[Path, ...]) -> None:
    """Pull REF (an OCI reference or an https/file URL) into this host's image cache ahead of use."""
    from ironpool.runtime.images import open_resolver
    from ironpool.runtime.images.errors import ImageError

    logging.getLogger("ironpool.runtime.images").setLevel(logging.ERROR)  # the error is printed below
    creds = _credentials(authfile, None, False, ref)
    resolver = open_resolver(None, image_cache, None, insecure, file_images, wait=24 * 3600)
    resolver.start()
    try:
        img = resolver.resolve(ref, creds, ("cli", lambda _reason, message: click.echo(message, err=True)))
    except ImageError as exc:
        raise click.ClickException(exc.message) from exc
    finally:
        resolver.close()
    click.echo(img.booted_ref)


@image.command("ls")
@click.option("--image-cache", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_CACHE,
              show_default=True, help="The host's image cache (ironpool up: DATA_DIR/image-cache).")
@click.option("-o", "--output", type=click.Choice(["wide", "json", "yaml"]), default=None)
def ls(image_cache: Path, output: str | None) -> None:
    """The images cached on this host: reference, digest, size on disk, and who uses them."""
    from ironpool.runtime.images.cache import ImageCache

    if not (image_cache / "images").is_dir():
        raise click.ClickException(f"{image_cache} is no image cache (see --image-cache)")
    cache = ImageCache(image_cache)
    entries = cache.entries()
    host = socket.gethostname()
    if output in ("json", "yaml"):
        doc = {"host": host, "cache": str(image_cache), "images": [{
            "ref": e.record.ref, "refs": e.record.refs, "digest": e.record.digest, "sizeBytes": e.size,
            "disk": e.record.disk or None, "diskFormat": e.record.disk_format or None,
            "virtualSizeBytes": e.record.virtual_size or None, "kernel": e.record.kernel or None,
            "initrd": e.record.initrd or None, "usedAt": e.record.used_at,
            "users": [{"user": u.user, "path": u.path} for u in e.users],
        } for e in entries]}
        click.echo(to_json(doc) if output == "json" else to_yaml(doc), nl=output == "json")
        return
    header = ["IMAGE", "DIGEST", "SIZE", "USERS", "LAST USED"]
    if output == "wide":
        header += ["KIND", "USED BY"]
    rows = []
    now = time.time()
    for e in entries:
        rec = e.record
        row = [rec.ref, rec.digest.removeprefix("sha256:")[:12], _size(e.size), str(len(e.users)),
               f"{int(now - rec.used_at)}s ago" if rec.used_at else "never"]
        if output == "wide":
            kind = "+".join(k for k, v in (("disk", rec.disk), ("kernel", rec.kernel)) if v)
            row += [kind, ",".join(u.user for u in e.users) or "-"]
        rows.append(row)
    click.echo(f"host {host}, cache {image_cache}: {len(entries)} image(s), {_size(cache.size())}")
    if rows:
        click.echo(format_table(header, rows))
