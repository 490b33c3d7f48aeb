"""The image options both runtimes take (cache folder and size, registries, ``file://`` folders)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CACHE = Path("/var/lib/ironpool/image-cache")
DEFAULT_CACHE_SIZE = "50Gi"


def parse_size(text: str, hint: str) -> int:
    """A byte count from a Kubernetes quantity (``50Gi``, ``500M``, ``1073741824``)."""
    from ironpool.api.quantity import parse_quantity

    try:
        value = parse_quantity(text).value()
    except (ValueError, TypeError) as exc:
        raise click.BadParameter(f"{text!r} is not a size such as 50Gi", param_hint=hint) from exc
    if value < 0:
        raise click.BadParameter(f"{text!r}: must not be negative", param_hint=hint)
    return int(value)


def image_options(fn: F) -> F:
    """Add ``--image-cache``, ``--image-cache-size``, ``--insecure-registry``, ``--file-images`` and
    ``--image-pull-wait`` to a runtime command."""
    options = [
        click.option("--image-cache", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_CACHE,
                     show_default=True,
                     help="The host's image cache (pulled OCI images and downloaded disks); share it "
                          "between the machine and the volume runtime of a host."),
        click.option("--image-cache-size", default=DEFAULT_CACHE_SIZE, show_default=True,
                     help="Above this size the cache removes images no machine or volume uses, "
                          "least recently used first."),
        click.option("--insecure-registry", "insecure_registries", multiple=True, metavar="HOST[:PORT]",
                     help="A registry reached over plain HTTP or unverified TLS (loopback registries "
                          "always are). Repeatable."),
        click.option("--file-images", "file_images", multiple=True,
                     type=click.Path(path_type=Path, file_okay=False),
                     help="A folder file:// images may come from (besides --images). Repeatable."),
        click.option("--image-pull-wait", type=click.FloatRange(min=0), default=10.0, show_default=True,
                     help="Seconds a create waits for its image before answering 'still pulling'."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn

