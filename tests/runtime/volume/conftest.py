"""Fixtures for the volume runtime: a real ``ironpool volume-runtime`` subprocess on qemu:///system,
each test with its own libvirt ``dir`` pool in a temporary folder, torn down afterwards."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator

import pytest
from volume_runtime_helpers import CLASSES_YAML, VolumeRuntimeProc

from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import destroy_storage_pool, require_libvirt


@pytest.fixture
def runtime_env() -> Iterator[VolumeRuntimeProc]:
    """An unstarted runtime with its own pool name and folders (short paths: unix sockets)."""
    require_libvirt()
    workdir = qemu_tmpdir("ivr-")
    classes = workdir / "classes.yaml"
    classes.write_text(CLASSES_YAML)
    images = workdir / "images"
    images.mkdir()
    proc = VolumeRuntimeProc(
        workdir=workdir,
        pool_name=f"ironpool-test-{secrets.token_hex(4)}",
        pool_path=workdir / "pool",
        socket=workdir / "vr.sock",
        classes=classes,
        images=images,
    )
    try:
        yield proc
    finally:
        proc.stop()
        destroy_storage_pool(proc.pool_name)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def runtime(runtime_env: VolumeRuntimeProc) -> VolumeRuntimeProc:
    """A started runtime."""
    runtime_env.start()
    return runtime_env
