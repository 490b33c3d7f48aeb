"""What a task's process loads: an ordinary run of the collection's modules (and a sync Client)
needs neither httpx, aiohttp nor the API's pydantic models, whose imports cost most of a task's
time before (bench/ansible.py measures the time; this guards what is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.ansible.conftest import COLLECTIONS
from tests.helpers.runtimes import REPO

HEAVY = ("httpx", "aiohttp", "rich", "pydantic", "ironpool.api.resources", "ironpool.scheduler")


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "core"), str(COLLECTIONS)])}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout.splitlines()[-1]))


def test_a_sync_client_and_its_raw_calls_load_no_heavy_module() -> None:
    assert loaded_after("""
from ironpool.client import Client, ClientConfig, ServerUnreachable
from ironpool.api.errors import NotFound
from ironpool.api.quantity import parse_quantity
from ironpool.api.resource_info import ResourceInfo
Client(ClientConfig(server="https://127.0.0.1:1", insecure=True)).close()
assert str(parse_quantity("1024Mi")) == "1Gi"
""") == []


@pytest.mark.parametrize("module", ["machine", "machine_class", "machine_info", "volume", "volume_info",
                                    "machine_pool_info", "secret", "volume_snapshot"])
def test_a_module_loads_no_heavy_module(module: str) -> None:
    assert loaded_after(f"import ansible_collections.ironpool.iaas.plugins.modules.{module}") == []
