"""The reviews kubectl sends as Kubernetes protobuf (``kubectl auth can-i`` sends its typed clients'
protobuf), read into the JSON form of their ``spec``.

The body is the ``k8s\\x00`` magic and a ``runtime.Unknown`` whose ``raw`` field (2) holds the
review; of a review only ``spec`` (2) matters. A SelfSubjectAccessReview's is ``resourceAttributes``
(1: namespace 1, verb 2, group 3, version 4, resource 5, subresource 6, name 7) or
``nonResourceAttributes`` (2: path 1, verb 2); a SelfSubjectRulesReview's is ``namespace`` (1). Field
numbers are those of ``k8s.io/api/authorization/v1/generated.proto``; selectors and unknown fields
are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ironpool.api import errors

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"
_RESOURCE_FIELDS = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource",
                    7: "name"}
_NON_RESOURCE_FIELDS = {1: "path", 2: "verb"}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise errors.BadRequest("malformed protobuf body: truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, bytes of a length-delimited field or the value of a varint) of one message."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise errors.BadRequest("malformed protobuf body: a field runs past the end")
            yield number, data[pos:pos + length]
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise errors.BadRequest(f"malformed protobuf body: wire type {wire} is not supported")


def _message(data: bytes | int, number: int) -> bytes:
    if not isinstance(data, bytes):
        raise errors.BadRequest(f"malformed protobuf body: field {number} is not a message")
    return data


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, value in _fields(data):
        if number in names and isinstance(value, bytes):
            out[names[number]] = value.decode("utf-8", "replace")
    return out


def _review(body: bytes) -> bytes:
    """The review message inside the ``runtime.Unknown`` envelope; 400 for anything else."""
    if not body.startswith(MAGIC):
        raise errors.BadRequest("a protobuf body must start with the k8s\\x00 magic")
    raw = b""
    for number, value in _fields(body[len(MAGIC):]):
        if number == 2:
            raw = _message(value, number)
    return raw


def _spec(body: bytes) -> bytes:
    spec = b""
    for number, value in _fields(_review(body)):
        if number == 2:
            spec = _message(value, number)
    return spec


def review_spec(body: bytes) -> dict[str, Any]:
    """The JSON ``spec`` of a protobuf-encoded SelfSubjectAccessReview; 400 for anything else."""
    spec: dict[str, Any] = {}
    for inner, attrs in _fields(_spec(body)):
        if inner == 1:
            spec["resourceAttributes"] = _strings(_message(attrs, inner), _RESOURCE_FIELDS)
        elif inner == 2:
            spec["nonResourceAttributes"] = _strings(_message(attrs, inner), _NON_RESOURCE_FIELDS)
    return spec


def rules_review_spec(body: bytes) -> dict[str, Any]:
    """The JSON ``spec`` of a protobuf-encoded SelfSubjectRulesReview; 400 for anything else."""
    return _strings(_spec(body), {1: "namespace"})
