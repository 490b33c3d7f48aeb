"""The rig (:mod:`ironpool.rig`) as a test fixture: ``started_rig(folder, **options)`` starts one and
removes it afterwards; ``admin_http(rig, i)`` is an httpx client to apiserver ``i`` as the admin.

Other test modules make their own module-scoped fixture from it with the options they need, e.g.::

    @pytest.fixture(scope="module")
    def rig(tmp_path_factory):
        with started_rig(tmp_path_factory.mktemp("rig"), host_cpu="12",
                         controller_manager_args=["--pool-monitor-grace-period", "10"]) as rig:
            yield rig
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.rig.rig import Rig, RigError

from tests.helpers.etcd import require_etcd
from tests.helpers.qemu_dirs import let_qemu_through
from tests.helpers.runtimes import build_tiny_image, require_libvirt


@contextmanager
def started_rig(folder: Path, **options: Any) -> Iterator[Rig]:
    """A running rig in ``folder`` (etcd's data in /dev/shm, the tiny image from the test catalog);
    ``options`` are :class:`Rig` fields. Fails the test if it does not start or leaves anything behind."""
    require_libvirt()
    require_etcd()
    images = build_tiny_image()
    etcd_data = Path(tempfile.mkdtemp(prefix="ironpool-rig-etcd-", dir="/dev/shm"))
    rig = Rig(let_qemu_through(folder) / "r", images, etcd_data=etcd_data, **options)
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


def admin_http(rig: Rig, server: int = 0, **kwargs: Any) -> httpx.Client:
    """An httpx client to apiserver ``server`` with the admin token, trusting the rig's CA."""
    return httpx.Client(base_url=rig.apiservers[server].url, verify=rig.ssl_context(),
                        headers={"Authorization": f"Bearer {rig.admin_token}"}, **kwargs)
