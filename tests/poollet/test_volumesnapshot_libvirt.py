"""VolumeSnapshots end to end on the real volume runtime: a real apiserver, the volumepoollet in this
process and ``ironpool volume-runtime`` on libvirtd's ``dir`` pool. Content is written into the
source volume's qcow2 with ``qemu-io`` and read back from the restored volume's with ``qemu-img``,
on the host (no guest boots here).

Needs libvirtd at qemu:///system and QEMU's tools.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ironpool.api.errors import NotFound
from ironpool.api.storage import Volume, VolumeClass, VolumeSnapshot
from ironpool.apiserver.auth.pool_authorizer import VOLUME_POOL_USER_PREFIX, VOLUME_POOLS_GROUP
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncVolumeRuntimeClient
from ironpool.poollet import keys
from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet

from tests.conftest import start_apiserver, stop_apiserver
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import (
    LIBVIRT_URI,
    destroy_storage_pool,
    require_libvirt,
    start_ironpool,
    stop_process,
)
from tests.helpers.wait import eventually

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

VPOOL = f"vsnap-{secrets.token_hex(4)}"
SIZE = 64 * 1024**2
CHUNK = 256 * 1024  # the bytes the test writes and checks, at offset 0 and at 32 MiB
VOLUME_CLASSES = """\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata: {name: fast}
capabilities: {tps: 100Mi, iops: "1000"}
"""


@pytest.fixture
async def runtime() -> AsyncIterator[AsyncVolumeRuntimeClient]:
    require_libvirt()
    if shutil.which("qemu-io") is None:
        pytest.fail("qemu-io (QEMU's tools) is needed to write into a volume on the host")
    work = qemu_tmpdir("vsnap-")
    (work / "vc.yaml").write_text(VOLUME_CLASSES)
    pool_name = f"ipt-{secrets.token_hex(4)}"
    sock, log = work / "v.sock", work / "volume-runtime.log"
    proc = start_ironpool(["volume-runtime", "--libvirt-uri", LIBVIRT_URI, "--storage-pool", pool_name,
                           "--pool-path", str(work / "pool"), "--classes", str(work / "vc.yaml"),
                           "--address", f"unix://{sock}"], log)
    client = AsyncVolumeRuntimeClient.connect(f"unix://{sock}")

    async def serving() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"volume runtime exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            await asyncio.wait_for(client.version(), 1)
            return True
        except Exception:
            return False

    try:
        await eventually(serving, timeout=60, message="volume runtime serving")
        yield client
    finally:
        await client.close()
        stop_process(proc)
        destroy_storage_pool(pool_name)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
async def poollet(client: AsyncClient, runtime: AsyncVolumeRuntimeClient) -> AsyncIterator[None]:
    stop = asyncio.Event()
    opts = VolumePoolletOptions(pool=VPOOL, provider_id=f"libvirt://{VPOOL}", relist_period=0.5,
                                heartbeat_interval=2.0, delete_requeue=0.2)
    task = asyncio.create_task(run_volumepoollet(client, runtime, opts, stop))
    await client.create(VolumeClass.model_validate(
        {"metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"}}))
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)


def volume(name: str, snapshot: str | None = None, pool: str | None = VPOOL) -> Volume:
    spec: dict[str, object] = {"volumeClassRef": {"name": "fast"}, "resources": {"storage": "64Mi"}}
    if pool is not None:
        spec["volumePoolRef"] = {"name": pool}
    if snapshot is not None:
        spec["dataSource"] = {"volumeSnapshotRef": {"name": snapshot}}
    return Volume.model_validate({"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def snapshot_of(name: str, source: str) -> VolumeSnapshot:
    return VolumeSnapshot.model_validate(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"volumeRef": {"name": source}}})


async def available_path(client: AsyncClient, name: str) -> Path | None:
    v = await client.get(Volume, name, "default")
    if v.status is None or v.status.state != "Available" or v.status.access is None:
        return None
    return Path((v.status.access.volume_attributes or {})["path"])


async def ready(client: AsyncClient, name: str) -> VolumeSnapshot | None:
    s = await client.get(VolumeSnapshot, name, "default")
    return s if s.status is not None and s.status.state == "Ready" else None


async def gone(client: AsyncClient, kind: type[Volume] | type[VolumeSnapshot], name: str) -> bool:
    try:
        await client.get(kind, name, "default")
    except NotFound:
        return True
    return False


def write_pattern(path: Path, byte: int) -> None:
    """``byte`` repeated over two chunks of the qcow2's guest-visible content."""
    for offset in (0, 32 * 1024**2):
        subprocess.run(["qemu-io", "-f", "qcow2", "-c", f"write -P {byte:#x} {offset} {CHUNK}", str(path)],
                       check=True, capture_output=True)


