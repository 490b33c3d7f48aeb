"""Fixtures for the machine runtime: the tiny image (built once), a runtime subprocess per module,
and a session finalizer that removes every domain a test labelled with this session's id."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from machine_runtime_helpers import RuntimeProc, remove_test_domains, running_runtime

from tests.helpers.runtimes import build_tiny_image, libvirt_ok, require_libvirt

SESSION = secrets.token_hex(6)


@pytest.fixture(scope="session")
def test_session() -> Iterator[str]:
    """A label value unique to this pytest run; its domains are removed at the end whatever happens."""
    yield SESSION
    if libvirt_ok():
        remove_test_domains(SESSION)


@pytest.fixture(scope="session")
def tiny_images() -> Path:
    """A catalog directory holding the tiny image (kernel + busybox initramfs)."""
    require_libvirt()
    try:
        out = build_tiny_image()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    assert (out / "tiny" / "kernel").is_file()
    return out


@pytest.fixture(scope="module")
def runtime(tiny_images: Path, test_session: str) -> Iterator[RuntimeProc]:
    """A started ``ironpool libvirt-runtime`` with its own state dir and socket (short path)."""
    with running_runtime("imr-", test_session, images=tiny_images) as proc:
        yield proc
