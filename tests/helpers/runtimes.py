"""Runtime subprocesses and libvirt clean-up, shared by the runtime, IRI, poollet and e2e tests.

libvirt is imported inside the functions so test modules that only skip without it still import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest

LIBVIRT_URI = "qemu:///system"
REPO = Path(__file__).resolve().parents[2]
TEST_IMAGES = Path(os.environ.get("IRONPOOL_TEST_IMAGES", "/var/cache/ironpool/test-images"))


def libvirt_ok() -> bool:
    """Whether libvirtd answers at :data:`LIBVIRT_URI` (tests skip otherwise)."""
    try:
        import libvirt

        libvirt.registerErrorHandler(lambda _c, _e: None, None)
        libvirt.open(LIBVIRT_URI).close()
        return True
    except Exception:
        return False


def require_libvirt() -> None:
    """Skip a libvirt test on a developer box without libvirtd; fail it in CI, where
    ``scripts/setup-host.sh`` must have started libvirtd (a silent skip would prove nothing)."""
    if libvirt_ok():
        return
    message = f"libvirt not reachable at {LIBVIRT_URI} (run scripts/setup-host.sh)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def build_debian_image(out: Path = TEST_IMAGES) -> Path:
    """The catalog holding ``debian-12.qcow2``, built by ``ironpool image build`` once per recipe
    (a minute or two the first time, from Debian's mirror; instant while the recipe is unchanged)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ironpool.cli.main", "image", "build", "debian-12", "--images", str(out)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"ironpool image build debian-12 failed: {proc.stderr[-3000:]}")
    return out


def build_tiny_image(out: Path = TEST_IMAGES) -> Path:
    """The catalog holding the tiny image, built once per machine (the kernel .deb is cached)."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-tiny-image.sh"), str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"build-tiny-image.sh failed: {proc.stderr[-2000:]}")
    return out


def start_ironpool(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``ironpool ARGV`` as a subprocess writing stdout and stderr to ``log_path``."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def wait_serving(
    proc: subprocess.Popen[bytes], probe: Callable[[], bool], log_path: Path, what: str, timeout: float = 30.0
) -> None:
    """Poll ``probe`` until it is true; fail the test with the log's tail if ``proc`` exits or
    ``timeout`` passes (the process is then stopped)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}: {log_path.read_text()[-3000:]}")
        if probe():
            return
        if time.monotonic() > deadline:
            stop_process(proc)
            pytest.fail(f"{what} not serving after {timeout}s: {log_path.read_text()[-3000:]}")
        time.sleep(0.05)


def rpc_answers(call: Callable[[], object]) -> bool:
    """A probe for :func:`wait_serving`: whether a gRPC call (e.g. ``Version``) succeeds."""
    try:
        call()
        return True
    except grpc.RpcError:
        return False


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within ``timeout`` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def destroy_storage_pool(name: str) -> None:
    """Remove a test storage pool: its volumes, then the pool definition (a missing pool is fine)."""
    import libvirt

    conn = libvirt.open(LIBVIRT_URI)
    try:
        try:
            pool = conn.storagePoolLookupByName(name)
        except libvirt.libvirtError:
            return
        # Each step on its own: a volume still in use or a failed refresh must not leave the pool
        # defined (a leaked definition outlives the test's folder).
        if pool.isActive():
            with contextlib.suppress(libvirt.libvirtError):
                pool.refresh(0)
                for vol in pool.listAllVolumes(0):
                    with contextlib.suppress(libvirt.libvirtError):
                        vol.delete(0)
            with contextlib.suppress(libvirt.libvirtError):
                pool.destroy()
        pool.undefine()
    finally:
        conn.close()


def _ironpool_domains(matches: Callable[[Any], bool]) -> dict[str, int]:
    """The ``ironpool-`` domains whose machine record ``matches``: name -> libvirt state."""
    import libvirt
    from ironpool.runtime.machine.domain_xml import parse_metadata
    from ironpool.runtime.machine.model import METADATA_NS

    libvirt.registerErrorHandler(lambda _c, _e: None, None)  # races with deletion are expected
    out: dict[str, int] = {}
    conn = libvirt.open(LIBVIRT_URI)
    try:
        for dom in conn.listAllDomains(0):
            if not dom.name().startswith("ironpool-"):
                continue
            try:
                rec = parse_metadata(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, 0))
                if matches(rec):
                    out[dom.name()] = int(dom.state()[0])
            except (libvirt.libvirtError, ValueError, TypeError, KeyError):
                continue
    finally:
        conn.close()
    return out


