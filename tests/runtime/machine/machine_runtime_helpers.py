"""Helpers for the machine runtime tests: runtime subprocesses, waits, request builders, cleanup."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc

from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI, RuntimeProcess, labelled_domains, remove_domains
from tests.helpers.wait import wait_for

TEST_LABEL = "ironpool.dev/test-session"
GiB = 1 << 30

CLASSES_YAML = """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: tiny}
  capabilities: {cpu: "1", memory: 128Mi}
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: huge}
  capabilities: {cpu: "64", memory: 1Ti}
"""


@dataclass(kw_only=True)
class RuntimeProc(RuntimeProcess):
    """One ``ironpool libvirt-runtime`` subprocess; restartable so tests can kill -9 it."""

    what: ClassVar[str] = "machine runtime"

    images: Path
    extra_args: list[str] = field(default_factory=list)
    classes: str = CLASSES_YAML

    @property
    def socket(self) -> Path:
        return self.workdir / "m.sock"

    @property
    def target(self) -> str:
        return f"unix:{self.socket}"

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    def console_log(self, machine_id: str) -> Path:
        return self.state_dir / "machines" / machine_id / "console.log"

    def start(self, timeout: float = 30.0) -> None:
        (self.workdir / "classes.yaml").write_text(self.classes)
        super().start(timeout)

    def argv(self) -> list[str]:
        return [
            "libvirt-runtime",
            "--libvirt-uri",
            LIBVIRT_URI,
            "--classes",
            str(self.workdir / "classes.yaml"),
            "--images",
            str(self.images),
            "--image-cache",
            str(self.workdir / "image-cache"),
            "--state-dir",
            str(self.state_dir),
            "--address",
            f"unix://{self.socket}",
            "--streaming-address",
            "127.0.0.1:0",
            "--shutdown-timeout",
            "8",
            *self.extra_args,
        ]

    def probe(self) -> object:
        return self.stub.Version(mpb.VersionRequest(), timeout=1)

    @property
    def stub(self) -> mgrpc.MachineRuntimeStub:
        assert self.channel is not None
        return mgrpc.MachineRuntimeStub(self.channel)

    # -- conveniences -----------------------------------------------------------------------
    def machines(self, **selector: str) -> list[mpb.Machine]:
        req = mpb.ListMachinesRequest(filter=mpb.MachineFilter(label_selector=selector))
        return list(self.stub.ListMachines(req).machines)

    def machine(self, machine_id: str) -> mpb.Machine | None:
        req = mpb.ListMachinesRequest(filter=mpb.MachineFilter(id=machine_id))
        found = list(self.stub.ListMachines(req).machines)
        return found[0] if found else None

    def state(self, machine_id: str) -> str:
        m = self.machine(machine_id)
        return "GONE" if m is None else mpb.MachineState.Name(m.status.state)

    def wait_state(self, machine_id: str, state: str, timeout: float = 30.0) -> None:
        wait_for(lambda: self.state(machine_id) == state, timeout, f"machine {machine_id} to be {state}")


def machine_request(
    session: str,
    cls: str = "tiny",
    image: str = "tiny",
    power: int = mpb.POWER_ON,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> mpb.CreateMachineRequest:
    spec = mpb.MachineSpec(power=power)  # type: ignore[arg-type]
    setattr(spec, "class", cls)
    if image:
        spec.volumes.add(
            name="root", device="oda", local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image=image))
        )
    machine = mpb.Machine(spec=spec)
    machine.metadata.labels.update({TEST_LABEL: session, **(labels or {})})
    machine.metadata.annotations.update(annotations or {})
    return mpb.CreateMachineRequest(machine=machine)


def session_domains(session: str) -> list[str]:
    """Names of the ``ironpool-`` domains labelled with this test session (others' are ignored)."""
    return list(labelled_domains(TEST_LABEL, session))


def remove_test_domains(session: str) -> list[str]:
    """Destroy and undefine every ``ironpool-`` domain labelled with this test session."""
    names = session_domains(session)
    remove_domains(names)
    return names


@contextlib.contextmanager
def running_runtime(prefix: str, test_session: str, **options: Any) -> Iterator[RuntimeProc]:
    """A started ``ironpool libvirt-runtime`` (``options`` as :class:`RuntimeProc` takes them) in a new
    folder QEMU's user can reach; afterwards stopped, this session's domains and the folder removed."""
    workdir = qemu_tmpdir(prefix)
    proc = RuntimeProc(workdir=workdir, **options)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        remove_test_domains(test_session)
        shutil.rmtree(workdir, ignore_errors=True)


def domain_names() -> set[str]:
    import libvirt

    conn = libvirt.open(LIBVIRT_URI)
    try:
        return {d.name() for d in conn.listAllDomains(0)}
    finally:
        conn.close()


def domain_state(name: str) -> int | None:
    import libvirt

    conn = libvirt.open(LIBVIRT_URI)
    try:
        return int(conn.lookupByName(name).state()[0])
    except libvirt.libvirtError:
        return None
    finally:
        conn.close()
