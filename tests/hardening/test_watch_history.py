"""The watch history bounded in bytes as well as events, on both backends: large documents are held
once as JSON, the ring drops its oldest events past its byte bound, and a watcher behind the ring
still gets every event (from the log, or an etcd watch of its own) while one behind the compacted
history gets RevisionCompacted (410 Expired over HTTP)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from ironpool.store.etcd import EtcdStore
from ironpool.store.interface import DECODED_MAX, RevisionCompacted, Store, StoreEvent
from ironpool.store.sqlite import SQLiteStore

from tests.helpers.etcd import EtcdCluster, etcd_cluster

P = "/registry/core/secrets/default/"
RING_BYTES = 4 * 1024 * 1024
_ROOTS = itertools.count()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    with etcd_cluster(1) as cluster:
        yield cluster


@pytest.fixture(params=["sqlite", "etcd"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store
    if request.param == "sqlite":
        opened = SQLiteStore(str(tmp_path / "store.db"), ring_bytes=RING_BYTES, history=10_000)
    else:
        cluster = request.getfixturevalue("etcd")
        url = f"{cluster.endpoints}/h{next(_ROOTS)}"
        opened = EtcdStore(url, ring_bytes=RING_BYTES, compaction_interval=0)
    yield opened
    await opened.close()


def large(name: str, round_: int) -> dict[str, Any]:
    """A ~1 MiB Secret in 1,000 entries."""
    data = {f"k{i:04d}": f"{round_:08d}" * 128 for i in range(1_000)}
    metadata = {"name": name, "namespace": "default", "labels": {"round": str(round_)}}
    return {"metadata": metadata, "data": data}


def ring_of(store: Store) -> tuple[list[StoreEvent], int]:
    if isinstance(store, SQLiteStore):
        return store._ring, store._ring_held
    feed = store._feed  # type: ignore[attr-defined]
    return feed.ring, feed.held


async def take(it: AsyncIterator[StoreEvent], n: int) -> list[StoreEvent]:
    return [await asyncio.wait_for(anext(it), 10) for _ in range(n)]


def test_events_of_large_documents_hold_only_their_json() -> None:
    small = StoreEvent.from_raw("ADDED", "/k", b'{"metadata":{"name":"s"}}', 1)
    big_raw = b'{"data":"' + b"x" * DECODED_MAX + b'"}'
    big = StoreEvent.from_raw("ADDED", "/k", big_raw, 2)
    assert small._object is not None and big._object is None
    assert big.object == {"data": "x" * DECODED_MAX}  # decoded on access, not kept
    assert big._object is None and big.held_bytes == len(big_raw)
    assert small.held_bytes > len(small.raw or b"")  # counted with its decoded form


async def test_ring_is_bounded_in_bytes_and_watchers_behind_it_miss_nothing(store: Store) -> None:
    base = await store.current_revision()
    live = aiter(store.watch(P, base))  # keeps the etcd store's shared feed running
    first = asyncio.ensure_future(anext(live))
    await store.create(P + "big", large("big", 0))
    assert (await asyncio.wait_for(first, 10)).object["metadata"]["labels"] == {"round": "0"}
    for round_ in range(1, 20):
        await store.update(P + "big", large("big", round_))
    events = await take(live, 19)
    assert [e.object["metadata"]["labels"]["round"] for e in events] == [str(r) for r in range(1, 20)]
    ring, held = ring_of(store)
    # 20 versions of ~1 MiB were written; the ring keeps at most RING_BYTES of them, as JSON.
    assert held <= RING_BYTES and sum(e.held_bytes for e in ring) == held
    assert 0 < len(ring) < 20 and all(e._object is None for e in ring)
    # A watcher from the start is behind the ring: it reads the log (or etcd) and misses nothing.
    behind = await take(aiter(store.watch(P, base)), 20)
    assert [e.revision for e in behind] == sorted({e.revision for e in behind})
    assert [e.object["metadata"]["labels"]["round"] for e in behind] == [str(r) for r in range(20)]
    assert all(len(e.object["data"]) == 1_000 for e in behind)


async def test_watcher_behind_the_compacted_history_is_expired(store: Store) -> None:
    base = await store.current_revision()
    await store.create(P + "c", large("c", 0))
    for round_ in range(1, 3):
        await store.update(P + "c", large("c", round_))
    await store.compact(await store.current_revision())
    with pytest.raises(RevisionCompacted):
        await take(aiter(store.watch(P, base)), 1)


async def test_sqlite_log_is_bounded_in_bytes(tmp_path: Path) -> None:
    """Rewriting a ~1 MiB object cannot fill the disk: past ``history_bytes`` the log is compacted
    to half of it at once, and a watcher from before that is told to relist."""
    store = SQLiteStore(str(tmp_path / "store.db"), history_bytes=8 * 1024 * 1024)
    try:
        base = await store.current_revision()
        await store.create(P + "big", large("big", 0))
        for round_ in range(1, 12):
            await store.update(P + "big", large("big", round_))
        (logged,) = store._db.execute(
            "SELECT SUM(length(value) + ifnull(length(prev), 0)) FROM events").fetchone()
        assert logged <= 8 * 1024 * 1024 and store._log.held == logged
        assert store.compacted_revision > base
        with pytest.raises(RevisionCompacted):
            await take(aiter(store.watch(P, base)), 1)
        # The newest versions are all still there for watchers that keep up.
        recent = await take(aiter(store.watch(P, store.compacted_revision)), 1)
        assert recent[0].revision == store.compacted_revision + 1
    finally:
        await store.close()
