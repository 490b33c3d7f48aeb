"""Informers: list + watch into a local cache, with event handlers and indexes.

An :class:`Informer` lists its resource type, then watches from the list's resourceVersion. A
dropped stream is resumed from the last resourceVersion it saw (BOOKMARKs included); when the
server answers 410 Expired it relists and emits the add/update/delete differences against the cache,
so handlers always see a picture consistent with the server. Connection failures back off
exponentially. :class:`SharedInformerFactory` hands the same informer to every controller asking for
the same type and selectors. A :class:`RawInformer` does the same but keeps and hands out the JSON
documents as the server sent them, for controllers that read a few fields of many objects (the
scheduler) and would otherwise pay for a model validation on every event.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import logging
import random
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ironpool.api.errors import ApiError, Expired
from ironpool.api.meta import object_key
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import ListResult, Obj, ServerUnreachable, meta, resource_for_model

M = TypeVar("M", bound=BaseModel)
#: what an informer's cache holds: a typed model, or the JSON document itself
T = TypeVar("T")
log = logging.getLogger(__name__)

#: objects of a first list handed on between two chances for the next page's request to go out
_PAGE_SLICE = 100

IndexFunc = Callable[[T], list[str]]
AddHandler = Callable[[T], Awaitable[None] | None]
UpdateHandler = Callable[[T, T], Awaitable[None] | None]
DeleteHandler = Callable[[T], Awaitable[None] | None]


@dataclass
class _Handlers(Generic[T]):
    on_add: AddHandler[T] | None
    on_update: UpdateHandler[T] | None
    on_delete: DeleteHandler[T] | None


@dataclass
class _Entry(Generic[T]):
    obj: T
    resource_version: str


class _ListWatch(Generic[T]):
    """List-watch cache of one resource type (optionally one namespace and selectors)."""

    def __init__(
        self,
        client: AsyncClient,
        model: type[BaseModel],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: dict[str, IndexFunc[T]] | None = None,
        watch_timeout: int = 300,
        backoff_base: float = 0.2,
        backoff_cap: float = 30.0,
        page_size: int = 500,
    ) -> None:
        self.client = client
        self.info = resource_for_model(model)
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout = watch_timeout
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.page_size = page_size
        self._indexers: dict[str, IndexFunc[T]] = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._cache: dict[str, _Entry[T]] = {}
        self._handlers: list[_Handlers[T]] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._replays: set[asyncio.Future[None]] = set()
        self._stopping = False
        self.resource_version = ""
        # Counters a test or /metrics can read: how often the informer listed and (re)watched.
        self.list_count = 0
        self.watch_count = 0

    # -- configuration -----------------------------------------------------------------------

    def add_event_handler(
        self,
        on_add: AddHandler[T] | None = None,
        on_update: UpdateHandler[T] | None = None,
        on_delete: DeleteHandler[T] | None = None,
    ) -> None:
        """Register handlers (sync or async). Registered once objects are cached (after the sync, or
        between two pages of the first list), it first sees every cached object."""
        handlers = _Handlers(on_add, on_update, on_delete)
        self._handlers.append(handlers)
        if on_add is not None:
            for entry in list(self._cache.values()):
                self._spawn_replay(on_add, entry.obj)

    def _spawn_replay(self, handler: AddHandler[T], obj: T) -> None:
        result = handler(obj)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._replays.add(task)  # keep a reference until done, or the task may be collected
            task.add_done_callback(self._replays.discard)

    def add_indexer(self, name: str, func: IndexFunc[T]) -> None:
        if name in self._indexers:
            raise ValueError(f"indexer {name!r} already exists")
        self._indexers[name] = func
        self._indices[name] = {}
        for key, entry in self._cache.items():
            self._index_add(name, key, entry.obj)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the informer in a background task (idempotent)."""
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.info.plural}")
        return self._task

    async def stop(self) -> None:
        """Stop watching and wait for the task to end."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def has_synced(self) -> bool:
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        """Wait until the first list has been loaded into the cache (TimeoutError after ``timeout``)."""
        await asyncio.wait_for(self._synced.wait(), timeout)

    # -- reading the cache ---------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        entry = self._cache.get(key)
        return entry.obj if entry else None

    def get_by_name(self, name: str, namespace: str | None = None) -> T | None:
        return self.get(f"{namespace}/{name}" if namespace and self.info.namespaced else name)

    def list(self) -> builtins.list[T]:
        return [entry.obj for entry in self._cache.values()]

    def keys(self) -> builtins.list[str]:
        return sorted(self._cache)

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        """Objects whose index function returned ``value`` (e.g. machines by pool name)."""
        if index not in self._indices:
            raise KeyError(f"no indexer named {index!r}")
        keys = self._indices[index].get(value, set())
        return [self._cache[k].obj for k in sorted(keys) if k in self._cache]

    def __len__(self) -> int:
        return len(self._cache)

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        failures = 0
        need_list = True
        while not self._stopping:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                started = time.monotonic()
                events = await self._watch_once()
                # A stream the server ends at once without events is a failure in disguise.
                failures = failures + 1 if events == 0 and time.monotonic() - started < 1.0 else 0
            except Expired:
                log.info("%s: resourceVersion %s expired, relisting", self.info.plural, self.resource_version)
                if need_list:
                    failures += 1  # the list itself expired (stale continue token): back off
                need_list = True
                if not failures:
                    continue
            except (ServerUnreachable, ApiError) as exc:
                failures += 1
                log.warning("%s informer: %s (attempt %d)", self.info.plural, exc, failures)
            if failures:
                await asyncio.sleep(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        delay = min(self.backoff_base * (2 ** min(failures - 1, 30)), self.backoff_cap)
        return delay * random.uniform(0.8, 1.2)

    async def _relist(self) -> None:
        # A first list (nothing cached to compare with) hands each page on as it arrives, while the
        # server renders the next one; a relist compares the whole list with the cache at the end.
        first = not self._cache
        items: dict[str, tuple[str, T]] = {}
        rv = ""
        page = await self._list_page(None)
        while True:
            following = asyncio.ensure_future(self._list_page(page.continue_)) if page.continue_ else None
            try:
                for i, raw in enumerate(page.items):
                    key, obj = object_key(raw), self._decode(raw)
                    obj_rv = str(meta(raw).get("resourceVersion", ""))
                    if not first:
                        items[key] = (obj_rv, obj)
                        continue
                    self._store(key, obj, obj_rv)
                    await self._emit_add(obj)
                    if following is not None and i % _PAGE_SLICE == 0:
                        await asyncio.sleep(0)  # the next page's request goes out meanwhile
            except BaseException:
                if following is not None:
                    following.cancel()
                raise
            rv = page.resource_version or rv
            if following is None:
                break
            page = await following
        self.list_count += 1
        if not first:
            await self._replace(items)
        self.resource_version = rv
        self._synced.set()

    async def _list_page(self, token: str | None) -> ListResult[Obj]:
        return await self.client.list_raw(self.info, self.namespace, self.label_selector, self.field_selector,
                                          self.page_size, token)

    async def _replace(self, items: dict[str, tuple[str, T]]) -> None:
        old = self._cache
        for key, (rv, obj) in items.items():
            prev = old.get(key)
            if prev is None:
                self._store(key, obj, rv)
                await self._emit_add(obj)
            elif prev.resource_version != rv:
                self._store(key, obj, rv)
                await self._emit_update(prev.obj, obj)
        for key in [k for k in old if k not in items]:
            gone = self._remove(key)
            if gone is not None:
                await self._emit_delete(gone)

    async def _watch_once(self) -> int:
        self.watch_count += 1
        count = 0
        jitter = random.randint(0, max(1, self.watch_timeout // 5))
        async for event in self.client.watch_raw(self.info, self.namespace, self.resource_version,
                                                 self.label_selector, self.field_selector,
                                                 self.watch_timeout + jitter):
            count += 1
            if event.type == "BOOKMARK":
                self.resource_version = event.resource_version or self.resource_version
                continue
            await self._apply(event.type, event.object)
            self.resource_version = event.resource_version or self.resource_version
        return count

    async def _apply(self, etype: str, raw: Obj) -> None:
        key = object_key(raw)
        rv = str(meta(raw).get("resourceVersion", ""))
        obj = self._decode(raw)
        if etype == "DELETED":
            gone = self._remove(key)
            await self._emit_delete(gone if gone is not None else obj)
            return
        prev = self._cache.get(key)
        self._store(key, obj, rv)
        if prev is None:
            await self._emit_add(obj)
        else:
            await self._emit_update(prev.obj, obj)

    def _decode(self, raw: Obj) -> T:
        raise NotImplementedError

    # -- cache and indices -----------------------------------------------------------------------

    def _store(self, key: str, obj: T, rv: str) -> None:
        prev = self._cache.get(key)
        if prev is not None:
            self._index_remove(key, prev.obj)
        self._cache[key] = _Entry(obj, rv)
        for name in self._indexers:
            self._index_add(name, key, obj)

    def _remove(self, key: str) -> T | None:
        entry = self._cache.pop(key, None)
        if entry is None:
            return None
        self._index_remove(key, entry.obj)
        return entry.obj

    def _index_add(self, name: str, key: str, obj: T) -> None:
        for value in self._indexers[name](obj):
            self._indices[name].setdefault(value, set()).add(key)

    def _index_remove(self, key: str, obj: T) -> None:
        for name, func in self._indexers.items():
            index = self._indices[name]
            for value in func(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    # -- handlers ------------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., Awaitable[None] | None], *args: T) -> None:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("%s informer: event handler %r failed", self.info.plural, fn)

    # Over a copy of the handlers: one registered by a handler meanwhile has already had the object
    # (it was cached first) from its replay.
    async def _emit_add(self, obj: T) -> None:
        for h in tuple(self._handlers):
            if h.on_add:
                await self._call(h.on_add, obj)

    async def _emit_update(self, old: T, new: T) -> None:
        for h in tuple(self._handlers):
            if h.on_update:
                await self._call(h.on_update, old, new)

    async def _emit_delete(self, obj: T) -> None:
        for h in tuple(self._handlers):
            if h.on_delete:
                await self._call(h.on_delete, obj)


class Informer(_ListWatch[M]):
    """List-watch cache of one resource type as typed models (optionally one namespace and selectors)."""

    def __init__(self, client: AsyncClient, model: type[M], namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 indexers: dict[str, IndexFunc[M]] | None = None, **options: Any) -> None:
        super().__init__(client, model, namespace, label_selector, field_selector, indexers, **options)
        self.model = model

    def _decode(self, raw: Obj) -> M:
        return self.model.model_validate(raw)


class RawInformer(_ListWatch[Obj]):
    """List-watch cache of one resource type as the JSON documents the server sent (no validation)."""

    _transform: Callable[[Obj], Obj] | None = None

    def set_transform(self, transform: Callable[[Obj], Obj]) -> None:
        """Apply ``transform`` to every document before it is cached and handed on (client-go's
        ``SetTransform``: e.g. drop fields no handler reads, to keep the cache small); set it before
        :meth:`start`. It may change the freshly decoded document in place."""
        self._transform = transform

    def _decode(self, raw: Obj) -> Obj:
        return raw if self._transform is None else self._transform(raw)


def without_managed_fields(doc: Obj) -> Obj:
    """A transform for :meth:`RawInformer.set_transform`: drops ``metadata.managedFields`` (often half
    of an object's JSON), as kube-scheduler's informers do."""
    meta_ = doc.get("metadata")
    if isinstance(meta_, dict):
        meta_.pop("managedFields", None)
    return doc


class SharedInformerFactory:
    """One informer per (type, namespace, selectors), shared by every controller of a process."""

    def __init__(self, client: AsyncClient, **informer_options: Any) -> None:
        self.client = client
        self._options = informer_options
        self._informers: dict[Hashable, _ListWatch[Any]] = {}

    def informer(self, model: type[M], namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None) -> Informer[M]:
        key = (model, namespace, label_selector, field_selector)
        found = self._informers.get(key)
        if not isinstance(found, Informer):
            found = Informer(self.client, model, namespace, label_selector, field_selector, **self._options)
            self._informers[key] = found
        return found

    def raw_informer(self, model: type[BaseModel], namespace: str | None = None,
                     label_selector: str | None = None, field_selector: str | None = None) -> RawInformer:
        """Like :meth:`informer`, holding the JSON documents (``model`` names the resource)."""
        key = ("raw", model, namespace, label_selector, field_selector)
        found = self._informers.get(key)
        if not isinstance(found, RawInformer):
            found = RawInformer(self.client, model, namespace, label_selector, field_selector,
                                **self._options)
            self._informers[key] = found
        return found

    def start(self) -> None:
        for informer in self._informers.values():
            informer.start()

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        await asyncio.gather(*(i.wait_for_sync(timeout) for i in self._informers.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._informers.values()))
