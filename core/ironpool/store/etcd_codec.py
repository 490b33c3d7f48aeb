"""How documents sit in etcd: JSON with ``metadata`` first and without ``resourceVersion``.

etcd assigns a write's revision when it commits, so the stored value cannot carry it (Kubernetes
does the same: the version comes from the key's ``mod_revision`` on every read). Writing
``metadata`` first lets a read splice ``"resourceVersion":"N"`` into the bytes instead of decoding
and encoding every document of a list.
"""

from __future__ import annotations

from typing import Any

import orjson

from ironpool.store.interface import Document

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


def guard_encode(value: Document) -> bytes:
    return orjson.dumps(value)


def guard_decode(value: bytes) -> Document:
    doc: Document = orjson.loads(value)
    return doc
