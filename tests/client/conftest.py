"""Fixtures for the client tests: a ClientConfig pointing at the real apiserver."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The shared fixtures module is imported by name by tests that restart the apiserver.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from ironpool.client.config import ClientConfig  # noqa: E402

from tests.conftest import ApiServer  # noqa: E402


@pytest.fixture
def config(apiserver: ApiServer) -> ClientConfig:
    return ClientConfig(server=apiserver.url, token=apiserver.admin_token, namespace="default")
