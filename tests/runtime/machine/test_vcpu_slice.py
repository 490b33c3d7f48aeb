"""Longer scheduler slices for emulated vCPUs: which threads are found (a /proc tree written here), and
the real syscalls on a process shaped like libvirt's QEMU (named ``guest=NAME,``, with threads named
as QEMU names its vCPUs), and a runtime told a slice starting a real domain through libvirt."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.machine import vcpu_slice
from machine_runtime_helpers import machine_request, running_runtime

from tests.helpers.runtimes import assert_vcpu_slice

# Linux keeps a fair task's own slice from 6.12 on; on older kernels the runtime asks nothing.
CUSTOM_SLICES = vcpu_slice.kernel_keeps_slices()
SLICE = vcpu_slice.DEFAULT_NS  # the most Linux grants


def _proc_entry(proc: Path, pid: int, argv: list[str], threads: dict[int, str]) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    for tid, comm in threads.items():
        (proc / str(pid) / "task" / str(tid)).mkdir(parents=True)
        (proc / str(pid) / "task" / str(tid) / "comm").write_text(comm + "\n")


def test_only_the_named_domains_qemu_and_its_emulated_vcpus_are_found(tmp_path: Path) -> None:
    qemu = "/usr/bin/qemu-system-x86_64"
    _proc_entry(tmp_path, 10, [qemu, "-name", "guest=ironpool-a,debug-threads=on"],
                {10: "qemu-system-x86", 11: "CPU 0/TCG", 12: "CPU 1/TCG", 13: "IO mon_iothread",
                 14: "worker"})
    _proc_entry(tmp_path, 20, [qemu, "-name", "guest=ironpool-ab,debug-threads=on"], {21: "CPU 0/TCG"})
    _proc_entry(tmp_path, 30, [qemu, "-name", "guest=ironpool-kvm,debug-threads=on"], {31: "CPU 0/KVM"})
    _proc_entry(tmp_path, 40, ["/bin/grep", "guest=ironpool-a,"], {40: "grep"})  # names it, is not QEMU
    (tmp_path / "self").mkdir()
    assert vcpu_slice.qemu_pids("ironpool-a", tmp_path) == [10]
    assert sorted(vcpu_slice.tcg_threads(10, tmp_path)) == [11, 12]
    assert vcpu_slice.tcg_threads(30, tmp_path) == []  # KVM vCPUs keep the default
    assert vcpu_slice.qemu_pids("ironpool-none", tmp_path) == []
    assert vcpu_slice.qemu_processes(tmp_path) == {
        "ironpool-a": [10], "ironpool-ab": [20], "ironpool-kvm": [30]}


FAKE_QEMU = textwrap.dedent("""\
    import ctypes, os, sys, threading
    libc = ctypes.CDLL(None)
    said = threading.Lock()  # one whole line per thread on stdout

    def vcpu(name, nice):
        libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        with said:
            sys.stdout.write(f"{threading.get_native_id()} {name}\\n")
            sys.stdout.flush()
        threading.Event().wait()

    for name, nice in (("CPU 0/TCG", 5), ("CPU 0/KVM", 0)):
        threading.Thread(target=vcpu, args=(name, nice), daemon=True).start()
    sys.stdin.read()
""")


@pytest.fixture
def fake_qemu(tmp_path: Path) -> Iterator[tuple[str, dict[str, int]]]:
    """A process whose command line is a QEMU's for a domain, with an emulated and a KVM vCPU thread
    (the emulated one at nice 5): ``(domain name, {thread name: tid})``."""
    name = f"ironpool-slice-test-{os.getpid()}"
    program = tmp_path / "qemu-system-x86_64"  # what the process's argv[0] says
    program.symlink_to(sys.executable)
    proc = subprocess.Popen([str(program), "-c", FAKE_QEMU, "-name", f"guest={name},debug-threads=on"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        threads = {}
        for _ in range(2):
            tid, comm = proc.stdout.readline().strip().split(" ", 1)
            threads[comm] = int(tid)
        yield name, threads
    finally:
        proc.kill()
        proc.wait()


def test_kernel_releases_that_keep_a_tasks_own_slice() -> None:
    assert vcpu_slice.kernel_keeps_slices("6.12.0") and vcpu_slice.kernel_keeps_slices("6.18.44-fc-v657")
    assert not vcpu_slice.kernel_keeps_slices("6.1.0-50-cloud-amd64")
    assert not vcpu_slice.kernel_keeps_slices("5.19.0") and not vcpu_slice.kernel_keeps_slices("weird")


def test_the_emulated_vcpu_gets_the_long_slice_and_keeps_its_nice(
    fake_qemu: tuple[str, dict[str, int]],
) -> None:
    """Where Linux keeps a task's own slice, the emulated vCPU gets it; elsewhere nothing is asked."""
    name, threads = fake_qemu
    tcg, kvm = threads["CPU 0/TCG"], threads["CPU 0/KVM"]
    tcg_before, kvm_before = vcpu_slice.sched_attr(tcg), vcpu_slice.sched_attr(kvm)
    assert vcpu_slice.lengthen(name, SLICE) == (1 if CUSTOM_SLICES else 0)
    attr = vcpu_slice.sched_attr(tcg)
    assert attr[1] == 0 and attr[3] == 5  # still SCHED_OTHER, at the nice it had
    assert attr[5] == (SLICE if CUSTOM_SLICES else tcg_before[5])
    assert vcpu_slice.sched_attr(kvm) == kvm_before  # a KVM vCPU is left alone


def test_a_domain_without_a_local_qemu_changes_nothing() -> None:
    assert vcpu_slice.lengthen(f"ironpool-absent-{os.getpid()}", SLICE) == 0


@pytest.mark.libvirt
@pytest.mark.parametrize("slice_ms", [20, 0])
def test_a_runtime_told_a_slice_gives_it_to_its_domains_emulated_vcpu(tiny_images: Path, test_session: str,
                                                                         slice_ms: int) -> None:
    """``--vcpu-slice-ms`` reaches the vCPU thread of a domain the runtime starts through libvirt, and 0
    leaves it the kernel's (the lifecycle test shows the default). A KVM domain has no emulated vCPU;
    on a kernel without custom slices the vCPU keeps the one QEMU's main thread has."""
    with running_runtime("ivs-", test_session, images=tiny_images,
                         extra_args=["--vcpu-slice-ms", str(slice_ms)]) as runtime:
        mid = runtime.stub.CreateMachine(machine_request(test_session)).machine.metadata.id
        kernels = assert_vcpu_slice(f"ironpool-{mid}", vcpu_slice.ms_to_ns(slice_ms))
        assert kernels is None or kernels < 20_000_000  # so the two cases differ
        runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
