"""Helpers for the machine runtime tests: runtime subprocesses, waits, request builders, cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc

LIBVIRT_URI = "qemu:///system"
TEST_LABEL = "ironpool.dev/test-session"
REPO = Path(__file__).resolve().parents[3]
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

T = TypeVar("T")


def libvirt_ok() -> bool:
    try:
        import libvirt

        libvirt.registerErrorHandler(lambda _c, _e: None, None)
        libvirt.open(LIBVIRT_URI).close()
        return True
    except Exception:
        return False


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll ``fn`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@dataclass
class RuntimeProc:
    """One ``ironpool libvirt-runtime`` subprocess; restartable so tests can kill -9 it."""

    workdir: Path
    images: Path
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        return self.workdir / "m.sock"

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    def console_log(self, machine_id: str) -> Path:
        return self.state_dir / "machines" / machine_id / "console.log"

    def start(self, timeout: float = 30.0) -> None:
        classes = self.workdir / "classes.yaml"
        classes.write_text(CLASSES_YAML)
        log_path = self.workdir / f"runtime-{len(self.logs)}.log"
        self.logs.append(log_path)
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ironpool.cli.main",
                    "libvirt-runtime",
                    "--libvirt-uri",
                    LIBVIRT_URI,
                    "--classes",
                    str(classes),
                    "--images",
                    str(self.images),
                    "--state-dir",
                    str(self.state_dir),
                    "--address",
                    f"unix://{self.socket}",
                    "--streaming-address",
                    "127.0.0.1:0",
                    "--shutdown-timeout",
                    "8",
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.channel = grpc.insecure_channel(f"unix:{self.socket}")
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"machine runtime exited with {self.process.returncode}: {self.log_text()}")
            try:
                self.stub.Version(mpb.VersionRequest(), timeout=1)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    pytest.fail(f"machine runtime not serving after {timeout}s: {self.log_text()}")
                time.sleep(0.05)

    def log_text(self) -> str:
        return self.logs[-1].read_text()[-3000:] if self.logs else ""

    @property
    def stub(self) -> mgrpc.MachineRuntimeStub:
        assert self.channel is not None
        return mgrpc.MachineRuntimeStub(self.channel)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._close_channel()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_channel()

    def _close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None

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
    import libvirt

    found: list[str] = []
    conn = libvirt.open(LIBVIRT_URI)
    try:
        for dom in conn.listAllDomains(0):
            if not dom.name().startswith("ironpool-"):
                continue
            try:
                xml = dom.metadata(
                    libvirt.VIR_DOMAIN_METADATA_ELEMENT, "https://ironpool.dev/iri/machine/v1", 0
                )
            except libvirt.libvirtError:
                continue
            start, end = xml.find(">") + 1, xml.rfind("<")
            try:
                labels = json.loads(_unescape(xml[start:end])).get("labels", {})
            except ValueError:
                continue
            if labels.get(TEST_LABEL) == session:
                found.append(dom.name())
    finally:
        conn.close()
    return found


def remove_test_domains(session: str) -> list[str]:
    """Destroy and undefine every ``ironpool-`` domain labelled with this test session."""
    import libvirt

    names = session_domains(session)
    conn = libvirt.open(LIBVIRT_URI)
    try:
        for name in names:
            with contextlib.suppress(libvirt.libvirtError):
                dom = conn.lookupByName(name)
                with contextlib.suppress(libvirt.libvirtError):
                    dom.destroy()
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    finally:
        conn.close()
    return names


def _unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", '"')
        .replace("&apos;", "'")
        .replace("&amp;", "&")
    )


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
