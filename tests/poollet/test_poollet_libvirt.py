"""Both poollets against the real libvirt machine and volume runtimes: a Machine boots a QEMU guest.

Needs libvirtd at qemu:///system and the tiny image (``scripts/build-tiny-image.sh``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.api.errors import NotFound
from ironpool.api.storage import Volume, VolumeClass
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient, AsyncVolumeRuntimeClient
from ironpool.poollet import keys
from ironpool.poollet.capacity import HostResources
from ironpool.poollet.machinepoollet import MachinePoolletOptions, run_machinepoollet
from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet

from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import (
    LIBVIRT_URI,
    build_tiny_image,
    destroy_storage_pool,
    require_libvirt,
    start_ironpool,
    stop_process,
)
from tests.helpers.wait import eventually

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

# The runtime adopts every ironpool domain of the libvirtd, also those of other tests or of a running
# `ironpool up`: this test only ever touches machines made for its own, uniquely named pool.
POOL = f"lv-{secrets.token_hex(4)}"
VPOOL = f"v{POOL}"
OURS = {keys.MACHINE_POOL_LABEL: POOL}

MACHINE_CLASSES = """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: tiny}
  capabilities: {cpu: "1", memory: 128Mi}
"""
VOLUME_CLASSES = """\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata: {name: fast}
capabilities: {tps: 100Mi, iops: "1000"}
"""


@pytest.fixture(scope="module")
def tiny_images() -> Path:
    require_libvirt()
    try:
        return build_tiny_image()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@dataclass
class Host:
    """The two runtimes of one libvirt host, as subprocesses, and the poollets' clients of them."""

    workdir: Path
    storage_pool: str
    procs: list[subprocess.Popen[bytes]]
    machines: AsyncMachineRuntimeClient
    volumes: AsyncVolumeRuntimeClient

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"


async def _serving(runtime: AsyncMachineRuntimeClient | AsyncVolumeRuntimeClient,
                   proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"runtime exited with {proc.returncode}: {log.read_text()[-3000:]}")
    try:
        await asyncio.wait_for(runtime.version(), 1)
        return True
    except Exception:
        return False


@pytest.fixture
async def host(tiny_images: Path) -> AsyncIterator[Host]:
    work = qemu_tmpdir("plv-")
    (work / "mc.yaml").write_text(MACHINE_CLASSES)
    (work / "vc.yaml").write_text(VOLUME_CLASSES)
    pool_name = f"ipt-{secrets.token_hex(4)}"
    m_sock, v_sock = work / "m.sock", work / "v.sock"
    m_log, v_log = work / "machine-runtime.log", work / "volume-runtime.log"
    procs = [
        start_ironpool(["libvirt-runtime", "--libvirt-uri", LIBVIRT_URI, "--classes", str(work / "mc.yaml"),
                        "--images", str(tiny_images), "--image-cache", str(work / "image-cache"),
                        "--state-dir", str(work / "state"),
                        "--address", f"unix://{m_sock}", "--streaming-address", "127.0.0.1:0",
                        "--shutdown-timeout", "8"], m_log),
        start_ironpool(["volume-runtime", "--libvirt-uri", LIBVIRT_URI, "--storage-pool", pool_name,
                        "--pool-path", str(work / "pool"), "--classes", str(work / "vc.yaml"),
                        "--image-cache", str(work / "image-cache"), "--address", f"unix://{v_sock}"], v_log),
    ]
    mr, vr = AsyncMachineRuntimeClient.connect(f"unix://{m_sock}"), AsyncVolumeRuntimeClient.connect(f"unix://{v_sock}")
    try:
        await eventually(lambda: _serving(mr, procs[0], m_log), timeout=60, message="machine runtime")
        await eventually(lambda: _serving(vr, procs[1], v_log), timeout=60, message="volume runtime")
        yield Host(work, pool_name, procs, mr, vr)
    finally:
        with contextlib.suppress(Exception):  # never leave domains behind
            for m in await mr.list_machines(labels=OURS):
                await mr.delete_machine(m.metadata.id)
            await eventually(lambda: _none_left(mr), timeout=60, message="domains removed")
        await mr.close()
        await vr.close()
        for p in procs:
            stop_process(p)
        destroy_storage_pool(pool_name)
        shutil.rmtree(work, ignore_errors=True)


