"""Lists read from the store as they are written: a list of any size is held a page at a time.

:func:`open_list` reads what decides the answer before its first byte is sent: the options are
checked, the revision resolved and the first page read, so a bad option, a compacted revision or a
store that does not answer is a ``Status`` with its code, not a broken body. The items that follow
come from the store a page at a time (:meth:`~ironpool.store.interface.Store.scan_raw`), all at the
revision of the first page: the list is one consistent snapshot however long it takes to write.

The list's ``metadata`` comes before its items on the wire, and with ``limit`` it holds the
``continue`` token, the key of the page's last object. So a limited list is read twice at one
revision: first to find where the page ends (only keys, without a selector), then to write it. With
a selector the first read has the objects at hand: a page of at most a store page's bytes is kept
from it and not read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.registry.listing import (
    FILTER_SLICE,
    ListOptions,
    ListStart,
    encode_continue,
    expired,
    list_start,
)
from ironpool.apiserver.registry.selection import Selection
from ironpool.store.interface import SCAN_PAGE_BYTES, RevisionCompacted, ScanPage, Store


@dataclass(frozen=True)
class StreamedList:
    """A list whose ``metadata`` is known before its items: those of its first page as stored JSON,
    and the following ones a page at a time as they are read (``rest`` is None when the first page
    held them all)."""

    metadata: dict[str, Any]
    first: list[bytes]
    rest: AsyncIterator[list[bytes]] | None


class _Turns:
    """Hands the event loop over every :data:`~.listing.FILTER_SLICE` of matching (as
    :func:`.listing.filtered` does), so a large filtered list does not hold up other requests."""

    def __init__(self) -> None:
        self._ends = time.perf_counter() + FILTER_SLICE

    async def take(self) -> None:
        if time.perf_counter() >= self._ends:
            await asyncio.sleep(0)
            self._ends = time.perf_counter() + FILTER_SLICE


async def open_list(store: Store, info: ResourceInfo, namespace: str | None,
                    options: ListOptions) -> StreamedList:
    """The list ``options`` ask for, its first page read (raises the list's errors: 400/422 for
    options, 410 for a compacted revision, 504 for one not reached); the rest is read as it is taken."""
    start = await list_start(store, info, namespace, options)
    revision, until, more, kept = start.revision, None, False, None
    try:
        if options.limit:
            revision, until, more, kept = await _page_end(store, start, options.limit)
        if kept is not None:  # the first read held the whole page: no second one
            return StreamedList(_metadata(revision or 0, until if more else None), kept, None)
        pages = store.scan_raw(start.prefix, start_after=start.start_after, revision=revision, until=until)
        first = await anext(pages)
    except RevisionCompacted:
        raise expired(options, revision) from None
    metadata = _metadata(first.revision, until if more else None)
    turns = _Turns()
    items = await _selected(first, start.selection, turns)
    if not first.more:
        await pages.aclose()
        return StreamedList(metadata, items, None)
    return StreamedList(metadata, items, _following(pages, start.selection, turns, options, first.revision))


def _metadata(revision: int, last: str | None) -> dict[str, Any]:
    """A list's metadata: its revision, and a continue token after ``last`` when more follow."""
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if last is not None:
        metadata["continue"] = encode_continue(last, revision)
    return metadata


async def _page_end(store: Store, start: ListStart, limit: int,
                    ) -> tuple[int | None, str | None, bool, list[bytes] | None]:
    """The revision a page of ``limit`` objects reads at, the key of its last object, whether more
    follow it (else the key is None: the page runs to the end), and, when a selector had the objects
    read anyway and the page's come to at most a store page's bytes, the page's objects."""
    selection, revision, count, last = start.selection, start.revision, 0, None
    kept: list[bytes] | None = [] if selection is not None else None
    size = 0
    turns = _Turns()
    scan = store.scan_raw(start.prefix, start_after=start.start_after, revision=revision,
                          keys_only=selection is None)
    async with contextlib.aclosing(scan) as pages:
        async for page in pages:
            revision = page.revision
            for i, key in enumerate(page.keys):
                if selection is not None:
                    await turns.take()
                    if not selection.matches_stored(page.items[i]):
                        continue
                if count == limit:
                    return revision, last, True, kept
                count, last = count + 1, key
                if kept is not None:
                    size += len(page.items[i])
                    if size > SCAN_PAGE_BYTES:
                        kept = None  # too large to hold: the page is read again as it is written
                    else:
                        kept.append(page.items[i])
    return revision, None, False, kept


async def _selected(page: ScanPage, selection: Selection | None, turns: _Turns) -> list[bytes]:
    """The items of ``page`` that ``selection`` selects."""
    if selection is None:
        return page.items
    selected = []
    for item in page.items:
        await turns.take()
        if selection.matches_stored(item):
            selected.append(item)
    return selected


async def _following(pages: AsyncGenerator[ScanPage, None], selection: Selection | None, turns: _Turns,
                     options: ListOptions, revision: int) -> AsyncIterator[list[bytes]]:
    """The selected items of the pages after the first, a page at a time as they are read."""
    try:
        async for page in pages:
            yield await _selected(page, selection, turns)
    except RevisionCompacted:
        # The history went past the list's revision while it was written: the body is cut off
        # (the response aborts the connection), and the error says why in the log.
        raise expired(options, revision) from None
    finally:
        await pages.aclose()
