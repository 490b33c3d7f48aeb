"""Bodies kubectl sends as Kubernetes protobuf, read into their JSON form.

kubectl's typed clients send built-in kinds as ``application/vnd.kubernetes.protobuf``: ``kubectl
create namespace|secret|role|rolebinding|clusterrole|clusterrolebinding``, ``kubectl certificate
approve|deny`` and ``kubectl auth can-i`` (the reviews). A body is the ``k8s\\x00`` magic and a
``runtime.Unknown`` (``typeMeta`` 1: apiVersion 1, kind 2; ``raw`` 2: the object). Each kind's
fields are read by the field numbers of Kubernetes' ``generated.proto`` (:data:`KINDS`); what the
server owns (uid, timestamps, status) and what kubectl never sends are skipped, as are unknown
fields, and empty strings and false are left out, as the JSON encoding leaves them (``omitempty``).
Other kinds are a 415 naming the ones read, as a client asking for JSON is always answered.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Union

from ironpool.api import errors

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"

STRING, BYTES, BOOL = "string", "bytes", "bool"


@dataclass(frozen=True)
class Repeated:
    of: Kind


@dataclass(frozen=True)
class MapOf:
    """``map<string, value>``: entries with the key in field 1 and the value in field 2."""

    value: Kind


Message = dict[int, tuple[str, "Kind"]]
Kind = Union[str, Repeated, MapOf, Message]  # noqa: UP007 - a recursive alias needs Union

_OWNER_REFERENCE: Message = {1: ("kind", STRING), 3: ("name", STRING), 4: ("uid", STRING),
                             5: ("apiVersion", STRING), 6: ("controller", BOOL),
                             7: ("blockOwnerDeletion", BOOL)}
_OBJECT_META: Message = {1: ("name", STRING), 2: ("generateName", STRING), 3: ("namespace", STRING),
                         6: ("resourceVersion", STRING), 11: ("labels", MapOf(STRING)),
                         12: ("annotations", MapOf(STRING)),
                         13: ("ownerReferences", Repeated(_OWNER_REFERENCE)),
                         14: ("finalizers", Repeated(STRING))}
_SUBJECT: Message = {1: ("kind", STRING), 2: ("apiGroup", STRING), 3: ("name", STRING),
                     4: ("namespace", STRING)}
_ROLE_REF: Message = {1: ("apiGroup", STRING), 2: ("kind", STRING), 3: ("name", STRING)}
_POLICY_RULE: Message = {1: ("verbs", Repeated(STRING)), 2: ("apiGroups", Repeated(STRING)),
                         3: ("resources", Repeated(STRING)), 4: ("resourceNames", Repeated(STRING)),
                         5: ("nonResourceURLs", Repeated(STRING))}
_RBAC = "rbac.authorization.k8s.io/v1"
_BINDING: Message = {1: ("metadata", _OBJECT_META), 2: ("subjects", Repeated(_SUBJECT)),
                     3: ("roleRef", _ROLE_REF)}
_ROLE: Message = {1: ("metadata", _OBJECT_META), 2: ("rules", Repeated(_POLICY_RULE))}
# A CSR as ``kubectl certificate approve|deny`` sends it back (the approval subresource reads only the
# conditions; spec.expirationSeconds, an int, and the conditions' times are the server's to keep).
_CSR_CONDITION: Message = {1: ("type", STRING), 2: ("reason", STRING), 3: ("message", STRING),
                           6: ("status", STRING)}
_CSR: Message = {
    1: ("metadata", _OBJECT_META),
    2: ("spec", {1: ("request", BYTES), 2: ("username", STRING), 3: ("uid", STRING),
                 4: ("groups", Repeated(STRING)), 5: ("usages", Repeated(STRING)),
                 7: ("signerName", STRING)}),
    3: ("status", {1: ("conditions", Repeated(_CSR_CONDITION)), 2: ("certificate", BYTES)}),
}
#: the kinds read from protobuf, by (apiVersion, kind)
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "Namespace"): {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("finalizers", Repeated(STRING))})},
    ("v1", "Secret"): {1: ("metadata", _OBJECT_META), 2: ("data", MapOf(BYTES)), 3: ("type", STRING),
                       4: ("stringData", MapOf(STRING)), 5: ("immutable", BOOL)},
    (_RBAC, "Role"): _ROLE,
    (_RBAC, "ClusterRole"): _ROLE,
    (_RBAC, "RoleBinding"): _BINDING,
    (_RBAC, "ClusterRoleBinding"): _BINDING,
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): _CSR,
}
_RESOURCE_ATTRIBUTES: Message = {1: ("namespace", STRING), 2: ("verb", STRING), 3: ("group", STRING),
                                 4: ("version", STRING), 5: ("resource", STRING), 6: ("subresource", STRING),
                                 7: ("name", STRING)}
_ACCESS_REVIEW_SPEC: Message = {1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                                2: ("nonResourceAttributes", {1: ("path", STRING), 2: ("verb", STRING)})}
_RULES_REVIEW_SPEC: Message = {1: ("namespace", STRING)}
_TYPE_META: Message = {1: ("apiVersion", STRING), 2: ("kind", STRING)}


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


def _value(raw: bytes | int, kind: Kind, number: int) -> Any:
    if kind == BOOL:
        if not isinstance(raw, int):
            raise errors.BadRequest(f"malformed protobuf body: field {number} is not a varint")
        return bool(raw)
    if not isinstance(raw, bytes):
        raise errors.BadRequest(f"malformed protobuf body: field {number} is not length-delimited")
    if kind == STRING:
        return raw.decode("utf-8", "replace")
    if kind == BYTES:
        return base64.b64encode(raw).decode()
    assert isinstance(kind, dict)
    return decode_message(raw, kind)


def decode_message(data: bytes, message: Message) -> dict[str, Any]:
    """One message as the JSON object Kubernetes would send for it (unknown fields skipped)."""
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        field = message.get(number)
        if field is None:
            continue
        name, kind = field
        if isinstance(kind, Repeated):
            out.setdefault(name, []).append(_value(raw, kind.of, number))
        elif isinstance(kind, MapOf):
            entry = decode_message(_bytes(raw, number), {1: ("key", STRING), 2: ("value", kind.value)})
            out.setdefault(name, {})[entry.get("key", "")] = entry.get("value", "")
        else:
            value = _value(raw, kind, number)
            if value not in ("", False):  # Go writes empty strings; JSON omits them (omitempty)
                out[name] = value
    return out


def _bytes(raw: bytes | int, number: int) -> bytes:
    if not isinstance(raw, bytes):
        raise errors.BadRequest(f"malformed protobuf body: field {number} is not a message")
    return raw


def _unknown(body: bytes) -> tuple[dict[str, Any], bytes]:
    """The ``runtime.Unknown`` envelope's type and raw object; 400 for anything else."""
    if not body.startswith(MAGIC):
        raise errors.BadRequest("a protobuf body must start with the k8s\\x00 magic")
    type_meta: dict[str, Any] = {}
    raw = b""
    for number, value in _fields(body[len(MAGIC):]):
        if number == 1:
            type_meta = decode_message(_bytes(value, number), _TYPE_META)
        elif number == 2:
            raw = _bytes(value, number)
    return type_meta, raw