async def _none_left(mr: AsyncMachineRuntimeClient) -> bool:
    return not await mr.list_machines(labels=OURS)


async def _machine(client: AsyncClient, state: str | None = None) -> Machine | None:
    m = await client.get(Machine, "vm1", "default")
    if state is not None and (m.status is None or m.status.state != state):
        return None
    return m


async def test_machine_with_volume_boots_on_libvirt_and_is_torn_down(client: AsyncClient, host: Host) -> None:
    stop = asyncio.Event()
    mopts = MachinePoolletOptions(pool=POOL, provider_id=f"libvirt://{POOL}", relist_period=0.5,
                                  heartbeat_interval=2.0, delete_requeue=0.5,
                                  capacity=HostResources(2, 4 * 1024**3))
    vopts = VolumePoolletOptions(pool=VPOOL, provider_id=f"libvirt://{POOL}", relist_period=0.5,
                                 heartbeat_interval=2.0, delete_requeue=0.5)
    tasks = [asyncio.create_task(run_machinepoollet(client, host.machines, mopts, stop)),
             asyncio.create_task(run_volumepoollet(client, host.volumes, vopts, stop))]
    try:
        await client.create(MachineClass.model_validate(
            {"metadata": {"name": "tiny"}, "capabilities": {"cpu": "1", "memory": "128Mi"}}))
        await client.create(VolumeClass.model_validate(
            {"metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"},
             "resizePolicy": "ExpandOnly"}))
        await client.create(Volume.model_validate({
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"volumeClassRef": {"name": "fast"}, "volumePoolRef": {"name": VPOOL},
                     "resources": {"storage": "1Gi"}}}), namespace="default")
        await client.create(Machine.model_validate({
            "metadata": {"name": "vm1", "namespace": "default"},
            "spec": {"machineClassRef": {"name": "tiny"}, "machinePoolRef": {"name": POOL},
                     "volumes": [{"name": "root", "localDisk": {"image": "tiny"}},
                                 {"name": "data", "volumeRef": {"name": "data"}}]}}), namespace="default")

        async def running_with_volume() -> Machine | None:
            m = await _machine(client, "Running")
            if m is None or m.status is None:
                return None
            ready = {c.type: c.status for c in m.status.conditions or []}
            return m if ready.get("VolumesReady") == "True" else None

        m = await eventually(running_with_volume, timeout=90, message="Machine Running with volume attached")
        assert m.status is not None and m.status.machine_id
        machine_id = m.status.machine_id.split("://", 1)[1]
        console = host.state_dir / "machines" / machine_id / "console.log"
        await eventually(lambda: console.is_file() and "init started" in console.read_text(errors="replace"),
                         timeout=60, message="the guest's init line on the serial console")
        pool = await client.get(MachinePool, POOL)
        assert pool.status is not None
        assert [c.name for c in pool.status.available_machine_classes or []] == ["tiny"]

        await client.patch(Machine, "vm1", {"spec": {"power": "Off"}}, namespace="default")
        await eventually(lambda: _machine(client, "Shutdown"), timeout=60, message="Shutdown")
        await client.patch(Machine, "vm1", {"spec": {"power": "On"}}, namespace="default")
        await eventually(lambda: _machine(client, "Running"), timeout=60, message="Running again")

        await client.delete(Machine, "vm1", "default")

        async def machine_gone() -> bool:
            try:
                await client.get(Machine, "vm1", "default")
            except NotFound:
                return True
            return False

        await eventually(machine_gone, timeout=60, message="Machine deleted")
        assert await host.machines.list_machines(labels=OURS) == []
        await client.delete(Volume, "data", "default")

        async def volume_gone() -> bool:
            try:
                await client.get(Volume, "data", "default")
            except NotFound:
                return not await host.volumes.list_volumes()
            return False

        await eventually(volume_gone, timeout=60, message="Volume and storage volume deleted")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
