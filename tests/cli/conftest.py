"""Fixtures for CLI tests: run ``ironpool`` as a subprocess against the real apiserver."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ApiServer

Run = Callable[..., subprocess.CompletedProcess[str]]


def cli_env(server: ApiServer | None, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRONPOOL_")}
    env["IRONPOOL_CONFIG"] = str(tmp_path / "no-such-config.yaml")
    if server is not None:
        env["IRONPOOL_SERVER"] = server.url
        env["IRONPOOL_TOKEN"] = server.admin_token
    return env


@pytest.fixture
def env(apiserver: ApiServer, tmp_path: Path) -> dict[str, str]:
    return cli_env(apiserver, tmp_path)


@pytest.fixture
def ironpool(env: dict[str, str]) -> Run:
    """``ironpool(*args, input=None)`` -> CompletedProcess with text stdout/stderr."""

    def run(*args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ironpool.cli.main", *args],
            env=env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run