def content(path: Path, tmp: Path) -> bytes:
    """The guest-visible bytes of the checked chunks of a qcow2 (read by converting it to raw)."""
    raw = tmp / f"{path.stem}.raw"
    subprocess.run(["qemu-img", "convert", "-U", "-f", "qcow2", "-O", "raw", str(path), str(raw)],
                   check=True, capture_output=True)
    with raw.open("rb") as f:
        head = f.read(CHUNK)
        f.seek(32 * 1024**2)
        return head + f.read(CHUNK)


async def test_snapshot_restores_its_content_into_a_new_volume_and_outlives_its_source(
        client: AsyncClient, runtime: AsyncVolumeRuntimeClient, poollet: None, tmp_path: Path) -> None:
    src = await client.create(volume("src"), namespace="default")
    src_path = await eventually(lambda: available_path(client, "src"), timeout=60, message="source Available")
    write_pattern(src_path, 0x5A)

    snap = await client.create(snapshot_of("snap", "src"), namespace="default")
    got = await eventually(lambda: ready(client, "snap"), timeout=60, message="snapshot Ready")
    assert got.status is not None and got.status.snapshot_id and got.status.last_state_transition_time
    runtime_name, _, snap_id = got.status.snapshot_id.partition("://")
    assert runtime_name and snap_id
    assert got.status.size is not None and got.status.size.value() == SIZE
    assert keys.VOLUME_SNAPSHOT_FINALIZER in (got.metadata.finalizers or [])
    assert (got.metadata.labels or {})[keys.VOLUME_POOL_LABEL] == VPOOL
    (iri,) = await runtime.list_volume_snapshots(labels={keys.VOLUME_SNAPSHOT_UID_LABEL: snap.metadata.uid})
    assert iri.metadata.id == snap_id
    assert dict(iri.metadata.labels)[keys.VOLUME_SNAPSHOT_NAME_LABEL] == "snap"
    (src_iri,) = await runtime.list_volumes(labels={keys.VOLUME_UID_LABEL: src.metadata.uid})
    assert iri.spec.volume_id == src_iri.metadata.id

    # Point in time: what the source holds afterwards is not what a restore gets.
    write_pattern(src_path, 0x00)
    await client.create(volume("restored", snapshot="snap"), namespace="default")
    restored_path = await eventually(lambda: available_path(client, "restored"), timeout=60,
                                     message="restored Volume Available")
    assert restored_path != src_path
    assert content(restored_path, tmp_path) == b"\x5a" * (2 * CHUNK)
    assert content(src_path, tmp_path) == b"\x00" * (2 * CHUNK)

    # IronCore's rule: a Volume's deletion neither waits for nor takes its snapshots.
    await client.delete(Volume, "src", "default")
    await eventually(lambda: gone(client, Volume, "src"), timeout=60, message="source Volume deleted")
    assert await runtime.list_volumes(volume_id=src_iri.metadata.id) == []
    assert [s.metadata.id for s in await runtime.list_volume_snapshots(snapshot_id=snap_id)] == [snap_id]
    assert await ready(client, "snap") is not None
    # No pool named: the apiserver binds a restored Volume to its snapshot's pool.
    again = await client.create(volume("again", snapshot="snap", pool=None), namespace="default")
    assert again.spec.volume_pool_ref is not None and again.spec.volume_pool_ref.name == VPOOL
    again_path = await eventually(lambda: available_path(client, "again"), timeout=60,
                                  message="a Volume restored after its snapshot's source is gone")
    assert content(again_path, tmp_path) == b"\x5a" * (2 * CHUNK)

    # Deleting the snapshot goes through the poollet's finalizer; its restored Volumes stay.
    await client.delete(VolumeSnapshot, "snap", "default")
    await eventually(lambda: gone(client, VolumeSnapshot, "snap"), timeout=60, message="snapshot deleted")
    assert await runtime.list_volume_snapshots(snapshot_id=snap_id) == []
    assert content(restored_path, tmp_path) == b"\x5a" * (2 * CHUNK)

    for name in ("restored", "again"):
        await client.delete(Volume, name, "default")
    for name in ("restored", "again"):
        await eventually(lambda n=name: gone(client, Volume, n), timeout=60, message=f"{name} deleted")
    assert await runtime.list_volumes() == []


