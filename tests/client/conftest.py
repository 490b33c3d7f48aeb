"""Fixtures for the client tests: a ClientConfig pointing at the real apiserver."""

from __future__ import annotations

import pytest
from ironpool.client.config import ClientConfig

from tests.conftest import ApiServer


@pytest.fixture
def config(apiserver: ApiServer) -> ClientConfig:
    return ClientConfig(server=apiserver.url, token=apiserver.admin_token, namespace="default")
