"""One attacked apiserver per test module (see :mod:`tests.hardening.harness`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hardening.harness import Server, start_server, stop_server

HEADER_READ_TIMEOUT = 2.0
MAX_UNAUTHENTICATED = 512


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """An apiserver with a short header timeout and a small unauthenticated-connection cap, so the
    socket attacks finish quickly; everything else at its defaults."""
    tmp: Path = tmp_path_factory.mktemp("hardening")
    running = start_server(tmp, "--header-read-timeout", str(HEADER_READ_TIMEOUT),
                           "--max-unauthenticated-connections", str(MAX_UNAUTHENTICATED))
    try:
        yield running
    finally:
        stop_server(running)
        assert running.process.returncode in (0, -15), f"apiserver ended with {running.process.returncode}"
