"""The documents a store instance wrote, read or saw change lately: what a read-modify-write starts
from without a round trip to the store (:meth:`~ironpool.store.interface.Store.get_recent`).

An entry may be stale, never wrong: it is a document exactly as the store held it at its revision
(the store's own answer to a write or a read, or a watch event). A write that starts from it sends
that revision as its precondition, so if the object moved on meanwhile the write fails with
``RevisionConflict`` and the caller reads afresh; a revision names one value, so a write that
commits started from the current object. An entry only ever moves to a newer revision (answers and
watch events arrive in any order), and a deletion newer than the entry removes it.

Bounded in bytes; the least recently used entries go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from ironpool.store.interface import StoreEvent

#: what the entries may hold together (JSON bytes) before the least recently used are dropped
DEFAULT_RECENT_BYTES = 32 * 1024 * 1024


class RecentObjects:
    """Key -> (revision, the document's JSON with its resourceVersion), least recently used first."""

    def __init__(self, max_bytes: int = DEFAULT_RECENT_BYTES) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self._items: OrderedDict[str, tuple[int, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> tuple[int, bytes] | None:
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def saw(self, key: str, revision: int, raw: bytes) -> None:
        """``key`` held ``raw`` at ``revision`` (kept unless a newer revision is known already)."""
        item = self._items.get(key)
        if item is not None:
            if item[0] >= revision:
                return
            self.held -= len(item[1])
        self._items[key] = (revision, raw)
        self._items.move_to_end(key)
        self.held += len(raw)
        while self.held > self.max_bytes and self._items:
            _, (_, dropped) = self._items.popitem(last=False)
            self.held -= len(dropped)

    def gone(self, key: str, revision: int) -> None:
        """``key`` was deleted at ``revision``."""
        item = self._items.get(key)
        if item is not None and item[0] < revision:
            del self._items[key]
            self.held -= len(item[1])

    def forget(self, key: str) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self.held -= len(item[1])

    def observe(self, events: Iterable[StoreEvent]) -> None:
        """Watch events: entries this instance holds move on with them (others are not added, so
        a watch of everything does not fill the cache with objects nobody here writes)."""
        items = self._items
        for event in events:
            if event.key not in items:
                continue
            if event.type == "DELETED":
                self.gone(event.key, event.revision)
            elif event.raw is not None:
                self.saw(event.key, event.revision, event.raw)
            else:
                self.gone(event.key, event.revision)  # no JSON at hand: forget the older entry

    def clear(self) -> None:
        self._items.clear()
        self.held = 0
