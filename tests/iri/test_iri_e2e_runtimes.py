"""The real ironpool runtimes reached over ssh:// (a real sshd), with our client, the CLI and the
independently built client. Needs libvirtd (qemu:///system)."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from iri_fakes import Sshd
from iri_independent import IndependentClient
from ironpool.cli.main import cli
from ironpool.iri.client import MachineRuntimeClient, VolumeRuntimeClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.ssh import SSHOptions
from ironpool.iri.transport import connect

from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import (
    LIBVIRT_URI,
    destroy_storage_pool,
    require_libvirt,
    start_ironpool,
    stop_process,
    wait_serving,
)
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.libvirt

VOLUME_CLASSES = """\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata:
  name: fast
capabilities:
  tps: 100Mi
  iops: "1000"
"""


MACHINE_CLASSES = """\
apiVersion: compute.ironcore.dev/v1alpha1
kind: MachineClass
metadata: {name: iri-e2e-small}
capabilities: {cpu: "1", memory: 128Mi}
"""


@dataclass
class Runtime:
    socket: str
    process: subprocess.Popen[bytes]
    log: Path


def _start(work: Path, sock: str, argv: list[str]) -> Runtime:
    """Start ``ironpool <argv>`` and wait until its socket accepts gRPC."""
    log = work / "runtime.log"
    proc = start_ironpool(argv, log)
    channel = grpc.insecure_channel(f"unix:{sock}")

    def ready() -> bool:
        future = grpc.channel_ready_future(channel)
        try:
            future.result(timeout=0.5)
            return True
        except grpc.FutureTimeoutError:
            future.cancel()  # else its polling thread outlives the channel closed below
            return False

    try:
        wait_serving(proc, ready, log, argv[0])
        return Runtime(sock, proc, log)
    finally:
        channel.close()


@pytest.fixture
def volume_runtime() -> Iterator[Runtime]:
    require_libvirt()
    work = qemu_tmpdir("iri-e2e-")
    (work / "classes.yaml").write_text(VOLUME_CLASSES)
    pool = f"ironpool-iri-{secrets.token_hex(4)}"
    sock = str(work / "vr.sock")
    try:
        rt = _start(work, sock, [
            "volume-runtime", "--libvirt-uri", LIBVIRT_URI, "--storage-pool", pool,
            "--pool-path", str(work / "pool"), "--classes", str(work / "classes.yaml"),
            "--address", f"unix://{sock}",
        ])  # fmt: skip
        yield rt
        stop_process(rt.process)
    finally:
        destroy_storage_pool(pool)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def machine_runtime() -> Iterator[Runtime]:
    require_libvirt()
    work = qemu_tmpdir("iri-e2e-")
    (work / "classes.yaml").write_text(MACHINE_CLASSES)
    (work / "images").mkdir()
    sock = str(work / "mr.sock")
    try:
        rt = _start(work, sock, [
            "libvirt-runtime", "--libvirt-uri", LIBVIRT_URI, "--classes", str(work / "classes.yaml"),
            "--images", str(work / "images"), "--image-cache", str(work / "image-cache"),
            "--state-dir", str(work / "state"),
            "--streaming-address", "127.0.0.1:0", "--address", f"unix://{sock}",
        ])  # fmt: skip
        yield rt
        stop_process(rt.process)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _opts(sshd: Sshd) -> SSHOptions:
    return SSHOptions(
        key_filename=str(sshd.client_key),
        known_hosts=str(sshd.known_hosts),
        allow_agent=False,
        look_for_keys=False,
    )


def _cli_args(endpoint: str, sshd: Sshd) -> list[str]:
    """``ironpool iri`` reaching ``endpoint`` through the test sshd."""
    return ["iri", "-a", endpoint, "--ssh-key", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]


def test_volume_runtime_over_ssh(volume_runtime: Runtime, sshd: Sshd) -> None:
    endpoint = sshd.endpoint(volume_runtime.socket)
    with VolumeRuntimeClient(endpoint, ssh_options=_opts(sshd)) as c:
        assert c.version().runtime_name
        [cls] = [s for s in c.status() if s.volume_class.name == "fast"]
        assert cls.volume_class.capabilities.iops == 1000 and cls.quantity > 0
        spec = volume_pb2.VolumeSpec(resources=volume_pb2.VolumeResources(storage_bytes=64 << 20))
        setattr(spec, "class", "fast")
        created = c.create_volume(
            volume_pb2.Volume(metadata=meta_pb2.ObjectMetadata(labels={"iri-e2e": "yes"}), spec=spec)
        )
        vid = created.metadata.id
        assert [v.metadata.id for v in c.list_volumes(labels={"iri-e2e": "yes"})] == [vid]

        # The independently built client reads the same volume through the same tunnel.
        independent = IndependentClient(c.channel)
        flt = independent.message("volume.v1alpha1.VolumeFilter")(id=vid)
        req = independent.message("volume.v1alpha1.ListVolumesRequest")(filter=flt)
        [listed] = independent.call("volume.v1alpha1", "VolumeRuntime", "ListVolumes", req).volumes
        assert listed.metadata.labels["iri-e2e"] == "yes"
        assert getattr(listed.spec, "class") == "fast"
        assert listed.spec.resources.storage_bytes == 64 << 20

        # And the CLI, over ssh as well.
        res = CliRunner().invoke(cli, [*_cli_args(endpoint, sshd), "get", "volumes", "-l", "iri-e2e=yes"])
        assert res.exit_code == 0, res.output
        assert res.output.splitlines()[1].split()[:3] == [vid, "fast", "64Mi"]

        c.delete_volume(vid)
        wait_for(lambda: not c.list_volumes(vid), 30, "the volume to be unlisted after delete", 0.05)


def test_volume_runtime_same_calls_over_unix_and_ssh(volume_runtime: Runtime, sshd: Sshd) -> None:
    direct = connect(f"unix://{volume_runtime.socket}")
    tunnelled = connect(sshd.endpoint(volume_runtime.socket), ssh_options=_opts(sshd))
    try:
        a = VolumeRuntimeClient(direct).status()
        b = VolumeRuntimeClient(tunnelled).status()
        # quantity is free disk space, which other processes change between the two calls.
        assert [s.volume_class for s in a] == [s.volume_class for s in b]
        assert all(s.quantity > 0 for s in a + b)
    finally:
        direct.close()
        tunnelled.close()


def test_machine_runtime_over_ssh(machine_runtime: Runtime, sshd: Sshd) -> None:
    endpoint = sshd.endpoint(machine_runtime.socket)
    with MachineRuntimeClient(endpoint, ssh_options=_opts(sshd)) as c:
        assert c.version().runtime_name
        assert "iri-e2e-small" in [s.machine_class.name for s in c.status()]
        # Powered off: the domain is defined but QEMU is not started, so this stays cheap.
        spec = machine_pb2.MachineSpec(power=machine_pb2.POWER_OFF)
        setattr(spec, "class", "iri-e2e-small")
        spec.guest_config.hostname = "iri-e2e"
        created = c.create_machine(
            machine_pb2.Machine(metadata=meta_pb2.ObjectMetadata(labels={"iri-e2e": "machine"}), spec=spec)
        )
        mid = created.metadata.id
        try:
            assert [m.metadata.id for m in c.list_machines(labels={"iri-e2e": "machine"})] == [mid]

            independent = IndependentClient(c.channel)
            flt = independent.message("machine.v1alpha1.MachineFilter")(label_selector={"iri-e2e": "machine"})
            req = independent.message("machine.v1alpha1.ListMachinesRequest")(filter=flt)
            [listed] = independent.call("machine.v1alpha1", "MachineRuntime", "ListMachines", req).machines
            assert listed.metadata.id == mid
            assert getattr(listed.spec, "class") == "iri-e2e-small"
            assert listed.spec.power == 1  # POWER_OFF
            assert listed.metadata.created_at > 1_000_000_000_000_000_000

            args = [*_cli_args(endpoint, sshd), "get", "machines", "-l", "iri-e2e=machine"]
            res = CliRunner().invoke(cli, args)
            assert res.exit_code == 0, res.output
            assert res.output.splitlines()[1].split()[:3] == [mid, "iri-e2e-small", "OFF"]
        finally:
            c.delete_machine(mid)
        wait_for(lambda: not c.list_machines(mid), 30, "the machine to be unlisted after delete", 0.05)
