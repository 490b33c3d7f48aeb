"""Checks on request fields, raising :class:`~ironpool.runtime.errors.InvalidArgument` with the field path.

Labels and annotation keys follow Kubernetes' syntax (the volumepoollet copies them from API
objects, where they already obey it); that also keeps XML and shell metacharacters out of labels.
Annotation values are free text and are stored verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ironpool.runtime.errors import InvalidArgument

# IDs this runtime hands out are 32 lowercase hex digits; accept any DNS label for lookups so an
# unknown-but-well-formed ID gets NOT_FOUND while a malformed one gets INVALID_ARGUMENT.
_ID_RE = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$")
_MAX_ANNOTATIONS_BYTES = 256 * 1024


def check_id(value: str, field: str) -> str:
    """Return ``value`` if it is a well-formed object ID, else raise naming ``field``."""
    if not value:
        raise InvalidArgument(f"{field}: required (empty ID)")
    if not _ID_RE.match(value):
        raise InvalidArgument(
            f"{field}: malformed ID {value[:80]!r} (expected lowercase letters, digits, '-')"
        )
    return value


def _check_key(key: str, field: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        raise InvalidArgument(f"{field}[{key[:80]!r}]: key prefix must be a DNS subdomain")
    if not _LABEL_NAME_RE.match(name):
        raise InvalidArgument(
            f"{field}[{key[:80]!r}]: key name must be 1-63 characters of [A-Za-z0-9_.-], "
            "starting and ending alphanumeric"
        )


def check_labels(labels: Mapping[str, str], field: str) -> dict[str, str]:
    """Validate label keys and values with Kubernetes' rules; return a plain dict copy."""
    for key, value in labels.items():
        _check_key(key, field)
        if value and not _LABEL_NAME_RE.match(value):
            raise InvalidArgument(
                f"{field}[{key!r}]: value {value[:80]!r} must be at most 63 characters of "
                "[A-Za-z0-9_.-], starting and ending alphanumeric"
            )
    return dict(labels)


def check_annotations(annotations: Mapping[str, str], field: str) -> dict[str, str]:
    """Validate annotation keys and the total size; values are kept verbatim."""
    total = 0
    for key, value in annotations.items():
        _check_key(key, field)
        total += len(key.encode()) + len(value.encode())
    if total > _MAX_ANNOTATIONS_BYTES:
        raise InvalidArgument(f"{field}: total size {total} bytes exceeds {_MAX_ANNOTATIONS_BYTES}")
    return dict(annotations)


def check_size(value: int, field: str) -> int:
    """A storage size must be positive (free-space checks come later, against the pool)."""
    if value <= 0:
        raise InvalidArgument(f"{field}: must be greater than 0, got {value}")
    return value
