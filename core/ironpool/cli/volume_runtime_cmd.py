"""``ironpool volume-runtime``: serve IRI ``VolumeRuntime`` on a libvirt ``dir`` storage pool."""

from __future__ import annotations

from pathlib import Path

import click

from ironpool.cli.common import run_until_signalled, setup_logging
from ironpool.cli.image_options import image_options, parse_size


@click.command("volume-runtime")
@click.option("--libvirt-uri", default="qemu:///system", show_default=True, help="libvirt connection URI.")
@click.option(
    "--storage-pool",
    default="ironpool",
    show_default=True,
    help="libvirt storage pool (type dir); created if missing.",
)
@click.option(
    "--pool-path",
    type=click.Path(path_type=Path),
    default=Path("/var/lib/ironpool/volumes"),
    show_default=True,
    help="Folder of the pool when it has to be created.",
)
@click.option(
    "--classes",
    "classes_file",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="YAML file with VolumeClass manifests (storage.ironcore.dev/v1alpha1).",
)
@click.option(
    "--images",
    "images_dir",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Image catalog: qcow2/raw images that volumes can be created from, by name.",
)
@image_options
@click.option(
    "--address",
    default="unix:///var/run/iri-volumeprovider.sock",
    show_default=True,
    help="Where to serve: unix:///path or tcp://host:port.",
)
@click.option(
    "--workers",
    default=8,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Threads for libvirt and qemu-img calls.",
)
@click.option(
    "--owner",
    default=None,
    help="Who the storage pool belongs to, recorded in it on first use; a pool recorded for another "
    "owner is refused [default: volume-runtime@HOSTNAME:POOL_PATH].",
)
@click.option(
    "--share-storage-pool",
    is_flag=True,
    help="Use the storage pool even if it belongs to another owner (both then see its volumes).",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def volume_runtime(
    libvirt_uri: str,
    storage_pool: str,
    pool_path: Path,
    classes_file: Path,
    images_dir: Path | None,
    image_cache: Path,
    image_cache_size: str,
    insecure_registries: tuple[str, ...],
    file_images: tuple[Path, ...],
    image_pull_wait: float,
    address: str,
    workers: int,
    owner: str | None,
    share_storage_pool: bool,
    log_level: str,
) -> None:
    """Serve the IRI volume runtime (volume.v1alpha1.VolumeRuntime) on a libvirt storage pool."""
    setup_logging(log_level)
    # Imported here so `ironpool --help` does not load libvirt and grpc.
    from ironpool.runtime.errors import IriError
    from ironpool.runtime.volume.app import VolumeRuntimeConfig, build
    from ironpool.runtime.volume.classes import ClassFileError
    from ironpool.runtime.volume.pool import PoolConfigError
    from ironpool.runtime.volume.server import serve

    if not pool_path.is_absolute():
        raise click.BadParameter(f"must be an absolute path, got {pool_path}", param_hint="--pool-path")
    cfg = VolumeRuntimeConfig(
        classes_file=classes_file, libvirt_uri=libvirt_uri, storage_pool=storage_pool, pool_path=pool_path,
        images_dir=images_dir, image_cache=image_cache,
        image_cache_size=parse_size(image_cache_size, "--image-cache-size"),
        insecure_registries=insecure_registries, file_images=file_images, image_pull_wait=image_pull_wait,
        address=address, workers=workers, owner=owner, share_pool=share_storage_pool,
    )
    try:
        driver = build(cfg)
    except ClassFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--classes") from exc
    except (ConnectionError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        run_until_signalled(lambda stop: serve(driver, cfg.address, stop, cfg.workers))
    except (PoolConfigError, IriError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
