"""The store contract: a versioned key-value space of JSON documents with a global revision.

It follows etcd3's model so that SQLite and etcd are drop-ins for each other:

* every write gets the next value of one global, monotonically increasing revision;
* an object's ``metadata.resourceVersion`` is the revision of its last write (set by the store on
  every document it returns, as a decimal string);
* ``list`` returns the revision it was read at, and ``watch(prefix, R)`` yields every change with a
  revision greater than ``R`` in revision order, so nothing is lost between a list and its watch;
* a revision older than the retained history raises :class:`RevisionCompacted` (the client relists).

Keys look like ``/registry/{group}/{plural}/{namespace}/{name}`` (cluster-scoped objects use ``_``
for the namespace). Kubernetes semantics (generation, finalizers, uid, validation) live one level
up, in the apiserver's registry; the store only stores.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

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
class ListResult:
    """A page of a list: the documents in key order, the revision read at, and whether more follow."""

    items: list[Document]
    revision: int
    more: bool = False


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change. For DELETED, ``object`` is the last state, with the deletion's revision."""

    type: EventType
    key: str
    object: Document
    revision: int


class Store(ABC):
    """Interface every backend implements; tests in ``tests/store`` run against each one."""

    @abstractmethod
    async def get(self, key: str) -> Document | None:
        """The current document, or None."""

    @abstractmethod
    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int | None = None,
        predicate: Callable[[Document], bool] | None = None,
    ) -> ListResult:
        """Documents whose key starts with ``prefix``, in key order.

        ``limit`` (0 = all) counts matching documents; ``start_after`` continues after that key;
        ``revision`` reads a consistent snapshot at that revision (a continued list passes the
        first page's revision) or raises RevisionCompacted; ``predicate`` filters before limiting.
        """

    @abstractmethod
    async def create(self, key: str, obj: Document) -> Document:
        """Store a new document; returns it with its resourceVersion. Raises KeyExists."""

    @abstractmethod
    async def update(self, key: str, obj: Document, *, expected_revision: int | None = None) -> Document:
        """Replace a document; ``expected_revision`` (if given) must equal its current revision.

        Raises KeyNotFound or RevisionConflict.
        """

    @abstractmethod
    async def delete(self, key: str, *, expected_revision: int | None = None) -> Document:
        """Remove a document; returns its last state. Raises KeyNotFound or RevisionConflict."""

    @abstractmethod
    def watch(self, prefix: str, revision: int) -> AsyncIterator[WatchEvent]:
        """Every change under ``prefix`` with a revision > ``revision``, in order, then live ones.

        Raises RevisionCompacted (on first iteration) if ``revision`` is older than the history kept.
        A consumer that falls far behind must not slow writers down: it reads history instead.
        """

    @abstractmethod
    async def current_revision(self) -> int:
        """The revision of the last write."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and files; pending watches end."""


def open_store(url: str) -> Store:
    """Open a store by URL: ``sqlite:///path/to/file.db`` (default backend) or ``etcd://host:port[,...]``."""
    if url.startswith("sqlite://"):
        from ironpool.store.sqlite import SQLiteStore

        return SQLiteStore(url.removeprefix("sqlite://"))
    if url.startswith("etcd://"):
        from ironpool.store.etcd import EtcdStore  # type: ignore[import-not-found]

        return EtcdStore(url.removeprefix("etcd://"))  # type: ignore[no-any-return]
    raise ValueError(f"--store: unsupported store URL {url!r}; use sqlite:///PATH or etcd://HOST:PORT")
