"""The store contract: a versioned key-value space of JSON documents with a global revision.

It follows etcd3's model so that SQLite and etcd are drop-ins for each other:

* every write gets the next value of one global, monotonically increasing revision;
* an object's ``metadata.resourceVersion`` is the revision of its last write (set by the store on
  every document it returns, as a decimal string);
* ``list`` returns the revision it was read at, and ``watch(prefix, R)`` yields every change with a
  revision greater than ``R`` in revision order, so nothing is lost between a list and its watch;
* a revision older than the retained history raises :class:`RevisionCompacted` (the client relists);
* a write may carry :class:`Guard` keys, committed in the same transaction as the object if each is
  still at the revision it was read at (admission state shared by several apiservers: a pool's usage,
  an address's owner).

Keys look like ``/registry/{group}/{plural}/{namespace}/{name}`` (cluster-scoped objects use ``_``
for the namespace); every object key starts with ``/``. Kubernetes semantics (generation, finalizers,
uid, validation) live one level up, in the apiserver's registry; the store only stores.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import orjson

if TYPE_CHECKING:
    from ironpool.store.etcd_client import EtcdTls

Document = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


class StoreError(Exception):
    """Base of the store's errors."""


class KeyExists(StoreError):
    """``create`` of a key that is already there."""


class KeyNotFound(StoreError):
    """``update``/``delete``/``get`` of a key that is not there."""


class RevisionConflict(StoreError):
    """A precondition on the object's revision failed (someone wrote in between)."""


class RevisionCompacted(StoreError):
    """The requested revision is older than the history the store keeps; relist."""


@dataclass(frozen=True, slots=True)
class Guard:
    """A key committed together with an object write, if it is still at the revision read.

    Guard keys hold state that admission decides on and that every apiserver over the store must
    see the same way: a pool's usage (compare, then put the new usage), an address's owner (must
    not exist, then put). A plugin reads them (:meth:`Store.read_guards`), decides, and hands the
    guards to the write: the object and all its guards commit in one transaction, or none does
    and the write raises :class:`GuardConflict`. They are a keyspace of their own: never listed,
    watched or kept in history with the objects.

    ``revision`` is what :meth:`Store.read_guards` answered (0: the key must not exist); after the
    write the guard's revision is the revision of the object write that carried it. ``value`` is
    the new content (None removes the key); ``check_only`` compares without writing.
    """

    key: str
    revision: int
    value: Document | None = None
    check_only: bool = False


@dataclass(frozen=True, slots=True)
class GuardValue:
    """A guard key's content (None when absent) and revision (0 when absent)."""

    key: str
    value: Document | None
    revision: int


class GuardConflict(StoreError):
    """A guard key changed since it was read; the object was not written. ``current`` holds what
    the store has now for the guards that failed, so the caller can decide again and retry."""

    def __init__(self, current: Sequence[GuardValue]) -> None:
        self.current = list(current)
        super().__init__("guard key(s) changed: " + ", ".join(g.key for g in self.current))


@dataclass(frozen=True, slots=True)
class StorePage:
    """A page of a list: the documents in key order, the revision read at, and whether more follow.

    (What a client receives over HTTP is :class:`ironpool.client.wire.ListResult`; this is the
    store's own.)"""

    items: list[Document]
    revision: int
    more: bool = False


@dataclass(frozen=True, slots=True)
class RawStorePage:
    """A page of a list as JSON bytes per document (for serving without a decode/encode trip)."""

    items: list[bytes]
    revision: int
    more: bool = False


@dataclass(frozen=True, slots=True)
class ScanPage:
    """A page of a scan (:meth:`Store.scan_raw`): keys in order and, unless the scan reads keys only,
    each one's JSON; the revision every page of the scan is read at; and whether more may follow."""

    keys: list[str]
    items: list[bytes]
    revision: int
    more: bool = False


SCAN_PAGE_BYTES = 4 * 1024 * 1024
"""About how many bytes of JSON a page of a scan holds (a page ends at the first document past it)."""
SCAN_PAGE_KEYS = 1000
"""The most keys a page of a scan holds (what ends a page of small documents, or of keys only)."""


