"""An object's ``metadata.labels`` read from its stored JSON without decoding the rest of it.

A list with a label selector looks at every object of its collection, and decoding a whole document
(its spec, status and ``managedFields``) costs several times what decoding its labels does. Both
stores keep documents as orjson's compact output, and as the registry (and etcd's codec) lays them out
metadata comes before spec and status, and the labels early in metadata; :func:`stored_labels` finds
the labels object there and decodes that alone.

It proves its reading from the bytes themselves, so a document laid out otherwise is decoded whole
(the caller's fallback), never misread:

* ``"labels":{`` preceded by ``{`` or ``,`` is a key that is exactly ``labels`` (an escaped quote
  inside a string is always preceded by a backslash) whose value is an object.
* The JSON before that key, closed with ``}}``, must parse as an object whose last key is
  ``metadata`` holding an object: the key is then directly in the top-level ``metadata``.
* Label values are strings, so the labels object ends at its first ``}``; a ``}`` inside a string or
  a nested value leaves the slice unparsable, which sends the document to the fallback.
"""

from __future__ import annotations

from typing import Any

import orjson

_KEY = b'"labels"'
_VALUE_AT = len(_KEY) + 1  # past the key and its colon


def stored_labels(raw: bytes) -> dict[str, Any] | None:
    """The ``metadata.labels`` of the stored document ``raw`` (empty when it has none), or None when
    the bytes are not laid out as this reads them (then decode the document)."""
    at = raw.find(_KEY)
    if at < 0:
        # No key (or string) "labels" anywhere: orjson writes keys verbatim, so there are no labels.
        return {}
    before = raw[at - 1 : at]
    if before not in (b"{", b",") or raw[at + len(_KEY) : at + _VALUE_AT + 1] != b":{":
        return None
    # The document up to the key, its open objects closed: metadata's siblings before it and its
    # fields before labels (a few hundred bytes as the stores write documents).
    head = raw[: at if before == b"{" else at - 1] + b"}}"
    try:
        outer = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None  # the key is deeper than metadata (or metadata is not where it would be)
    if not isinstance(outer, dict) or not outer or next(reversed(outer)) != "metadata" \
            or not isinstance(outer["metadata"], dict):
        return None
    end = raw.find(b"}", at + _VALUE_AT)
    try:
        labels = orjson.loads(raw[at + _VALUE_AT : end + 1]) if end > 0 else None
    except orjson.JSONDecodeError:
        return None
    return labels if isinstance(labels, dict) else None
