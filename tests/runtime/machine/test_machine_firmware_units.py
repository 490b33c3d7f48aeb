"""UEFI without a guest: the catalog's firmware file, efiVars checks, the NVRAM file and the domain XML."""

from __future__ import annotations

import base64
import json
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ironpool.iri.labels import EFI_VARS_ANNOTATION
from ironpool.runtime.errors import FailedPrecondition, InvalidArgument
from ironpool.runtime.images import Image, ImageCatalog
from ironpool.runtime.images.errors import NotAnImage
from ironpool.runtime.machine import firmware
from ironpool.runtime.machine.domain_xml import DomainOptions, domain_element
from ironpool.runtime.machine.model import MachineRecord

GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
VENDOR = uuid.UUID("5b1e4e6e-3a0f-4b52-9f0c-6f7e1a2b3c4d")


@pytest.fixture
def ovmf() -> None:
    """OVMF is part of the host setup (scripts/setup-host.sh installs Debian's ovmf): without it the
    test fails naming what is missing, rather than passing unseen."""
    for path in (firmware.OVMF_CODE, firmware.OVMF_VARS):
        if not Path(path).is_file():
            pytest.fail(f"{path} is missing: run scripts/setup-host.sh (it installs Debian's ovmf)")


def _annotation(items: object) -> dict[str, str]:
    return {EFI_VARS_ANNOTATION: json.dumps(items)}


def _bundle(root: Path, name: str, firmware_word: str | None) -> None:
    (root / name).mkdir()
    (root / name / "kernel").write_bytes(b"k")
    if firmware_word is not None:
        (root / name / "firmware").write_text(firmware_word + "\n")


def test_catalog_reads_the_firmware_an_image_asks_for(tmp_path: Path) -> None:
    _bundle(tmp_path, "plain", None)
    _bundle(tmp_path, "efi", "UEFI")
    _bundle(tmp_path, "old", "bios")
    _bundle(tmp_path, "odd", "coreboot")
    (tmp_path / "disk.qcow2").write_bytes(b"")
    (tmp_path / "disk.firmware").write_text("uefi")
    catalog = ImageCatalog(tmp_path)
    assert catalog.resolve("plain").firmware == ""
    assert catalog.resolve("efi").firmware == "uefi"
    assert catalog.resolve("old").firmware == ""
    assert catalog.resolve("disk").firmware == "uefi"
    with pytest.raises(NotAnImage, match="'coreboot'"):
        catalog.resolve("odd")


def test_efi_vars_are_read_from_the_annotation() -> None:
    value = base64.b64encode(b"\x01\x02hello").decode()
    got = firmware.efi_vars(_annotation([{"name": "Test", "uuid": str(VENDOR), "value": value}]), "m")
    assert got == [firmware.NvramVariable("Test", VENDOR, b"\x01\x02hello")]
    assert firmware.efi_vars({}, "m") == []


@pytest.mark.parametrize(
    ("items", "field"),
    [
        ([{"name": "", "uuid": GUID, "value": ""}], "[0].name"),
        ([{"name": "A", "uuid": "not-a-guid", "value": ""}], "[0].uuid"),
        ([{"name": "A", "uuid": GUID, "value": "!!"}], "[0].value"),
        ([{"name": "A", "uuid": GUID, "value": 3}], "[0].value"),
        ([{"name": "A", "uuid": GUID}, {"name": "A", "uuid": str(VENDOR)}], "[1].name"),
        ({"name": "A"}, "must be a JSON list"),
        (["A"], "[0]: must be an object"),
    ],
)
def test_bad_efi_vars_are_refused_naming_the_entry(items: object, field: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        firmware.efi_vars(_annotation(items), "machine.metadata.annotations")
    assert field in exc.value.message
    assert EFI_VARS_ANNOTATION in exc.value.message


def test_efi_vars_for_a_bios_machine_are_refused(tmp_path: Path) -> None:
    items = _annotation([{"name": "A", "uuid": GUID, "value": ""}])
    with pytest.raises(InvalidArgument, match="need a machine that boots UEFI"):
        firmware.plan_nvram([Image(name="tiny")], items, firmware.OvmfPaths(), tmp_path / "n", "machine")
    bios = firmware.plan_nvram([Image(name="tiny")], {}, firmware.OvmfPaths(), tmp_path / "n", "m")
    assert bios == ("", [])


def test_a_host_without_ovmf_refuses_uefi_machines(tmp_path: Path) -> None:
    missing = firmware.OvmfPaths(code=str(tmp_path / "CODE.fd"), vars_template=str(tmp_path / "VARS.fd"))
    with pytest.raises(FailedPrecondition, match="ovmf package"):
        firmware.plan_nvram([Image(name="e", firmware="uefi")], {}, missing, tmp_path / "n", "machine")


@pytest.mark.usefixtures("ovmf")
def test_nvram_holds_the_variables_and_only_its_owner_reads_it(tmp_path: Path) -> None:
    nvram = tmp_path / "nvram.fd"
    variables = [firmware.NvramVariable("IronpoolTest", VENDOR, b"value-1")]
    firmware.write_nvram(firmware.OvmfPaths(), nvram, variables)
    assert nvram.stat().st_mode & 0o777 == 0o600
    assert nvram.stat().st_size == Path(firmware.OVMF_VARS).stat().st_size
    assert firmware.read_nvram(nvram)[("IronpoolTest", VENDOR)] == (firmware.ATTRIBUTES, b"value-1")
    with pytest.raises(FileExistsError):  # never overwrites a machine's NVRAM
        firmware.write_nvram(firmware.OvmfPaths(), nvram, [])


@pytest.mark.usefixtures("ovmf")
def test_variables_that_do_not_fit_the_store_are_refused(tmp_path: Path) -> None:
    big = [firmware.NvramVariable(f"V{i}", VENDOR, b"x" * 30000) for i in range(20)]
    with pytest.raises(InvalidArgument, match="do not fit"):
        firmware.write_nvram(firmware.OvmfPaths(), tmp_path / "nvram.fd", big)
    assert not (tmp_path / "nvram.fd").exists()


def test_domain_of_a_uefi_machine_names_ovmf_and_its_nvram(tmp_path: Path) -> None:
    rec = MachineRecord(id=uuid.uuid4().hex, class_name="tiny", memory_bytes=1 << 27)
    bios = domain_element(rec, DomainOptions(), tmp_path / "console.log", None, None)
    assert bios.find("os/loader") is None and bios.find("os/nvram") is None
    rec.nvram = str(tmp_path / "nvram.fd")
    dom = domain_element(rec, DomainOptions(), tmp_path / "console.log", None, None)
    loader, nvram = dom.find("os/loader"), dom.find("os/nvram")
    assert loader is not None and nvram is not None, ET.tostring(dom, encoding="unicode")
    assert (loader.text, loader.get("type"), loader.get("readonly")) == (firmware.OVMF_CODE, "pflash", "yes")
    assert (nvram.text, nvram.get("template")) == (rec.nvram, firmware.OVMF_VARS)