DECODED_MAX = 16 * 1024
"""An event whose document is larger than this many bytes of JSON keeps only the JSON; readers that
need the document decode it (see :class:`StoreEvent`)."""
DECODED_FACTOR = 8
"""Roughly how many bytes a decoded document takes in memory per byte of its JSON (small strings,
dicts and their keys); the histories count decoded events at this weight."""


DEFAULT_RING_BYTES = 64 * 1024 * 1024
"""The default bound on the memory a backend's in-memory watch history (its ring) holds."""


class StoreEvent:
    """One change of a key. For DELETED, ``object`` is the last state, with the deletion's revision.

    ``raw``, when a backend has it, is the document as JSON bytes (lets the apiserver stream without
    re-encoding). A backend's watch history holds its recent events in memory: an event whose JSON is
    larger than :data:`DECODED_MAX` keeps only ``raw``, and ``object`` decodes it on every access
    instead of keeping a second, several times larger copy of the document alive per event. So
    ``object`` may be shared by every watcher of the change, or decoded afresh: treat it as
    read-only, and read it once where it is used more than once.
    """

    __slots__ = ("_object", "key", "raw", "revision", "type")

    def __init__(self, type: EventType, key: str, object: Document | None = None, revision: int = 0,
                 raw: bytes | None = None) -> None:
        if object is None and raw is None:
            raise ValueError("a StoreEvent needs its object or its raw JSON")
        self.type = type
        self.key = key
        self.revision = revision
        self.raw = raw
        self._object = object if raw is None or len(raw) <= DECODED_MAX else None

    @classmethod
    def from_raw(cls, type: EventType, key: str, raw: bytes, revision: int) -> StoreEvent:
        """An event of the JSON ``raw``, decoded now only when it is small (see the class doc)."""
        return cls(type, key, orjson.loads(raw) if len(raw) <= DECODED_MAX else None, revision, raw)

    @property
    def object(self) -> Document:
        if self._object is not None:
            return self._object
        assert self.raw is not None
        doc: Document = orjson.loads(self.raw)
        return doc

    @property
    def held_bytes(self) -> int:
        """About how much memory the event holds (what a history counts against its byte bound)."""
        if self.raw is None:
            return 4096  # a decoded document alone: only in tests and hand-made events
        return len(self.raw) * (1 + DECODED_FACTOR if self._object is not None else 1)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, StoreEvent):
            return NotImplemented
        return (self.type, self.key, self.revision, self.object) == (
            other.type, other.key, other.revision, other.object)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoreEvent({self.type}, {self.key!r}, revision={self.revision})"


