"""Fixtures for the end-to-end tests: the tiny image and ``ironpool up`` instances cleaned up after."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from up_harness import UpInstance

from tests.helpers.runtimes import build_tiny_image, require_libvirt


@pytest.fixture(scope="session")
def tiny_images() -> Path:
    require_libvirt()
    return build_tiny_image()


@pytest.fixture
def make_up(tiny_images: Path) -> Iterator[Callable[..., UpInstance]]:
    """Build ``ironpool up`` instances; each is stopped and its libvirt objects removed afterwards."""
    made: list[UpInstance] = []

    def make(**kwargs: Any) -> UpInstance:
        inst = UpInstance(images=tiny_images, **kwargs)
        made.append(inst)
        return inst

    yield make
    for inst in made:
        inst.cleanup()
