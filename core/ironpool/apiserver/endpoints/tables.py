"""Server-side printing: the ``Table`` (``meta.k8s.io``) answer kubectl asks for on ``get``.

A client that sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` gets a Table instead
of the object or list: column definitions from the kind's strategy (:attr:`Strategy.columns`, the
same ones ``ironpool get`` prints; ``wide`` columns are priority 1, shown by ``-o wide``) and one
row of cells per object, with the object as ``PartialObjectMetadata`` (the default; its
``managedFields`` left out), in full
(``includeObject=Object``) or not at all (``includeObject=None``). In a watch, the first event's
Table carries the column definitions and later ones only rows, as Kubernetes sends them.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from ironpool.api import errors
from ironpool.api.columns import AGE, NAME, Column, age_of
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import strategy_for

TABLE_GROUP = "meta.k8s.io"
_VERSIONS = ("v1", "v1beta1")
_INCLUDE = ("None", "Metadata", "Object")
_DESCRIPTIONS = {
    NAME.header: "Name of the object (metadata.name), unique in its namespace.",
    AGE.header: "Time since the object was created (metadata.creationTimestamp).",
}
_CACHE_LIMIT = 20_000
#: objects larger than this are not cached: the cache's key is the object's JSON, and a Table of
#: thousands of large objects must not keep them all alive (a streamed list holds a page of them)
_CACHED_MAX = 16 * 1024


@functools.lru_cache(maxsize=256)
def table_version(accept: str | None) -> str | None:
    """``v1`` or ``v1beta1`` when the first media type of ``accept`` we can serve is a Table; None
    when it is plain JSON (or nothing we know, which is answered with JSON too)."""
    for media in (accept or "").split(","):
        kind, *params = (p.strip() for p in media.split(";"))
        if kind not in ("application/json", "application/*", "*/*"):
            continue
        values = dict(p.partition("=")[::2] for p in params)
        wanted = values.get("as")
        if wanted is None:
            return None
        if wanted == "Table" and values.get("g") == TABLE_GROUP and values.get("v") in _VERSIONS:
            return values["v"]
    return None


def include_object(value: str | None) -> str:
    """The ``includeObject`` query parameter, checked (default ``Metadata``)."""
    if value is None or value == "":
        return "Metadata"
    if value not in _INCLUDE:
        raise errors.BadRequest(f"includeObject: must be one of {', '.join(_INCLUDE)}, got {value!r}")
    return value


def _cell(value: Any) -> Any:
    if value is None or value == "":
        return None  # kubectl prints <none>
    if isinstance(value, bool):
        return str(value).lower()
    return value if isinstance(value, int | float | str) else str(value)


def _epoch(timestamp: Any) -> float | None:
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


_AGE_MARK = "\x00age\x00"
_AGE_JSON = orjson.dumps(_AGE_MARK)


@functools.lru_cache(maxsize=4096)
def _age_json(seconds: int) -> bytes:
    return orjson.dumps(age_of(seconds))


@dataclass
class _Row:
    """A row's JSON around its age cells, the creation time, and the object's metadata JSON
    (without managedFields: no printer needs them, and they would double a Table's size; made on
    first use, as ``includeObject=None`` needs none)."""

    pieces: list[bytes]
    created: float | None
    raw: bytes  # the object (the row cache's key: no more memory)
    _metadata: bytes | None = None

    @property
    def metadata(self) -> bytes:
        if self._metadata is None:
            meta = dict(orjson.loads(self.raw).get("metadata") or {})
            meta.pop("managedFields", None)
            self._metadata = orjson.dumps(meta)
        return self._metadata


class TableWriter:
    """Renders objects of one kind as Table rows; a row is rendered once per stored version of an
    object (only the age is filled in at each answer)."""

    def __init__(self, info: ResourceInfo) -> None:
        self.info = info
        self.columns: tuple[Column, ...] = strategy_for(info).columns
        self.definitions = [
            {
                "name": c.header,
                "type": "date" if c is AGE else "string",
                "format": "name" if c is NAME else "",
                "description": _DESCRIPTIONS.get(c.header, ""),
                "priority": 1 if c.wide else 0,
            }
            for c in self.columns
        ]
        self._rows: dict[bytes, _Row] = {}

    def _row(self, raw: bytes, obj: dict[str, Any] | None = None) -> _Row:
        row = self._rows.get(raw)
        if row is None:
            obj = orjson.loads(raw) if obj is None else obj
            meta = obj.get("metadata") or {}
            cells = [_AGE_MARK if c is AGE else _cell(c.get(obj)) for c in self.columns]
            row = _Row(orjson.dumps(cells).split(_AGE_JSON), _epoch(meta.get("creationTimestamp")), raw)
            if len(raw) <= _CACHED_MAX:
                if len(self._rows) >= _CACHE_LIMIT:
                    self._rows.clear()
                self._rows[raw] = row
        return row

    def warm(self, doc: dict[str, Any]) -> None:
        """Render the row of ``doc`` as just stored (the store keeps ``orjson.dumps`` of it: the same
        bytes a list or watch answers with), so the first Table asked for after a write is ready."""
        self._row(orjson.dumps(doc), doc)

    def row(self, raw: bytes, include: str, version: str, now: float) -> bytes:
        """One row of the stored object ``raw``."""
        row = self._row(raw)
        if len(row.pieces) == 1:
            cells = row.pieces[0]
        else:
            age = _age_json(int(now - row.created)) if row.created is not None else b"null"
            cells = age.join(row.pieces)
        if include == "Metadata":
            return b"".join((b'{"cells":', cells, b',"object":{"kind":"PartialObjectMetadata","apiVersion":"',
                             TABLE_GROUP.encode(), b"/", version.encode(), b'","metadata":', row.metadata,
                             b"}}"))
        if include == "Object":
            return b"".join((b'{"cells":', cells, b',"object":', raw, b"}"))
        return b'{"cells":' + cells + b"}"

    def table(self, items: list[bytes], metadata: dict[str, Any], include: str, version: str,
              headers: bool = True) -> bytes:
        """A Table of ``items`` with the list ``metadata``; without column definitions unless ``headers``."""
        now = time.time()
        rows = b",".join([self.row(raw, include, version, now) for raw in items])
        return self.head(metadata, version, headers) + rows + b"]}"

    def head(self, metadata: dict[str, Any], version: str, headers: bool = True) -> bytes:
        """A Table's JSON up to its first row (a list streamed row by row writes its rows after it,
        separated by commas, then ``]}``)."""
        head = orjson.dumps({
            "kind": "Table",
            "apiVersion": f"{TABLE_GROUP}/{version}",
            "metadata": metadata,
            "columnDefinitions": self.definitions if headers else [],
        })
        return head[:-1] + b',"rows":['


class TableWarmer:
    """A commit observer that renders the Table rows of the kinds people watch as Tables by the
    thousand (MachinePools and VolumePools: the web console's fleet page, ``kubectl get mp``) as they
    are written, so a fleet's first Table costs no rendering (0.1-0.3 s of CPU for 5,000 pools). The
    cost: some 25 us per pool write, and the row cache's keys are the objects' bytes (at most
    ``_CACHE_LIMIT`` of them, some 40 MB for pools of 2 KB, before it starts over)."""

    def __init__(self, infos: tuple[ResourceInfo, ...]) -> None:
        self.infos = infos

    def committed(self, info: ResourceInfo, key: str, doc: dict[str, Any] | None) -> None:
        if doc is not None and info in self.infos:
            writer_for(info).warm(doc)


@functools.cache
def writer_for(info: ResourceInfo) -> TableWriter:
    """The Table writer of a served resource (one per kind, so its row cache is shared)."""
    return TableWriter(info)
