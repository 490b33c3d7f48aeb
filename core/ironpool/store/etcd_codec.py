"""How documents sit in etcd: JSON with ``metadata`` first and without ``resourceVersion``.

etcd assigns a write's revision when it commits, so the stored value cannot carry it (Kubernetes
does the same: the version comes from the key's ``mod_revision`` on every read). Writing
``metadata`` first lets a read splice ``"resourceVersion":"N"`` into the bytes instead of decoding
and encoding every document of a list.
"""

from __future__ import annotations

from typing import Any

import orjson

from ironpool.store.interface import DECODED_FACTOR, DECODED_MAX, Document, EventType, StoreEvent

_HEAD = b'{"metadata":{'
_AT = len(_HEAD)


def encode(doc: Document) -> bytes:
    """The stored form of ``doc``."""
    meta = dict(doc.get("metadata") or {})
    meta.pop("resourceVersion", None)
    body: dict[str, Any] = {"metadata": meta}
    for name, value in doc.items():
        if name != "metadata":
            body[name] = value
    return orjson.dumps(body)


def raw_at(value: bytes, revision: int) -> bytes:
    """The stored bytes as the document at ``revision`` (JSON with its resourceVersion)."""
    if value.startswith(_HEAD):
        version = b'"resourceVersion":"%d"' % revision
        if value[_AT : _AT + 1] == b"}":
            return _HEAD + version + value[_AT:]
        return _HEAD + version + b"," + value[_AT:]
    return orjson.dumps(doc_at(value, revision))  # written by something else: decode once


def doc_at(value: bytes, revision: int) -> Document:
    """The stored bytes decoded, with ``metadata.resourceVersion`` set to ``revision``."""
    doc = orjson.loads(value)
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = doc["metadata"] = {}
    meta["resourceVersion"] = str(revision)
    return doc


class WatchedEvent(StoreEvent):
    """A watch event whose document is decoded on first use, not on arrival.

    An apiserver's feed carries every write of the cluster, most of them read by no watcher there
    (the other apiservers' writes of kinds nothing here follows) or streamed as ``raw``; decoding
    each on arrival was a large share of what an event cost. The ring's byte count is the same as
    for an eagerly decoded event, so it does not change when a reader decodes one.
    """

    __slots__ = ()

    def __init__(self, type: EventType, key: str, raw: bytes, revision: int) -> None:
        super().__init__(type, key, None, revision, raw)

    @property
    def object(self) -> Document:
        doc = self._object
        if doc is None:
            assert self.raw is not None
            doc = orjson.loads(self.raw)
            if len(self.raw) <= DECODED_MAX:
                self._object = doc
        return doc

    @property
    def held_bytes(self) -> int:
        assert self.raw is not None
        size = len(self.raw)
        return size * (1 + DECODED_FACTOR) if size <= DECODED_MAX else size


def guard_encode(value: Document) -> bytes:
    return orjson.dumps(value)


def guard_decode(value: bytes) -> Document:
    doc: Document = orjson.loads(value)
    return doc
