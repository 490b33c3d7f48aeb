"""Real OCI registries for tests: Debian's docker-registry on free loopback ports, one anonymous and
one that wants a password (htpasswd), each started once per test session."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ironpool.allinone.registry import LocalRegistry, RegistryError


@dataclass(frozen=True)
class Registry:
    """A running registry: its ``host:port``, and the user and password it wants ("" when none)."""

    address: str
    user: str = ""
    password: str = ""


def _start(users: dict[str, str]) -> Iterator[LocalRegistry]:
    root = Path(tempfile.mkdtemp(prefix="ipreg-"))
    reg = LocalRegistry(root, users=users)
    try:
        reg.start()
    except RegistryError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"{exc} (run scripts/setup-host.sh)")
    try:
        yield reg
    finally:
        reg.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def registry() -> Iterator[Registry]:
    """An anonymous registry on loopback."""
    for reg in _start({}):
        yield Registry(reg.address)


@pytest.fixture(scope="session")
def auth_registry() -> Iterator[Registry]:
    """A registry on loopback that answers 401 without the password."""
    password = secrets.token_hex(8)
    for reg in _start({"puller": password}):
        yield Registry(reg.address, "puller", password)