async def test_volume_waits_for_its_snapshot_and_a_snapshot_for_its_source_or_fails_without(
        client: AsyncClient, runtime: AsyncVolumeRuntimeClient, poollet: None) -> None:
    await client.create(volume("early", snapshot="later"), namespace="default")

    async def waiting_for_snapshot() -> str | None:
        v = await client.get(Volume, "early", "default")
        if v.status is None or v.status.state != "Pending":
            return None
        return next((c.message for c in v.status.conditions or [] if c.type == "Ready"), None)

    message = await eventually(waiting_for_snapshot, timeout=30, message="Volume waiting for its snapshot")
    assert "VolumeSnapshot default/later (not found)" in message
    assert await runtime.list_volumes() == []

    # The snapshot comes, then its source: both are then made, in that order, with no one's help.
    await client.create(snapshot_of("later", "late-src"), namespace="default")
    await client.create(volume("late-src"), namespace="default")
    await eventually(lambda: ready(client, "later"), timeout=60, message="snapshot Ready once its source is")
    await eventually(lambda: available_path(client, "early"), timeout=60, message="restored Volume Available")

    # A source that never becomes Available keeps its snapshot Pending (held by the pool); once it is
    # deleted, the snapshot never will be taken: Failed.
    stuck = volume("stuck")
    stuck.spec.volume_class_ref.name = "no-such-class"  # type: ignore[union-attr]
    await client.create(stuck, namespace="default")
    await client.create(snapshot_of("of-stuck", "stuck"), namespace="default")

    async def state(name: str, want: str) -> VolumeSnapshot | None:
        s = await client.get(VolumeSnapshot, name, "default")
        return s if s.status is not None and s.status.state == want else None

    held = await eventually(lambda: state("of-stuck", "Pending"), timeout=30, message="snapshot Pending")
    assert (held.metadata.labels or {})[keys.VOLUME_POOL_LABEL] == VPOOL
    await client.delete(Volume, "stuck", "default")
    await eventually(lambda: state("of-stuck", "Failed"), timeout=30, message="snapshot Failed")
    taken = await runtime.list_volume_snapshots()
    assert [dict(t.metadata.labels)[keys.VOLUME_SNAPSHOT_NAME_LABEL] for t in taken] == ["later"]
    await client.delete(VolumeSnapshot, "of-stuck", "default")
    await eventually(lambda: gone(client, VolumeSnapshot, "of-stuck"), timeout=30, message="deleted")

    await client.delete(VolumeSnapshot, "later", "default")
    for name in ("early", "late-src"):
        await client.delete(Volume, name, "default")
    await eventually(lambda: gone(client, VolumeSnapshot, "later"), timeout=60, message="snapshot deleted")
    for name in ("early", "late-src"):
        await eventually(lambda n=name: gone(client, Volume, n), timeout=60, message=f"{name} deleted")
    assert await runtime.list_volumes() == [] and await runtime.list_volume_snapshots() == []


async def test_a_volume_pool_identity_takes_and_restores_snapshots(runtime: AsyncVolumeRuntimeClient,
                                                                   tmp_path: Path) -> None:
    """The volumepoollet as a joined host runs it, authenticated as its pool: the apiserver's pool
    authorizer lets it watch every snapshot and write the ones of its own Volumes."""
    admin_token, pool_token = secrets.token_hex(16), secrets.token_hex(16)
    (tmp_path / "tokens.csv").write_text(
        f'{admin_token},admin,1,"system:masters"\n{secrets.token_hex(16)},alice,2\n'
        f'{pool_token},{VOLUME_POOL_USER_PREFIX}{VPOOL},3,"{VOLUME_POOLS_GROUP}"\n')
    server = start_apiserver(tmp_path)
    admin = AsyncClient(ClientConfig(server=server.url, token=admin_token))
    as_pool = AsyncClient(ClientConfig(server=server.url, token=pool_token))
    stop = asyncio.Event()
    opts = VolumePoolletOptions(pool=VPOOL, provider_id=f"libvirt://{VPOOL}", relist_period=0.5,
                                heartbeat_interval=2.0, delete_requeue=0.2)
    task = asyncio.create_task(run_volumepoollet(as_pool, runtime, opts, stop))
    try:
        await admin.create(VolumeClass.model_validate(
            {"metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"}}))
        await admin.create(volume("src"), namespace="default")
        src_path = await eventually(lambda: available_path(admin, "src"), timeout=60,
                                    message="source Available")
        write_pattern(src_path, 0x7E)
        await admin.create(snapshot_of("snap", "src"), namespace="default")
        await eventually(lambda: ready(admin, "snap"), timeout=60, message="snapshot Ready")
        await admin.create(volume("restored", snapshot="snap", pool=None), namespace="default")
        restored = await eventually(lambda: available_path(admin, "restored"), timeout=60,
                                    message="restored Volume Available")
        assert content(restored, tmp_path) == b"\x7e" * (2 * CHUNK)
        for name in ("src", "restored"):
            await admin.delete(Volume, name, "default")
        await admin.delete(VolumeSnapshot, "snap", "default")
        await eventually(lambda: gone(admin, VolumeSnapshot, "snap"), timeout=60, message="snapshot deleted")
        for name in ("src", "restored"):
            await eventually(lambda n=name: gone(admin, Volume, n), timeout=60, message=f"{name} deleted")
        assert await runtime.list_volumes() == [] and await runtime.list_volume_snapshots() == []
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await admin.aclose()
        await as_pool.aclose()
        stop_apiserver(server)
