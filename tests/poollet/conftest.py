"""Fixtures for the poollet tests: fake IRI runtimes on a unix socket, an API client, a running poollet."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_iri import FakeIriServer, FakeMachineRuntime, FakeVolumeRuntime
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient, AsyncVolumeRuntimeClient
from poollet_helpers import Iri, Running, start_machinepoollet


@pytest.fixture
async def iri() -> AsyncIterator[Iri]:
    d = tempfile.mkdtemp(prefix="iri-")  # unix socket paths are limited to 108 bytes
    machines, volumes = FakeMachineRuntime(), FakeVolumeRuntime()
    server = FakeIriServer(os.path.join(d, "iri.sock"), [machines, volumes])  # type: ignore[arg-type]
    await server.start()
    mc = AsyncMachineRuntimeClient.connect(server.endpoint)
    vc = AsyncVolumeRuntimeClient.connect(server.endpoint)
    try:
        yield Iri(machines, volumes, server, mc, vc)
    finally:
        await mc.close()
        await vc.close()
        await server.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def client(apiserver: Any) -> AsyncIterator[AsyncClient]:
    c = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    try:
        yield c
    finally:
        await c.aclose()


@pytest.fixture
async def machinepoollet(client: AsyncClient, iri: Iri) -> AsyncIterator[Running]:
    running = await start_machinepoollet(client, iri)
    try:
        yield running
    finally:
        await running.stop()
