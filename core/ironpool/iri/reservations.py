"""IRI reservations as ironpool's poollet and runtime read them (the RPCs of IronCore's IEP-11 draft).

On the wire a reservation's ``resources`` map holds each value as a Kubernetes ``resource.Quantity``
in its protobuf encoding, as the draft writes it (``Quantity.Marshal()``): field 1, length-delimited,
the quantity's canonical string (``0x0a``, a varint length, the text). Resource names are the API's:
``class/machine.<class>`` counts whole machines of one of the runtime's classes, ``cpu`` and
``memory`` a block of that size.

Two annotations are ironpool's contract between its poollet and its runtime (IRI has no fields for
them): :data:`RESERVATION_KEY_ANNOTATION`, set to the same value on a reservation and on the
machines placed within it, and :data:`EXPIRES_AT_ANNOTATION` (Unix seconds) after which the runtime
lets the reservation go by itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from ironpool.api.quantity import Quantity, parse_quantity

RESERVATION_KEY_ANNOTATION = "runtime.ironpool.dev/reservation"
EXPIRES_AT_ANNOTATION = "runtime.ironpool.dev/reservation-expires-at"

_TAG = 0x0A  # field 1, wire type 2


class QuantityWireError(ValueError):
    """Bytes that are not a protobuf-encoded Quantity."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_quantity(q: Quantity | str) -> bytes:
    """The protobuf encoding of a quantity (given as a Quantity or its string)."""
    text = str(parse_quantity(q) if isinstance(q, str) else q).encode()
    return bytes([_TAG]) + _varint(len(text)) + text


def decode_quantity(data: bytes) -> Quantity:
    """The quantity in ``data``; QuantityWireError when it is not one."""
    if not data or data[0] != _TAG:
        raise QuantityWireError("not a protobuf-encoded resource.Quantity (field 1, a string)")
    length, shift, i = 0, 0, 1
    while True:
        if i >= len(data) or shift > 28:
            raise QuantityWireError("truncated length of a protobuf-encoded resource.Quantity")
        byte = data[i]
        length |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            break
        shift += 7
    if i + length != len(data):
        raise QuantityWireError("the length of a protobuf-encoded resource.Quantity does not match its bytes")
    try:
        return parse_quantity(data[i:].decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise QuantityWireError(f"not a quantity: {exc}") from None


def encode_resources(resources: Mapping[str, Quantity | str]) -> dict[str, bytes]:
    return {name: encode_quantity(q) for name, q in resources.items()}


def decode_resources(resources: Mapping[str, bytes]) -> dict[str, Quantity]:
    """Decoded values; QuantityWireError names the first bad key."""
    out: dict[str, Quantity] = {}
    for name, data in resources.items():
        try:
            out[name] = decode_quantity(data)
        except QuantityWireError as exc:
            raise QuantityWireError(f"resources[{name}]: {exc}") from None
    return out
