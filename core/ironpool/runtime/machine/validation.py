"""Request checks that run before the runtime touches libvirt or the disk; errors name the field."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ironpool.runtime.errors import InvalidArgument

ID_RE = re.compile(r"^[0-9a-f]{32}$")
DEVICE_RE = re.compile(r"^[a-z]d([a-z]{1,2})$")
MAX_NAME = 253
MAX_LABEL_VALUE = 63 * 1024  # generous: IRI does not limit, libvirt metadata copes
MAX_MAP_BYTES = 256 * 1024
MAX_DISK_BYTES = 64 * 1024**4  # 64 TiB: anything larger is a typo, not a disk
MAX_IGNITION_BYTES = 16 * 1024**2


def check_id(value: str, field: str = "machine_id") -> str:
    """An IRI machine id as the runtime generates it (32 lowercase hex)."""
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    if not ID_RE.match(value):
        raise InvalidArgument(f"{field}: {value[:80]!r} is not a valid machine id (32 lowercase hex digits)")
    return value


def is_valid_id(value: str) -> bool:
    return bool(ID_RE.match(value))


def check_string_map(values: Mapping[str, str], field: str) -> dict[str, str]:
    """Labels or annotations: any text (kept verbatim) but non-empty keys and bounded size."""
    total = 0
    for key, value in values.items():
        if not key:
            raise InvalidArgument(f"{field}: keys must not be empty")
        if "\x00" in key or "\x00" in value:
            raise InvalidArgument(f"{field}[{key!r}]: NUL characters are not allowed")
        if len(value) > MAX_LABEL_VALUE:
            raise InvalidArgument(f"{field}[{key!r}]: value longer than {MAX_LABEL_VALUE} characters")
        total += len(key) + len(value)
    if total > MAX_MAP_BYTES:
        raise InvalidArgument(f"{field}: larger than {MAX_MAP_BYTES} bytes in total")
    return dict(values)


def check_name(value: str, field: str) -> str:
    """A machine-local volume or interface name."""
    if not value:
        raise InvalidArgument(f"{field}: must not be empty")
    if len(value) > MAX_NAME:
        raise InvalidArgument(f"{field}: longer than {MAX_NAME} characters")
    if "\x00" in value:
        raise InvalidArgument(f"{field}: NUL characters are not allowed")
    return value


def device_target(device: str, field: str) -> str:
    """The virtio target dev for an IRI device name: IronCore's ``oda`` becomes ``vda``."""
    m = DEVICE_RE.match(device)
    if not m:
        raise InvalidArgument(f"{field}: {device[:40]!r} is not a device name like 'oda' or 'vdb'")
    return "vd" + m.group(1)


def check_size(value: int, field: str, allow_zero: bool = True) -> int:
    if value < 0:
        raise InvalidArgument(f"{field}: must not be negative, got {value}")
    if value == 0 and not allow_zero:
        raise InvalidArgument(f"{field}: must be positive")
    if value > MAX_DISK_BYTES:
        raise InvalidArgument(f"{field}: {value} bytes is more than the maximum of {MAX_DISK_BYTES} (64 TiB)")
    return value
