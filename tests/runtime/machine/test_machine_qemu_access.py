"""QEMU as libvirt's unprivileged user, on the distribution's defaults (dynamic ownership): the guest
reads what the runtime hands it (kernel, initrd, root disk overlay, Ignition through fw_cfg), the
QEMU process runs as that user, and a runtime whose folders that user cannot pass through refuses to
start, naming the folder, before it makes anything."""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.qemu_access import QemuUser, qemu_user, unreachable
from machine_runtime_helpers import RuntimeProc, domain_names, machine_request

from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import LIBVIRT_URI, start_ironpool
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.libvirt


def unprivileged_qemu() -> QemuUser:
    """QEMU's user on this host; CI runs on the distribution's defaults, where it is never root."""
    conn = libvirt.open(LIBVIRT_URI)
    try:
        user = qemu_user(conn.getCapabilities(), "qemu")
    finally:
        conn.close()
    if user is None:
        if os.environ.get("CI"):
            pytest.fail("libvirt runs QEMU as root: scripts/setup-host.sh keeps the distribution's defaults")
        pytest.skip("this host's libvirt is configured to run QEMU as root")
    return user


def qemu_pid(domain: str) -> int:
    out = subprocess.run(["pgrep", "-f", f"guest={domain},"], capture_output=True, text=True, check=False)
    pids = out.stdout.split()
    assert len(pids) == 1, f"QEMU processes of {domain}: {pids}"
    return int(pids[0])


def test_the_guest_boots_with_what_the_runtime_hands_an_unprivileged_qemu(
        runtime: RuntimeProc, test_session: str) -> None:
    user = unprivileged_qemu()
    req = machine_request(test_session, labels={"app": f"access-{test_session}"})
    req.machine.spec.ignition_data = b'{"ignition": {"version": "3.4.0"}}'
    mid = runtime.stub.CreateMachine(req).machine.metadata.id
    try:
        console = runtime.console_log(mid)
        wait_for(lambda: console.exists() and "ignition 34 bytes" in console.read_text(errors="replace"),
                 GUEST_SECONDS,
                 "the guest to print the Ignition data it read through fw_cfg")
        uid = int(Path(f"/proc/{qemu_pid(f'ironpool-{mid}')}/status").read_text()
                  .split("\nUid:", 1)[1].split()[1])
        assert uid == user.uid != 0
        # libvirt handed the files to QEMU's user for the life of the domain; nobody else reads the
        # Ignition data (it may hold keys and passwords).
        ignition = runtime.state_dir / "machines" / mid / "ignition.ign"
        st = ignition.stat()
        assert st.st_uid == user.uid and stat.S_IMODE(st.st_mode) == 0o600
    finally:
        runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: f"ironpool-{mid}" not in domain_names(), 60, "the domain to be removed")


def set_access_acl(path: Path, user_perm: tuple[int, int], other: int) -> None:
    """Give ``path`` a POSIX access ACL (the kernel's xattr format, so no acl tools are needed):
    owner rwx, one named user (uid, perms), group and mask --x, others ``other``."""
    whole = 0xFFFFFFFF  # the id field of entries that name no one
    entries = [(0x01, 7, whole), (0x02, user_perm[1], user_perm[0]), (0x04, 1, whole), (0x10, 1, whole),
               (0x20, other, whole)]
    os.setxattr(path, "system.posix_acl_access",
                struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries))


def test_the_kernel_decides_where_an_acl_overrides_the_mode_bits() -> None:
    """Mode bits that let QEMU's user through are not the last word, nor are bits that do not: the
    runtime enters the folder as that user and, when refused, reports what the shell said."""
    user = unprivileged_qemu()
    top = Path(tempfile.mkdtemp(prefix="iqa-"))
    try:
        os.chmod(top, 0o711)
        denied, allowed = top / "denied", top / "allowed"
        denied.mkdir(mode=0o711)
        set_access_acl(denied, (user.uid, 0), other=1)  # others may search, QEMU's user may not
        allowed.mkdir(mode=0o700)
        set_access_acl(allowed, (user.uid, 1), other=0)  # others may not, QEMU's user may
        found = unreachable(denied / "volumes", user)
        assert found is not None and found[0] == denied, found
        assert str(denied) in found[1], found  # what the shell said on being refused
        assert unreachable(allowed / "volumes", user) is None
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_machine_runtime_qemu_cannot_reach_refuses_to_start_naming_the_folder(
        runtime: RuntimeProc) -> None:
    user = unprivileged_qemu()
    private = Path(tempfile.mkdtemp(prefix="imq-"))  # 0700, as mkdtemp makes it
    try:
        (private / "classes.yaml").write_text((runtime.workdir / "classes.yaml").read_text())
        log = private / "runtime.log"
        proc = start_ironpool(["libvirt-runtime", "--libvirt-uri", LIBVIRT_URI,
                               "--classes", str(private / "classes.yaml"), "--images", str(runtime.images),
                               "--image-cache", str(private / "cache"),
                               "--state-dir", str(private / "state"), "--address", f"unix://{private}/m.sock",
                               "--streaming-address", "127.0.0.1:0"], log)
        assert proc.wait(60) != 0
        text = log.read_text()
        assert f"QEMU runs as {user.name}" in text and f"{private} is mode 0700" in text, text
        assert f"chmod o+x {private}" in text, text
        assert not (private / "m.sock").exists()
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_a_volume_runtime_qemu_cannot_reach_refuses_to_start_and_defines_no_pool(test_session: str) -> None:
    user = unprivileged_qemu()
    private = Path(tempfile.mkdtemp(prefix="ivq-"))
    pool = f"ironpool-vq-{test_session}"
    try:
        (private / "classes.yaml").write_text(
            "apiVersion: storage.ironcore.dev/v1alpha1\nkind: VolumeClass\nmetadata: {name: plain}\n")
        proc = subprocess.run(
            [sys.executable, "-m", "ironpool.cli.main", "volume-runtime", "--libvirt-uri", LIBVIRT_URI,
             "--storage-pool", pool, "--pool-path", str(private / "pool"),
             "--classes", str(private / "classes.yaml"), "--address", f"unix://{private}/v.sock"],
            capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode != 0
        assert f"QEMU runs as {user.name}" in proc.stderr and str(private) in proc.stderr, proc.stderr
        conn = libvirt.open(LIBVIRT_URI)
        try:
            assert pool not in {p.name() for p in conn.listAllStoragePools(0)}
        finally:
            conn.close()
        assert not (private / "pool").exists()
    finally:
        shutil.rmtree(private, ignore_errors=True)
