"""``ironpool image build``: a guest image made from Debian's packages, cached by what goes into it.

Each build is a file of its own, ``<output>/.builds/<name>-<time>-<key>.qcow2``, beside the text
of its recipe: everything that decides the content, the code that builds it included (the key is
its digest). ``<output>/<name>.qcow2``, the name the catalog folder of ``ironpool up`` offers, is a
link to the newest build. A build whose recipe matches the linked image's returns at once; anything else
is built in a work folder and moved into place by renames, so a failed or interrupted build leaves
the previous image (or none) and nothing half-made. An earlier build stays where it is: the disks of
machines made from it are overlays that name its file. Concurrent builds of one image take turns on
a lock. Downloaded packages stay in the cache folder, so a rebuild after a recipe change downloads
only what changed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import bootdisk, debian
from .tools import ImageBuildError

BUILD_CACHE = Path("/var/cache/ironpool")
SCRATCH = Path("/dev/shm")
SCRATCH_NEEDS = 4 * 1024**3
BUILDS = ".builds"  # hidden from the catalog, which lists only <name>.qcow2 and kernel bundles


@dataclass(frozen=True)
class BuiltImage:
    """What a build produced: the image file, whether it came from the cache, how long it took."""

    name: str
    path: Path
    cached: bool
    seconds: float
    size_bytes: int


def names() -> list[str]:
    """The images ``build`` can make."""
    return sorted(debian.RECIPES)


def recipe_text(recipe: debian.Recipe) -> str:
    """The cache key's text: the recipe and the source of the code that turns it into an image."""
    code = hashlib.sha256()
    for module in (debian, bootdisk):
        code.update(Path(str(module.__file__)).read_bytes())
    return f"{recipe.describe()}\nbuilder={code.hexdigest()}\n"


def _scratch(cache: Path) -> Path:
    """Where the root file system and the raw disk are made: in memory when there is room (the
    half-gigabyte written, read back and deleted never waits for the disk), else the cache folder."""
    try:
        st = os.statvfs(SCRATCH)
        if st.f_bavail * st.f_frsize >= SCRATCH_NEEDS:
            return SCRATCH
    except OSError:
        pass
    return cache


def _recipe_file(image: Path) -> Path:
    return image.with_suffix(".recipe")


def _recipe_of(image: Path) -> str:
    try:
        return _recipe_file(image).read_text()
    except OSError:
        return ""


def build(name: str, output: Path, cache: Path = BUILD_CACHE, mirror: str | None = None,
          rebuild: bool = False, progress: Callable[[str], None] = lambda _m: None,
          log: Callable[[str], None] = lambda _l: None) -> BuiltImage:
    """Build image ``name`` into the folder ``output`` unless the cached one matches its recipe.

    ``progress`` gets a line per step, ``log`` every line the tools print."""
    recipe = debian.RECIPES.get(name)
    if recipe is None:
        raise ImageBuildError(f"image {name!r}: unknown; ironpool builds {', '.join(names())}")
    if mirror:
        recipe = debian.Recipe(**{**recipe.__dict__, "mirror": mirror})
    t0 = time.monotonic()
    output = output.absolute()
    output.mkdir(parents=True, exist_ok=True)
    target = output / f"{name}.qcow2"
    wanted = recipe_text(recipe)
    builds = output / BUILDS
    with open(output / f".{name}.build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = target.resolve()
        if not rebuild and current.is_file() and _recipe_of(current) == wanted:
            progress(f"{target} is up to date (its recipe is unchanged)")
            return BuiltImage(name, target, True, time.monotonic() - t0, current.stat().st_size)
        key = hashlib.sha256(wanted.encode()).hexdigest()[:12]
        built = builds / f"{name}-{time.strftime('%Y%m%d%H%M%S')}-{key}.qcow2"
        cache.mkdir(parents=True, exist_ok=True)
        builds.mkdir(mode=0o755, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"build-{name}-", dir=_scratch(cache)))
        staged = builds / f".{built.name}.new"
        try:
            root = work / "root"
            progress(f"installing Debian {recipe.suite} with mmdebstrap from {recipe.mirror} "
                     f"({len(recipe.packages)} packages and their dependencies)")
            debian.make_root(recipe, root, cache / "debs", log)
            progress(f"root file system ready (kernel {debian.kernel_version(root)}); "
                     "making the boot disk")
            staged.unlink(missing_ok=True)
            bootdisk.make_bootdisk(root, staged, recipe.disk_size, recipe.cmdline, work, log)
            # QEMU's user reads it through overlays; it holds nothing secret.
            os.chmod(staged, 0o644)
            _recipe_file(built).write_text(wanted)
            os.replace(staged, built)
            link = output / f".{name}.qcow2.link"
            link.unlink(missing_ok=True)
            link.symlink_to(built.relative_to(output))
            os.replace(link, target)
        finally:
            staged.unlink(missing_ok=True)
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - t0
    progress(f"built {target} in {took:.0f}s")
    return BuiltImage(name, target, False, took, built.stat().st_size)
