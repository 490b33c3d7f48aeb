"""The rig fixture: one multi-host rig (tests/rig/rig.py) per test module, removed afterwards.

Other fault tests reuse it: ``rig.hosts``, ``rig.stop_host(name)`` / ``rig.start_host(name)``,
``rig.apiservers``, ``rig.etcd``, ``rig.schedulers``, ``rig.restart(proc)``, ``rig.client()`` (both
apiservers, failover) and ``rig.http(i)`` (httpx to apiserver ``i``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.etcd import require_etcd
from tests.helpers.runtimes import build_tiny_image, require_libvirt
from tests.rig.rig import Rig, RigError


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    require_libvirt()
    require_etcd()
    images = build_tiny_image()
    etcd_data = Path(tempfile.mkdtemp(prefix="ironpool-rig-etcd-", dir="/dev/shm"))
    rig = Rig(tmp_path_factory.mktemp("rig") / "r", images, etcd_data=etcd_data)
    try:
        rig.up()
    except RigError as exc:
        shutil.rmtree(etcd_data, ignore_errors=True)
        pytest.fail(f"the rig did not start: {exc}")
    try:
        yield rig
    finally:
        problems = rig.down()
        shutil.rmtree(etcd_data, ignore_errors=True)
        assert not problems, problems
