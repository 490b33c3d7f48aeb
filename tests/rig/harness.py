"""The rig (:mod:`ironpool.rig`) as a test fixture: ``started_rig(**options)`` starts one and removes
it afterwards; ``admin_http(rig, i)`` is an httpx client to apiserver ``i`` as the admin.

Other test modules make their own module-scoped fixture from it with the options they need, e.g.::

    @pytest.fixture(scope="module")
    def rig():
        with started_rig(host_cpu="12", controller_manager_args=["--pool-monitor-grace-period", "10"]) as rig:
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
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import build_tiny_image, require_libvirt


@contextmanager
def started_rig(**options: Any) -> Iterator[Rig]:
    """A running rig in a folder of its own that QEMU can reach (etcd's data in /dev/shm, the tiny
    image from the test catalog); ``options`` are :class:`Rig` fields. Fails the test if it does not
    start or leaves anything behind.

    Not below pytest's temporary root: every pytest session that starts on the machine makes that
    0700 again, and QEMU, running as its own user, could then no longer reach the hosts' disks.
    """
    require_libvirt()
    require_etcd()
    images = build_tiny_image()
    folder = qemu_tmpdir("ironpool-rig-")
    etcd_data = Path(tempfile.mkdtemp(prefix="ironpool-rig-etcd-", dir="/dev/shm"))
    rig = Rig(folder / "r", images, etcd_data=etcd_data, **options)
    try:
        try:
            rig.up()
        except RigError as exc:
            pytest.fail(f"the rig did not start: {exc}")
        try:
            yield rig
        finally:
            problems = rig.down()
            assert not problems, problems
    finally:
        shutil.rmtree(etcd_data, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)


def admin_http(rig: Rig, server: int = 0, **kwargs: Any) -> httpx.Client:
    """An httpx client to apiserver ``server`` with the admin token, trusting the rig's CA."""
    return httpx.Client(base_url=rig.apiservers[server].url, verify=rig.ssl_context(),
                        headers={"Authorization": f"Bearer {rig.admin_token}"}, **kwargs)