class Store(ABC):
    """Interface every backend implements; tests in ``tests/store`` run against each one."""

    #: whether :meth:`get_recent` may answer what is no longer current (else it is :meth:`get`)
    recent_may_be_stale: ClassVar[bool] = False

    @abstractmethod
    async def get(self, key: str) -> Document | None:
        """The current document, or None."""

    async def get_raw(self, key: str) -> bytes | None:
        """The current document as JSON bytes, or None (backends override it to skip a decode)."""
        doc = await self.get(key)
        return None if doc is None else orjson.dumps(doc)

    async def get_recent(self, key: str) -> Document | None:
        """The document as this store instance last wrote, read or saw it change, else :meth:`get`.

        It may be stale (another writer moved it on): only for a read-modify-write that sends its
        revision as ``expected_revision`` (the write then fails with RevisionConflict, and the
        caller reads afresh with :meth:`get`). None is always current: the key does not exist.
        """
        return await self.get(key)

    @abstractmethod
    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int | None = None,
        predicate: Callable[[Document], bool] | None = None,
    ) -> StorePage:
        """Documents whose key starts with ``prefix``, in key order.

        ``limit`` (0 = all) counts matching documents; ``start_after`` continues after that key;
        ``revision`` reads a consistent snapshot at that revision (a continued list passes the
        first page's revision) or raises RevisionCompacted; ``predicate`` filters before limiting.
        """

    async def list_raw(
        self, prefix: str, *, limit: int = 0, start_after: str | None = None, revision: int | None = None
    ) -> RawStorePage:
        """:meth:`list` without a predicate, as JSON bytes (backends override it to skip decoding)."""
        page = await self.list(prefix, limit=limit, start_after=start_after, revision=revision)
        return RawStorePage([orjson.dumps(doc) for doc in page.items], page.revision, page.more)

    @abstractmethod
    def scan_raw(
        self, prefix: str, *, start_after: str | None = None, revision: int | None = None,
        until: str | None = None, keys_only: bool = False, page_bytes: int = SCAN_PAGE_BYTES,
    ) -> AsyncGenerator[ScanPage, None]:
        """The keys under ``prefix`` after ``start_after`` and up to ``until`` (inclusive), in key
        order, a page at a time as they are taken: a list of any size is held a page at a time
        (``page_bytes`` of JSON, at most :data:`SCAN_PAGE_KEYS` keys), never whole.

        Every page is read at one revision: ``revision``, or the latest when the first page is read
        (it raises what :meth:`list` raises, RevisionCompacted for a revision no longer kept, before
        yielding anything). A later page may still raise RevisionCompacted when the store compacts
        past the scan's revision while it runs (a client reading a list for longer than the history
        lasts), as etcd fails a paged list then.
        """

    @abstractmethod
    async def create(self, key: str, obj: Document, *, guards: Sequence[Guard] = ()) -> Document:
        """Store a new document; returns it with its resourceVersion. Raises KeyExists, or
        GuardConflict when a guard's key moved (see :class:`Guard`)."""

    @abstractmethod
    async def update(
        self, key: str, obj: Document, *, expected_revision: int | None = None, guards: Sequence[Guard] = ()
    ) -> Document:
        """Replace a document; ``expected_revision`` (if given) must equal its current revision.

        Raises KeyNotFound or RevisionConflict (checked first), or GuardConflict.
        """

    @abstractmethod
    async def delete(
        self, key: str, *, expected_revision: int | None = None, guards: Sequence[Guard] = ()
    ) -> Document:
        """Remove a document; returns its last state. Raises KeyNotFound or RevisionConflict, or
        GuardConflict."""

    @abstractmethod
    async def read_guards(self, keys: Sequence[str]) -> builtins.list[GuardValue]:
        """The current content and revision of guard keys, in the order asked, read at one revision."""

    @abstractmethod
    def watch(self, prefix: str, revision: int) -> AsyncIterator[StoreEvent]:
        """Every change under ``prefix`` with a revision > ``revision``, in order, then live ones.

        Raises RevisionCompacted (on first iteration) if ``revision`` is older than the history kept.
        A consumer that falls far behind must not slow writers down: it reads history instead.
        """

    async def compact(self, revision: int) -> None:
        """Drop the history up to and including ``revision`` (backends also compact on their own)."""
        raise NotImplementedError(f"{type(self).__name__} does not support explicit compaction")

    @abstractmethod
    async def current_revision(self) -> int:
        """The revision of the last write."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and files; pending watches end."""


def open_store(url: str, *, etcd_tls: EtcdTls | None = None) -> Store:
    """Open a store by URL: ``sqlite:///path/to/file.db`` (default backend) or
    ``etcd://host:port[,host:port...][/key-prefix][?options]`` (``etcd_tls``: TLS to its members)."""
    if url.startswith("sqlite://"):
        if etcd_tls is not None:
            raise ValueError("--etcd-cafile/--etcd-certfile/--etcd-keyfile only apply to an etcd:// store")
        from ironpool.store.sqlite import SQLiteStore

        return SQLiteStore(url.removeprefix("sqlite://"))
    if url.startswith("etcd://"):
        from ironpool.store.etcd import EtcdStore

        return EtcdStore(url.removeprefix("etcd://"), tls=etcd_tls)
    raise ValueError(f"--store: unsupported store URL {url!r}; use sqlite:///PATH or etcd://HOST:PORT")
