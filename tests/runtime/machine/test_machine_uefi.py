"""UEFI machines on real libvirt/QEMU: OVMF boots the tiny image's kernel, the guest sees
/sys/firmware/efi and the Machine's efiVars, and deleting the machine leaves no NVRAM behind."""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import EFI_VARS_ANNOTATION
from ironpool.runtime.machine import firmware
from machine_runtime_helpers import (
    CLASSES_YAML,
    RuntimeProc,
    domain_names,
    machine_request,
    running_runtime,
    session_domains,
)

from tests.helpers.guests import UEFI_GUEST_SECONDS
from tests.helpers.qemu_dirs import copy_image, qemu_tmpdir
from tests.helpers.wait import wait_for

VENDOR = uuid.UUID("5b1e4e6e-3a0f-4b52-9f0c-6f7e1a2b3c4d")
LIBVIRT_NVRAM_DIR = Path("/var/lib/libvirt/qemu/nvram")
# OVMF and the kernel's EFI stub do not fit the tiny class's 128 MiB: the guest hangs before Linux.
UEFI_CLASS = """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: uefi}
  capabilities: {cpu: "1", memory: 256Mi}
"""



@pytest.fixture(scope="module")
def uefi_runtime(tiny_images: Path, test_session: str) -> Iterator[RuntimeProc]:
    """A runtime whose catalog has ``tiny-uefi``: the tiny image's kernel and initramfs, marked to
    boot under UEFI (OVMF loads the kernel's EFI stub), beside the plain BIOS ``tiny``."""
    if not Path(firmware.OVMF_CODE).is_file():  # part of the host setup: fail, never skip unseen
        pytest.fail(f"{firmware.OVMF_CODE} is missing: run scripts/setup-host.sh (it installs Debian's ovmf)")
    catalog = qemu_tmpdir("imu-cat-")
    for name in ("tiny", "tiny-uefi"):
        copy_image(tiny_images / "tiny", catalog / name)
    (catalog / "tiny-uefi" / "firmware").write_text("uefi\n")
    try:
        with running_runtime("imu-", test_session, images=catalog, classes=CLASSES_YAML + UEFI_CLASS) as proc:
            yield proc
    finally:
        shutil.rmtree(catalog, ignore_errors=True)


def _console(runtime: RuntimeProc, machine_id: str) -> str:
    path = runtime.console_log(machine_id)
    return path.read_text(errors="replace") if path.exists() else ""


def _efi_vars(*items: tuple[str, uuid.UUID, bytes]) -> dict[str, str]:
    return {EFI_VARS_ANNOTATION: json.dumps(
        [{"name": n, "uuid": str(g), "value": base64.b64encode(v).decode()} for n, g, v in items])}


def test_uefi_machine_boots_ovmf_keeps_its_efi_vars_and_leaves_no_nvram(
    uefi_runtime: RuntimeProc, test_session: str
) -> None:
    req = machine_request(test_session, cls="uefi", image="tiny-uefi",
                          annotations=_efi_vars(("IronpoolTest", VENDOR, b"kept-value")))
    mid = uefi_runtime.stub.CreateMachine(req).machine.metadata.id
    mdir = uefi_runtime.state_dir / "machines" / mid
    nvram = mdir / firmware.NVRAM_FILE
    assert nvram.is_file()

    # The guest booted under UEFI and the firmware handed it the variable (efivarfs lists NAME-GUID).
    line = wait_for(
        lambda: next((ln for ln in _console(uefi_runtime, mid).splitlines() if "firmware " in ln), None),
        UEFI_GUEST_SECONDS, "the guest to report its firmware",
    )  # fmt: skip
    assert "firmware efi" in line, line
    assert f"IronpoolTest-{VENDOR}" in line, line
    # OVMF rewrote its variable store at boot and kept the value.
    assert firmware.read_nvram(nvram)[("IronpoolTest", VENDOR)] == (firmware.ATTRIBUTES, b"kept-value")

    # The NVRAM stays with the domain: powered off and on, the guest finds the variable again.
    uefi_runtime.stub.UpdateMachinePower(mpb.UpdateMachinePowerRequest(machine_id=mid, power=mpb.POWER_OFF))
    uefi_runtime.wait_state(mid, "MACHINE_SUSPENDED", 30)
    assert nvram.is_file()
    uefi_runtime.stub.UpdateMachinePower(mpb.UpdateMachinePowerRequest(machine_id=mid, power=mpb.POWER_ON))
    wait_for(lambda: _console(uefi_runtime, mid).count(f"IronpoolTest-{VENDOR}") >= 2, UEFI_GUEST_SECONDS,
             "the guest to boot again and list the variable")  # fmt: skip

    uefi_runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: uefi_runtime.machine(mid) is None, 60, "the UEFI machine to be gone")
    assert f"ironpool-{mid}" not in domain_names()
    assert not mdir.exists()
    assert not list(LIBVIRT_NVRAM_DIR.glob(f"ironpool-{mid}*"))


def test_bios_machine_still_boots_bios(uefi_runtime: RuntimeProc, test_session: str) -> None:
    """The same kernel without the image's firmware file: SeaBIOS, no NVRAM, no <loader>."""
    req = machine_request(test_session, image="tiny", power=mpb.POWER_OFF)
    mid = uefi_runtime.stub.CreateMachine(req).machine.metadata.id
    assert not (uefi_runtime.state_dir / "machines" / mid / firmware.NVRAM_FILE).exists()
    uefi_runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: uefi_runtime.machine(mid) is None, 60, "the BIOS machine to be gone")


@pytest.mark.parametrize(
    ("image", "annotations", "words"),
    [
        ("tiny-uefi", {EFI_VARS_ANNOTATION: '[{"name": "A", "uuid": "nope", "value": ""}]'}, "[0].uuid"),
        ("tiny", _efi_vars(("A", VENDOR, b"x")), "need a machine that boots UEFI"),
    ],
)
def test_bad_efi_vars_leave_nothing_made(
    uefi_runtime: RuntimeProc, test_session: str, image: str, annotations: dict[str, str], words: str
) -> None:
    before = set((uefi_runtime.state_dir / "machines").iterdir())
    domains = set(session_domains(test_session))
    with pytest.raises(grpc.RpcError) as exc:
        uefi_runtime.stub.CreateMachine(machine_request(test_session, image=image, annotations=annotations))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in (exc.value.details() or "")
    assert EFI_VARS_ANNOTATION in (exc.value.details() or "")
    assert set((uefi_runtime.state_dir / "machines").iterdir()) == before
    assert set(session_domains(test_session)) == domains


def test_a_host_without_the_firmware_refuses_uefi_machines_naming_it(
    tiny_images: Path, test_session: str
) -> None:
    catalog = qemu_tmpdir("imu-cat-")
    copy_image(tiny_images / "tiny", catalog / "tiny-uefi")
    (catalog / "tiny-uefi" / "firmware").write_text("uefi\n")
    missing = str(catalog / "no-OVMF_CODE.fd")
    try:
        with running_runtime("imu-", test_session, images=catalog, extra_args=["--ovmf-code", missing]) as rt:
            with pytest.raises(grpc.RpcError) as exc:
                rt.stub.CreateMachine(machine_request(test_session, image="tiny-uefi"))
            assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert missing in (exc.value.details() or "") and "ovmf" in (exc.value.details() or "")
            assert list((rt.state_dir / "machines").iterdir()) == []
    finally:
        shutil.rmtree(catalog, ignore_errors=True)
