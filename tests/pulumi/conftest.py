"""Fixtures of the Pulumi provider tests: the real plugin against an apiserver, stacks of programs, and
one ``ironpool up`` on real libvirt per module that needs machines to boot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi_plugin import Plugin

from tests.conftest import ApiServer
from tests.e2e.up_harness import UpInstance
from tests.helpers.runtimes import build_tiny_image, require_libvirt


@pytest.fixture
def plugin(apiserver: ApiServer, tmp_path: Path) -> Iterator[Plugin]:
    """The real plugin process, configured like a stack whose config names ``apiserver``."""
    with Plugin(env={"IRONPOOL_CONFIG": str(tmp_path / "no-client-config.yaml")}) as p:
        p.configure({"ironpool:server": apiserver.url, "ironpool:token": apiserver.admin_token},
                    ("ironpool:token",))
        yield p


@pytest.fixture(scope="module")
def up_instance(request: pytest.FixtureRequest) -> Iterator[UpInstance]:
    """One ``ironpool up`` for the module (with the module's ``UP_ARGS``), cleaned up afterwards."""
    require_libvirt()
    extra = getattr(request.module, "UP_ARGS", [])
    inst = UpInstance(images=build_tiny_image(), extra_args=list(extra))
    try:
        inst.start()
        yield inst
    finally:
        inst.cleanup()

