"""An in-memory view of some kinds of a store, current with the writes of every apiserver over it:
what the apiserver's indexes are built on (capacity admission, IPAM, the RBAC index, the pool graph).

With several apiservers the registry's commit observers only hear of this process's writes. A
:class:`StoreMirror` lists its kinds at one revision and then watches the store from there (like an
informer, without HTTP), so the view also follows writes made through other apiservers. This
process's own commits are applied at once as well (:meth:`StoreMirror.committed`), so a request sees
the effect of the one before it on the same apiserver without waiting for the watch.

Both paths may bring the same change, in either order: a state is applied only if it is newer than
what the key shows (by revision). A removal committed here has no revision at hand; its key is held
as removed until the watch brings the removal, so an older event of it cannot bring it back.

A mirror is a cache, not an arbiter: a decision that must hold across apiservers goes into the
write as guard keys (:class:`~ironpool.store.interface.Guard`); the mirror only saves reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import Callable, Sequence

from ironpool.api.resource_info import ResourceInfo
from ironpool.store.interface import Document, RevisionCompacted, Store, StoreError

log = logging.getLogger("ironpool.store.mirror")

Apply = Callable[[ResourceInfo, str, Document | None], None]
_REMOVED_HERE = math.inf
_TOMBSTONE_SPAN = 10_000  # revisions a removal is remembered after the watch passed it
_RETRY = 1.0


def _key(info: ResourceInfo, doc: Document) -> str:
    m = doc.get("metadata") or {}
    return info.key(m.get("namespace"), str(m.get("name", "")))


def _revision(doc: Document) -> int:
    return int((doc.get("metadata") or {}).get("resourceVersion") or 0)


class StoreMirror:
    """Feeds ``apply(info, key, doc or None)`` with the objects of ``infos``: first the listed ones,
    then every change (see the module docstring)."""

    def __init__(self, store: Store, infos: Sequence[ResourceInfo], apply: Apply) -> None:
        self.store = store
        self.infos = tuple(infos)
        self._apply = apply
        self._seen: dict[str, float] = {}  # key -> revision of the state applied last
        self._gone: set[str] = set()  # keys whose state applied last is a removal
        self._removed: deque[tuple[int, str]] = deque()  # (revision, key) of removals, oldest first
        self._tasks: list[asyncio.Task[None]] = []
        self.revision = 0  # the revision the initial lists were read at

    async def start(self) -> None:
        """List every kind at one revision, apply what is there, and follow the changes."""
        listed: list[tuple[ResourceInfo, list[Document]]] = []
        revision: int | None = None
        for info in self.infos:
            page = await self.store.list(info.prefix(None), revision=revision)
            revision = page.revision
            listed.append((info, page.items))
        self.revision = revision or 0
        for info, docs in listed:
            for doc in docs:
                self._offer(info, _key(info, doc), doc, _revision(doc))
        self._tasks = self._followers(asyncio.get_running_loop())

    def _followers(self, loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[None]]:
        """The tasks that follow the changes after the lists: one watch per kind."""
        return [loop.create_task(self._follow(info), name=f"ironpool-mirror-{info.plural}")
                for info in self.infos]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        """This process committed ``doc`` at ``key`` (None: removed it)."""
        if info not in self.infos:
            return
        if doc is not None:
            self._offer(info, key, doc, _revision(doc), local=True)
        elif key not in self._gone:  # (the watch may have brought the removal already)
            self._seen[key] = _REMOVED_HERE
            self._gone.add(key)
            self._apply(info, key, None)

    def _offer(self, info: ResourceInfo, key: str, doc: Document | None, revision: int,
               local: bool = False) -> None:
        seen = self._seen.get(key, -1)
        if seen == _REMOVED_HERE:
            if doc is None:
                self._tombstone(key, revision)  # the watch brought the removal made here
                return
            if not local:
                return  # the watch is still behind that removal: this state is older
        elif revision <= seen:
            return
        if doc is None:
            self._tombstone(key, revision)
        else:
            self._seen[key] = revision
            self._gone.discard(key)
        self._apply(info, key, doc)

    def _tombstone(self, key: str, revision: int) -> None:
        """Remember a removal for a while: a late local callback of an older write must not undo it."""
        self._seen[key] = revision
        self._gone.add(key)
        self._removed.append((revision, key))

    def _prune(self, cursor: int) -> None:
        while self._removed and cursor - self._removed[0][0] > _TOMBSTONE_SPAN:
            revision, key = self._removed.popleft()
            if self._seen.get(key) == revision:
                del self._seen[key]
                self._gone.discard(key)

    async def _follow(self, info: ResourceInfo) -> None:
        cursor = self.revision
        while True:
            try:
                async for event in self.store.watch(info.prefix(None), cursor):
                    cursor = event.revision
                    doc = None if event.type == "DELETED" else event.object
                    self._offer(info, event.key, doc, event.revision)
                    self._prune(cursor)
                return  # the store closed
            except RevisionCompacted:
                cursor = await self._relist(info)
            except StoreError as exc:
                log.warning("mirror of %s: watch failed (%s); resuming in %ss", info.plural, exc, _RETRY)
                await asyncio.sleep(_RETRY)

    async def _relist(self, info: ResourceInfo) -> int:
        """The watch fell behind the store's history: list again, apply it as the truth, and
        remove what is gone."""
        page = await self.store.list(info.prefix(None))
        present = set()
        for doc in page.items:
            key = _key(info, doc)
            present.add(key)
            self._offer(info, key, doc, _revision(doc))
        prefix = info.prefix(None)
        for key in [k for k in self._seen if k.startswith(prefix) and k not in present | self._gone]:
            self._tombstone(key, page.revision)
            self._apply(info, key, None)
        return page.revision