def decode_object(body: bytes) -> dict[str, Any]:
    """The object of a protobuf body of one of :data:`KINDS`, in its JSON form; 415 for another kind."""
    type_meta, raw = _unknown(body)
    api_version, kind = str(type_meta.get("apiVersion", "")), str(type_meta.get("kind", ""))
    message = KINDS.get((api_version, kind))
    if message is None:
        known = ", ".join(f"{v}/{k}" for v, k in KINDS)
        raise errors.UnsupportedMediaType(f"{PROTOBUF} is read for {known}, not for {api_version}/{kind}; "
                                          "send application/json")
    return {"apiVersion": api_version, "kind": kind, **decode_message(raw, message)}


def _spec(body: bytes, message: Message) -> dict[str, Any]:
    _, raw = _unknown(body)
    for number, value in _fields(raw):
        if number == 2:
            return decode_message(_bytes(value, number), message)
    return {}


def review_spec(body: bytes) -> dict[str, Any]:
    """The JSON ``spec`` of a protobuf-encoded SelfSubjectAccessReview; 400 for anything else."""
    return _spec(body, _ACCESS_REVIEW_SPEC)


def rules_review_spec(body: bytes) -> dict[str, Any]:
    """The JSON ``spec`` of a protobuf-encoded SelfSubjectRulesReview; 400 for anything else."""
    return _spec(body, _RULES_REVIEW_SPEC)
