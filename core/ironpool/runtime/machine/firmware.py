"""UEFI machines: which machines boot OVMF, their EFI variables, and the NVRAM file that holds them.

A machine boots UEFI when one of the images it starts from asks for it (see
:mod:`ironpool.runtime.images.catalog`). Its NVRAM is a copy of OVMF's VARS template with the
Machine's ``efiVars`` written in (by ``virt-firmware``, the edk2 variable store writer of the
``virt-fw-vars`` tool), kept in the machine's folder and named in the domain's ``<nvram>``: libvirt
undefines the domain with ``VIR_DOMAIN_UNDEFINE_NVRAM`` (see :mod:`.guest`) and the runtime removes
the folder, so no NVRAM outlives its machine.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from ironpool.iri.labels import EFI_VARS_ANNOTATION
from ironpool.runtime.errors import FailedPrecondition, InvalidArgument
from ironpool.runtime.images import Image

UEFI = "uefi"
# Debian's ovmf package: the 4 MiB builds without Secure Boot, which need no SMM and so boot on
# the i440fx ("pc") machine type the runtime uses.
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
NVRAM_FILE = "nvram.fd"
# Non-volatile, boot services and runtime access: without the last the booted OS cannot read them
# (virt-firmware's default leaves it out).
ATTRIBUTES = 0x1 | 0x2 | 0x4
MAX_EFI_VARS = 64
MAX_EFI_VALUE_BYTES = 32 * 1024


@dataclass(frozen=True)
class OvmfPaths:
    """The firmware code a UEFI domain boots and the variable store its NVRAM starts from."""

    code: str = OVMF_CODE
    vars_template: str = OVMF_VARS


@dataclass(frozen=True)
class NvramVariable:
    """One EFI variable to write: its name, vendor GUID and raw value."""

    name: str
    guid: uuid.UUID
    value: bytes


def efi_vars(annotations: dict[str, str], field: str) -> list[NvramVariable]:
    """The EFI variables an IRI machine's annotations carry; InvalidArgument naming the entry."""
    text = annotations.get(EFI_VARS_ANNOTATION, "")
    if not text:
        return []
    where = f"{field}[{EFI_VARS_ANNOTATION!r}]"
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{where}: not JSON ({exc})") from exc
    if not isinstance(items, list):
        raise InvalidArgument(f"{where}: must be a JSON list of {{name, uuid, value}}")
    if len(items) > MAX_EFI_VARS:
        raise InvalidArgument(f"{where}: at most {MAX_EFI_VARS} variables")
    out: list[NvramVariable] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise InvalidArgument(f"{at}: must be an object with name, uuid and value")
        name, guid, value = item.get("name"), item.get("uuid"), item.get("value", "")
        if not isinstance(name, str) or not name or len(name) > 128 or "\0" in name:
            raise InvalidArgument(f"{at}.name: must be a non-empty name of at most 128 characters")
        try:
            parsed = uuid.UUID(str(guid))
        except ValueError as exc:
            raise InvalidArgument(f"{at}.uuid: {guid!r} is not a GUID") from exc
        if not isinstance(value, str):
            raise InvalidArgument(f"{at}.value: must be base64 text")
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise InvalidArgument(f"{at}.value: not base64 ({exc})") from exc
        if len(raw) > MAX_EFI_VALUE_BYTES:
            raise InvalidArgument(f"{at}.value: larger than {MAX_EFI_VALUE_BYTES} bytes")
        # The variable store is written by name (virt-firmware keys its list so): one GUID a name.
        if any(v.name == name for v in out):
            raise InvalidArgument(f"{at}.name: variable {name!r} is given twice")
        out.append(NvramVariable(name, parsed, raw))
    return out


def plan_nvram(
    images: list[Image], annotations: dict[str, str], paths: OvmfPaths, nvram: Path, field: str
) -> tuple[str, list[NvramVariable]]:
    """For a new machine booting from ``images``: its NVRAM file ("" when it boots BIOS) and the
    EFI variables to write there. EFI variables for a BIOS machine are refused, naming them."""
    variables = efi_vars(annotations, f"{field}.metadata.annotations")
    uefi = [i.name for i in images if i.firmware == UEFI]
    if not uefi:
        if variables:
            raise InvalidArgument(
                f"{field}.metadata.annotations[{EFI_VARS_ANNOTATION!r}]: EFI variables need a "
                "machine that boots UEFI, and none of its images asks for it"
            )
        return "", []
    check_available(paths, f"{field}.spec.volumes (image {uefi[0]!r})")
    return str(nvram), variables


def check_available(paths: OvmfPaths, field: str) -> None:
    """FailedPrecondition naming what is missing when this host cannot boot UEFI machines."""
    for path in (paths.code, paths.vars_template):
        if not os.path.isfile(path):
            raise FailedPrecondition(
                f"{field}: the image boots UEFI, but this host has no OVMF firmware ({path} is "
                "missing; install Debian's ovmf package)"
            )


def write_nvram(paths: OvmfPaths, dest: Path, variables: list[NvramVariable]) -> None:
    """``dest``: OVMF's VARS template with ``variables`` set (non-volatile, boot and runtime
    access), readable by its owner only (libvirt hands it to QEMU's user)."""
    # Imported here: only UEFI machines need it, and it pulls in cryptography.
    from virt.firmware.efi import efivar
    from virt.firmware.varstore.edk2 import Edk2VarStore

    store = Edk2VarStore(paths.vars_template)
    varlist = store.get_varlist()
    for var in variables:
        varlist[var.name] = efivar.EfiVar(var.name, guid=str(var.guid), attr=ATTRIBUTES, data=var.value)
    blob = _store_bytes(store, varlist)
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(blob)


def _store_bytes(store: object, varlist: object) -> bytes:
    # virt-firmware ends the process (sys.exit) when the variables do not fit the store.
    try:
        return bytes(store.bytes_varstore(varlist))  # type: ignore[attr-defined]
    except SystemExit as exc:
        raise InvalidArgument(
            f"machine.metadata.annotations[{EFI_VARS_ANNOTATION!r}]: the variables do not fit OVMF's "
            "variable store") from exc


def read_nvram(path: Path) -> dict[tuple[str, uuid.UUID], tuple[int, bytes]]:
    """The variables an NVRAM file holds, by name and vendor GUID: their attributes and value
    (tests and diagnostics)."""
    from virt.firmware.varstore.edk2 import Edk2VarStore

    found: dict[tuple[str, uuid.UUID], tuple[int, bytes]] = {}
    for var in Edk2VarStore(str(path)).get_varlist().values():
        found[(str(var.name), uuid.UUID(str(var.guid)))] = (int(var.attr), bytes(var.data))
    return found
