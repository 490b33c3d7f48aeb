"""The store on an etcd cluster: what Kubernetes and IronCore keep their state in.

URL: ``etcd://HOST:PORT[,HOST:PORT...][/KEY-PREFIX][?ring=N&compaction-interval=DURATION]``. Objects
live at ``KEY-PREFIX + key`` (``/registry/...`` as in Kubernetes when there is no prefix; a prefix lets
several installations or tests share one cluster), guard keys at ``KEY-PREFIX#guard/...``, outside
every object range.

Semantics are the SQLite store's, from etcd's own: an object's resourceVersion is its key's
``mod_revision``; create, update and delete are transactions comparing ``create_revision`` (absent)
or ``mod_revision`` (the expected revision) together with the write's guards, so a write and its
guards commit at one revision or not at all; a list is a range read at one revision, paged with
``start_after``; a watch is an etcd watch from ``revision + 1`` (local watchers share one, see
:mod:`.etcd_watch`); a compacted revision is etcd's "required revision has been compacted".

The schema version is the key ``KEY-PREFIX#schema``, checked before the first call
(:mod:`.etcd_schema`).

Compaction runs as in kube-apiserver: every ``compaction-interval`` (default 5m, 0 = never) one
apiserver, elected by a compare-and-swap on a counter key, compacts to the revision it saw one
interval earlier, so every watcher has at least one interval to catch up.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

import orjson

from ironpool.store import etcd_codec as codec
from ironpool.store import etcd_txn as txn
from ironpool.store.etcd_client import (
    CALL_TIMEOUT,
    LONG_CALL_TIMEOUT,
    EtcdConnection,
    EtcdTls,
    rpc,
)
from ironpool.store.etcd_schema import ensure_schema
from ironpool.store.etcd_url import duration as _duration
from ironpool.store.etcd_url import parse_url
from ironpool.store.etcd_url import range_end as _range_end
from ironpool.store.etcd_watch import Feed, watch_batches
from ironpool.store.interface import (
    DEFAULT_RING_BYTES,
    SCAN_PAGE_BYTES,
    SCAN_PAGE_KEYS,
    Document,
    EventType,
    Guard,
    GuardValue,
    KeyNotFound,
    RawStorePage,
    RevisionCompacted,
    RevisionConflict,
    ScanPage,
    Store,
    StoreError,
    StoreEvent,
    StorePage,
)
from ironpool.store.recent import RecentObjects

log = logging.getLogger("ironpool.store.etcd")

DEFAULT_RING = 8192
DEFAULT_COMPACTION_INTERVAL = 300.0
_CHUNK = 1000  # keys per range request of a long list
_SCAN_FIRST_KEYS = 16  # keys of a scan's first range request (documents may be up to 1.5 MiB each)
_GUARDS = b"#guard"
_COMPACT_KEY = b"#compact_rev_key"
class EtcdStore(Store):
    """:class:`Store` on an etcd v3 cluster (see the module docstring for layout and guarantees).

    Use one instance per event loop; its connections are made on first use inside that loop.
    """

    recent_may_be_stale = True

    def __init__(self, url: str, *, tls: EtcdTls | None = None, ring: int | None = None,
                 ring_bytes: int | None = None, compaction_interval: float | None = None) -> None:
        endpoints, prefix, options = parse_url(url)
        if ring is None:
            value = options.get("ring", str(DEFAULT_RING))
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"--store: etcd option ring={value!r} must be a positive integer")
            ring = int(value)
        if ring_bytes is None:
            value = options.get("ring-bytes", str(DEFAULT_RING_BYTES))
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"--store: etcd option ring-bytes={value!r} must be a positive integer")
            ring_bytes = int(value)
        if compaction_interval is None:
            compaction_interval = _duration(options.get("compaction-interval", "300s"), "compaction-interval")
        self.endpoints = endpoints
        self.prefix = prefix
        self.ring_size = ring
        self.ring_bytes = ring_bytes
        self.compaction_interval = compaction_interval
        self._root = prefix.encode()
        self._guard_root = self._root + _GUARDS
        self.conn = EtcdConnection(endpoints, tls)
        self._feed: Feed | None = None
        # What this instance wrote or read lately, moved on by the feed: updates start from it
        # instead of a read round trip (get_recent; the write's compare on mod_revision keeps it exact).
        self._recent = RecentObjects()
        self._feed_lock = asyncio.Lock()
        self._schema_lock = asyncio.Lock()
        self._schema_checked = False
        self._compacted = 0
        self._compactor: asyncio.Task[None] | None = None
        self._closed = False

    # -- keys ----------------------------------------------------------------------------------

    def _key(self, key: str) -> bytes:
        if not key.startswith("/"):
            raise ValueError(f"store keys start with '/': {key!r}")
        return self._root + key.encode()

    def _range(self, prefix: str, start_after: str | None = None) -> tuple[bytes, bytes]:
        """The etcd range of the object keys under ``prefix`` (every object key starts with ``/``,
        so the guard and compaction keys never fall in it) after ``start_after``."""
        base = self._root + (prefix or "/").encode()
        start = base
        if start_after:
            start = max(base, self._root + start_after.encode() + b"\0")
        return start, _range_end(base)

    def _guard_key(self, key: str) -> bytes:
        return self._guard_root + key.encode()

    def _event(self, event: Any) -> StoreEvent:
        kv = event.kv
        key = kv.key[len(self._root) :].decode()
        if event.type == 0:  # PUT
            type_: EventType = "ADDED" if kv.version == 1 else "MODIFIED"
            value = kv.value
        else:
            type_ = "DELETED"
            value = event.prev_kv.value if event.HasField("prev_kv") else b'{"metadata":{}}'
        rev = kv.mod_revision
        return codec.WatchedEvent(type_, key, codec.raw_at(value, rev), rev)

    # -- calls ---------------------------------------------------------------------------------

    def _start(self) -> None:
        self._check_open()
        if self._compactor is None and self.compaction_interval > 0:
            self._compactor = asyncio.get_running_loop().create_task(self._compact_periodically(),
                                                                     name="ironpool-etcd-compactor")

    async def _schema(self) -> None:
        """Check the schema version once, before the first call (:mod:`.etcd_schema`)."""
        if self._schema_checked:
            return
        async with self._schema_lock:
            if not self._schema_checked:
                where = f"etcd://{','.join(self.endpoints)}{self.prefix}"
                await ensure_schema(self.conn, self._root, where)
                self._schema_checked = True

    async def _kv(self, what: str, method: str, request: Any, timeout: float = CALL_TIMEOUT) -> Any:
        self._start()
        await self._schema()

        async def attempt(_index: int, kv: Any) -> Any:
            return await getattr(kv, method)(request, timeout=timeout)

        return await self.conn.call(what, attempt)

    async def _read(self, start: bytes, end: bytes | None, revision: int, limit: int,
                    keys_only: bool = False) -> Any:
        m = rpc()
        request = m.RangeRequest(key=start, range_end=end or b"", revision=revision, limit=limit,
                                 keys_only=keys_only)
        try:
            return await self._kv("range", "Range", request, LONG_CALL_TIMEOUT if end else CALL_TIMEOUT)
        except RevisionCompacted:
            self._compacted = max(self._compacted, revision)
            raise RevisionCompacted(f"revision {revision} has been compacted") from None
        except StoreError as exc:
            if "future revision" in str(exc):
                raise StoreError(f"revision {revision} is in the future") from None
            raise

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, key: str) -> Document | None:
        raw = await self.get_raw(key)
        return None if raw is None else orjson.loads(raw)

    async def get_raw(self, key: str) -> bytes | None:
        resp = await self._read(self._key(key), None, 0, 0)
        if not resp.kvs:
            return None
        kv = resp.kvs[0]
        raw = codec.raw_at(kv.value, kv.mod_revision)
        self._recent.saw(key, kv.mod_revision, raw)
        return raw

    async def get_recent(self, key: str) -> Document | None:
        item = self._recent.get(key)
        if item is None:
            return await self.get(key)
        return orjson.loads(item[1])

    async def _chunks(self, prefix: str, start_after: str | None, revision: int | None,
                      chunk: int) -> AsyncGenerator[tuple[int, Sequence[Any]], None]:
        """``(read revision, kvs)`` of the keys under ``prefix`` after ``start_after``, ``chunk`` keys per
        range request, all read at one revision (at least one, maybe empty, chunk)."""
        if revision is not None and revision < 0:
            raise StoreError(f"revision {revision} is not valid")
        start, end = self._range(prefix, start_after)
        read_rev = revision or 0
        while True:
            resp = await self._read(start, end, read_rev, chunk)
            read_rev = read_rev or int(resp.header.revision)
            yield read_rev, resp.kvs
            if not resp.more or not resp.kvs:
                return
            start = resp.kvs[-1].key + b"\0"

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int | None = None,
        predicate: Callable[[Document], bool] | None = None,
    ) -> StorePage:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        items: builtins.list[Document] = []
        read_rev = 0
        more = False
        chunk = limit + 1 if limit and predicate is None else _CHUNK
        async with contextlib.aclosing(self._chunks(prefix, start_after, revision, chunk)) as chunks:
            async for rev, kvs in chunks:
                read_rev = rev
                for kv in kvs:
                    doc = codec.doc_at(kv.value, kv.mod_revision)
                    if predicate is not None and not predicate(doc):
                        continue
                    if limit and len(items) >= limit:
                        more = True
                        break
                    items.append(doc)
                if more:
                    break
        return StorePage(items=items, revision=read_rev, more=more)

    async def list_raw(
        self, prefix: str, *, limit: int = 0, start_after: str | None = None, revision: int | None = None
    ) -> RawStorePage:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        items: builtins.list[bytes] = []
        read_rev = 0
        async with contextlib.aclosing(
            self._chunks(prefix, start_after, revision, limit + 1 if limit else _CHUNK)
        ) as chunks:
            async for read_rev, kvs in chunks:
                items.extend(codec.raw_at(kv.value, kv.mod_revision) for kv in kvs)
                if limit and len(items) > limit:
                    return RawStorePage(items[:limit], read_rev, True)
        return RawStorePage(items, read_rev, False)

    async def scan_raw(
        self, prefix: str, *, start_after: str | None = None, revision: int | None = None,
        until: str | None = None, keys_only: bool = False, page_bytes: int = SCAN_PAGE_BYTES,
    ) -> AsyncGenerator[ScanPage, None]:
        if revision is not None and revision < 0:
            raise StoreError(f"revision {revision} is not valid")
        start, end = self._range(prefix, start_after)
        if until is not None:
            end = min(end, self._root + until.encode() + b"\0")
        read_rev = revision or 0
        root = len(self._root)
        # etcd bounds a range by keys, not bytes: the first page asks for a few, the following ones
        # for as many as fill page_bytes at the sizes seen so far.
        count = SCAN_PAGE_KEYS if keys_only else max(1, min(_SCAN_FIRST_KEYS, page_bytes // 4096))
        while start < end:
            resp = await self._read(start, end, read_rev, count, keys_only=keys_only)
            read_rev = read_rev or int(resp.header.revision)
            kvs = resp.kvs
            keys = [kv.key[root:].decode() for kv in kvs]
            items = [] if keys_only else [codec.raw_at(kv.value, kv.mod_revision) for kv in kvs]
            more = bool(resp.more and kvs)
            yield ScanPage(keys, items, read_rev, more)
            if not more:
                return
            start = kvs[-1].key + b"\0"
            if items:
                average = max(1, sum(len(i) for i in items) // len(items))
                count = max(1, min(SCAN_PAGE_KEYS, page_bytes // average))
        yield ScanPage([], [], read_rev or await self.current_revision(), False)

    async def current_revision(self) -> int:
        resp = await self._read(self._root + _COMPACT_KEY, None, 0, 1)
        return int(resp.header.revision)

    async def read_guards(self, keys: Sequence[str]) -> builtins.list[GuardValue]:
        if not keys:
            return []
        m = rpc()
        ops = [m.RequestOp(request_range=m.RangeRequest(key=self._guard_key(k))) for k in keys]
        resp = await self._kv("read guards", "Txn", m.TxnRequest(success=ops))
        return [txn.guard_value(k, r.response_range) for k, r in zip(keys, resp.responses, strict=True)]

    # -- writes --------------------------------------------------------------------------------

    async def _txn(self, what: str, key: bytes, compare: Any, op: Any, guards: Sequence[Guard],
                   resolve: txn.Resolve) -> Any:
        """Run one object write with its guards (:mod:`.etcd_txn`); ``resolve`` turns a failed compare
        into the store's error, or into success when a retry finds its own earlier write."""
        request = txn.write_request(key, compare, op, guards, self._guard_key)
        self._start()
        await self._schema()
        tries = 0

        async def attempt(_index: int, kv: Any) -> Any:
            nonlocal tries
            tries += 1
            return await kv.Txn(request, timeout=CALL_TIMEOUT)

        return txn.outcome(await self.conn.call(what, attempt), guards, resolve, tries > 1)

    async def create(self, key: str, obj: Document, *, guards: Sequence[Guard] = ()) -> Document:
        m = rpc()
        ek = self._key(key)
        value = codec.encode(obj)
        op = m.RequestOp(request_put=m.PutRequest(key=ek, value=value))
        resp = await self._txn("create", ek, txn.absent(ek), op, guards, txn.create_resolver(key, value))
        return self._written(key, value, txn.committed_revision(resp))

    async def update(
        self, key: str, obj: Document, *, expected_revision: int | None = None, guards: Sequence[Guard] = ()
    ) -> Document:
        m = rpc()
        ek = self._key(key)
        value = codec.encode(obj)
        op = m.RequestOp(request_put=m.PutRequest(key=ek, value=value))
        try:
            resp = await self._txn("update", ek, txn.expect(ek, expected_revision), op, guards,
                                   txn.resolver(key, expected_revision, value))
        except (RevisionConflict, KeyNotFound):
            self._recent.forget(key)  # what get_recent answered may be stale: read afresh next time
            raise
        return self._written(key, value, txn.committed_revision(resp))

    def _written(self, key: str, value: bytes, revision: int) -> Document:
        raw = codec.raw_at(value, revision)
        self._recent.saw(key, revision, raw)
        return orjson.loads(raw)

    async def delete(
        self, key: str, *, expected_revision: int | None = None, guards: Sequence[Guard] = ()
    ) -> Document:
        m = rpc()
        ek = self._key(key)
        op = m.RequestOp(request_delete_range=m.DeleteRangeRequest(key=ek, prev_kv=True))
        resp = await self._txn("delete", ek, txn.expect(ek, expected_revision), op, guards,
                               txn.resolver(key, expected_revision, None))
        prev = resp.responses[0].response_delete_range.prev_kvs[0]
        self._recent.gone(key, int(resp.header.revision))
        return codec.doc_at(prev.value, resp.header.revision)

    # -- compaction ----------------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        m = rpc()
        try:
            await self._kv("compact", "Compact", m.CompactionRequest(revision=revision), LONG_CALL_TIMEOUT)
        except RevisionCompacted:
            pass  # compacted past it already
        except StoreError as exc:
            if "future revision" in str(exc):
                raise StoreError(f"cannot compact to revision {revision}: it is in the future") from None
            raise
        self._compacted = max(self._compacted, revision)

    async def _compact_periodically(self) -> None:
        """kube-apiserver's compactor: each interval, whoever bumps the shared counter first compacts
        to the revision the previous round saw."""
        counter, last = 0, 0
        while not self._closed:
            await asyncio.sleep(self.compaction_interval)
            try:
                counter, last = await self._compact_round(counter, last)
            except StoreError as exc:
                log.warning("etcd compaction skipped: %s", exc)

    async def _compact_round(self, counter: int, last: int) -> tuple[int, int]:
        m = rpc()
        key = self._root + _COMPACT_KEY
        request = m.TxnRequest(
            compare=[m.Compare(key=key, target=m.Compare.VERSION, result=m.Compare.EQUAL, version=counter)],
            success=[m.RequestOp(request_put=m.PutRequest(key=key, value=str(last).encode()))],
            failure=[m.RequestOp(request_range=m.RangeRequest(key=key))],
        )
        resp = await self._kv("compaction counter", "Txn", request)
        now = int(resp.header.revision)
        if not resp.succeeded:
            kvs = resp.responses[0].response_range.kvs
            return (int(kvs[0].version) if kvs else 0), now  # another apiserver compacts this round
        if last:
            await self.compact(last)
        return counter + 1, now

    # -- watch ---------------------------------------------------------------------------------

    async def _feed_for(self, revision: int) -> Feed:
        async with self._feed_lock:
            feed = self._feed
            if feed is None or not feed.usable:
                current = await self.current_revision()
                after = revision if current - revision <= self.ring_size else current
                start, end = self._range("")
                feed = self._feed = Feed(self.conn, start, end, after, self._event, self.ring_size,
                                         self.ring_bytes, self._recent.observe)
            return feed

    async def watch(self, prefix: str, revision: int) -> AsyncIterator[StoreEvent]:
        self._check_open()
        if revision < self._compacted:
            raise RevisionCompacted(f"revision {revision} has been compacted (oldest kept {self._compacted})")
        try:
            feed = await self._feed_for(revision)
        except StoreError:
            if self._closed:
                return  # closed while starting: a watch ends when its store closes
            raise
        cursor = revision
        while not self._closed:
            batch = feed.after(cursor)
            if batch is None:
                break  # behind the ring, or the feed stopped: a watch of our own from here
            if not batch:
                cursor = await feed.wait(prefix, cursor)
                continue
            for event in batch:
                cursor = event.revision
                if event.key.startswith(prefix):
                    yield event
        if self._closed:
            return
        start, end = self._range(prefix)
        try:
            async for events in watch_batches(self.conn, start, end, cursor, self._event):
                for event in events:
                    yield event
        except RevisionCompacted:
            self._compacted = max(self._compacted, cursor + 1)
            raise

    # -- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._compactor is not None:
            self._compactor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._compactor
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.wake()
            await feed.stop()
        await self.conn.close()


__all__ = ["EtcdStore", "EtcdTls"]
