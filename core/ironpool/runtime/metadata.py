"""IRI object metadata as both runtimes accept it: labels and annotations are any text.

IronCore does not restrict label or annotation strings on the wire, and a poollet copies what its
API objects carry, so a runtime that refused some would wedge it. The runtimes store the strings
verbatim where nothing is parsed: JSON inside the domain's ``<metadata>`` (escaped by ElementTree)
and JSON sidecar files. What is refused is what cannot be stored or looked up: empty keys, NUL
characters (XML cannot hold them), and sizes beyond reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from .errors import InvalidArgument

T = TypeVar("T")

MAX_VALUE = 63 * 1024  # generous: IRI does not limit, libvirt metadata copes
MAX_MAP_BYTES = 256 * 1024


def check_string_map(values: Mapping[str, str], field: str) -> dict[str, str]:
    """Labels or annotations: any text (kept verbatim) but non-empty keys and bounded size."""
    total = 0
    for key, value in values.items():
        if not key:
            raise InvalidArgument(f"{field}: keys must not be empty")
        if "\x00" in key or "\x00" in value:
            raise InvalidArgument(f"{field}[{key[:80]!r}]: NUL characters are not allowed")
        if len(value) > MAX_VALUE:
            raise InvalidArgument(f"{field}[{key[:80]!r}]: value longer than {MAX_VALUE} characters")
        total += len(key) + len(value)
    if total > MAX_MAP_BYTES:
        raise InvalidArgument(f"{field}: larger than {MAX_MAP_BYTES} bytes in total")
    return dict(values)


def matches_labels(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """IRI label selectors match exactly: every selector key present with the same value."""
    return all(labels.get(k) == v for k, v in selector.items())


def select(
    objects: Mapping[str, T],
    object_id: str,
    selector: Mapping[str, str] | None,
    labels: Callable[[T], Mapping[str, str]],
) -> list[T]:
    """An IRI list filter: by id (an id never issued gives none, whatever its shape) and labels."""
    if object_id:
        found = objects.get(object_id)
        candidates = [found] if found is not None else []
    else:
        candidates = list(objects.values())
    if selector:
        candidates = [o for o in candidates if matches_labels(labels(o), selector)]
    return candidates