def labelled_domains(label: str, value: str) -> dict[str, int]:
    """The ``ironpool-`` domains whose machine record carries ``label=value``: name -> libvirt state.
    Other domains (other tests', a running ``ironpool up``'s) are left out."""
    return _ironpool_domains(lambda rec: rec.labels.get(label) == value)


def owned_domains(state_dir: Path) -> dict[str, int]:
    """The domains of the machine runtime whose state folder is ``state_dir``: name -> libvirt state."""
    owner = str(state_dir.absolute())
    return _ironpool_domains(lambda rec: rec.owner == owner)


def remove_domains(names: Iterable[str]) -> None:
    """Destroy and undefine the named domains (with their NVRAM and volume secrets); ones already
    gone are skipped."""
    import libvirt

    names = list(names)
    conn = libvirt.open(LIBVIRT_URI)
    try:
        def destroy(name: str) -> None:
            with contextlib.suppress(libvirt.libvirtError):
                conn.lookupByName(name).destroy()

        # libvirt waits for each QEMU to exit (a second or two under TCG on a busy host): twenty
        # domains one after another took 40 s of a test's teardown.
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(destroy, names))
        for name in names:
            with contextlib.suppress(libvirt.libvirtError):
                conn.lookupByName(name).undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        # The libvirt secrets of their encrypted volumes ("ironpool-<id> volume <name>").
        for secret in conn.listAllSecrets(0):
            with contextlib.suppress(libvirt.libvirtError):
                description = secret.XMLDesc(0)
                if any(f"<description>{name} volume " in description for name in names):
                    secret.undefine()
    finally:
        conn.close()


@dataclass(kw_only=True)
class RuntimeProcess:
    """An ``ironpool`` runtime subprocess and a gRPC channel to it; restartable so tests can kill -9
    it. Subclasses say how to start it (:meth:`argv`) and how to ask it something cheap (:meth:`probe`)."""

    what: ClassVar[str] = "runtime"

    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    channel: grpc.Channel | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def target(self) -> str:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def probe(self) -> object:
        """One cheap RPC (``Version``); raises ``grpc.RpcError`` while the runtime is not serving."""
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> None:
        log_path = self.workdir / f"runtime-{len(self.logs)}.log"
        self.logs.append(log_path)
        self.process = start_ironpool(self.argv(), log_path)
        self.channel = grpc.insecure_channel(self.target)
        wait_serving(self.process, lambda: rpc_answers(self.probe), log_path, self.what, timeout)

    def log_text(self) -> str:
        return self.logs[-1].read_text()[-3000:] if self.logs else ""

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._close_channel()

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self._close_channel()

    def _close_channel(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None


def agent_report(domain: str) -> tuple[str, set[str]] | None:
    """The guest's hostname and IPv4 addresses as its QEMU guest agent tells libvirt; None until
    the agent answers."""
    import libvirt

    conn = libvirt.open(LIBVIRT_URI)
    try:
        dom = conn.lookupByName(domain)
        try:
            name = dom.hostname(libvirt.VIR_DOMAIN_GET_HOSTNAME_AGENT)
            ifaces = dom.interfaceAddresses(libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
        except libvirt.libvirtError:
            return None
        addrs = {a["addr"] for i in ifaces.values() for a in (i.get("addrs") or [])
                 if a["type"] == libvirt.VIR_IP_ADDR_TYPE_IPV4 and a["addr"] != "127.0.0.1"}
        return name, addrs
    finally:
        conn.close()


def assert_vcpu_slice(domain: str, asked_ns: int) -> int | None:
    """Check that ``domain``'s emulated vCPU has the slice a runtime asked with ``asked_ns``: that one
    where the kernel keeps a task's own slice, else (or with 0) the kernel's, as QEMU's main thread
    has it. A KVM domain has no emulated vCPU (None); otherwise the kernel's slice is returned."""
    import xml.etree.ElementTree as ET

    import libvirt
    from ironpool.runtime.machine import vcpu_slice

    conn = libvirt.open(LIBVIRT_URI)
    try:
        emulated = ET.fromstring(conn.lookupByName(domain).XMLDesc(0)).get("type") == "qemu"
    finally:
        conn.close()
    qemu = vcpu_slice.qemu_pids(domain)
    vcpus = [tid for pid in qemu for tid in vcpu_slice.tcg_threads(pid)]
    assert len(qemu) == 1 and len(vcpus) == (1 if emulated else 0), (qemu, vcpus)
    if not vcpus:
        return None
    kernels: int = vcpu_slice.sched_attr(qemu[0])[5]
    expected = asked_ns if asked_ns and vcpu_slice.kernel_keeps_slices() else kernels
    assert vcpu_slice.sched_attr(vcpus[0])[5] == expected, (domain, asked_ns, kernels)
    return kernels
