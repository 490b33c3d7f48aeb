"""OS images for both runtimes: catalog names, OCI references pulled from registries, and
``https://`` / ``file://`` URLs, cached per host and resolved to local files behind one door,
:class:`ImageResolver`.

Modules, each with one job: :mod:`.reference` (what a reference may say), :mod:`.catalog` (the
local catalog folder), :mod:`.mediatypes` (IronCore's OCI image format), :mod:`.registry` (skopeo),
:mod:`.download` (URLs), :mod:`.diskfile` (checking a disk before use), :mod:`.cache` (the host's
content-addressed cache and its users), :mod:`.resolver` (all of it together), :mod:`.publish`
(``ironpool image push``).
"""

from .catalog import DISK_SUFFIXES, ImageCatalog, catalog_name
from .errors import ImageError, ImageNotFound, ImagePulling, InvalidImageName
from .image import Image
from .registry import Credentials
from .resolver import ImageResolver, ResolverOptions, open_resolver

__all__ = [
    "DISK_SUFFIXES",
    "Credentials",
    "Image",
    "ImageCatalog",
    "ImageError",
    "ImageNotFound",
    "ImagePulling",
    "ImageResolver",
    "InvalidImageName",
    "ResolverOptions",
    "catalog_name",
    "open_resolver",
]
