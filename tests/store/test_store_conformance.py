"""Conformance suite of the Store contract; every backend must pass it unchanged."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from ironpool.store.etcd import EtcdStore
from ironpool.store.interface import (
    Document,
    Guard,
    GuardConflict,
    GuardValue,
    KeyExists,
    KeyNotFound,
    RevisionCompacted,
    RevisionConflict,
    Store,
    StoreEvent,
)
from ironpool.store.sqlite import SQLiteStore

BACKENDS = ["sqlite", "etcd"]

StoreFactory = Callable[..., Awaitable[Store]]


@pytest.fixture(params=BACKENDS)
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Opens stores of one backend on one location; calling it again reopens (a restart).

    etcd stores share the session's cluster, each test under a key prefix of its own. Options:
    ``ring`` tunes both backends' rings, ``history`` only SQLite's (etcd compacts by time).
    """
    opened: list[Store] = []
    root = f"/t{next(_TESTS)}"

    async def _open(**options: int) -> Store:
        store: Store
        if request.param == "sqlite":
            store = SQLiteStore(str(tmp_path / "store.db"), **options)
        else:
            cluster = request.getfixturevalue("etcd_cluster")
            store = EtcdStore(cluster.endpoints + root, ring=options.get("ring"), compaction_interval=0)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_store: StoreFactory) -> Store:
    """A fresh, empty store of the parametrized backend."""
    return await open_store()


P = "/registry/compute.ironcore.dev/machines/"
_TESTS = itertools.count()


def doc(name: str, **spec: Any) -> Document:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": dict(spec)}


def rv(obj: Document) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def collect(it: Any, n: int, timeout: float = 5.0) -> list[StoreEvent]:
    """The next ``n`` events of a watch iterator (fails the test after ``timeout``)."""

    async def take() -> list[StoreEvent]:
        return [await anext(it) for _ in range(n)]

    return await asyncio.wait_for(take(), timeout)


async def test_create_get_sets_revision(store: Store) -> None:
    start = await store.current_revision()
    created = await store.create(P + "default/a", doc("a", x=1))
    assert rv(created) == start + 1 == await store.current_revision()
    got = await store.get(P + "default/a")
    assert got == created
    assert got["spec"] == {"x": 1}
    assert await store.get(P + "default/missing") is None


async def test_create_existing_key_fails_without_side_effects(store: Store) -> None:
    await store.create(P + "default/a", doc("a", x=1))
    before = await store.current_revision()
    with pytest.raises(KeyExists):
        await store.create(P + "default/a", doc("a", x=2))
    assert await store.current_revision() == before
    got = await store.get(P + "default/a")
    assert got is not None and got["spec"] == {"x": 1}


async def test_create_does_not_mutate_input(store: Store) -> None:
    obj = doc("a")
    await store.create(P + "default/a", obj)
    assert "resourceVersion" not in obj["metadata"]


async def test_update_with_precondition(store: Store) -> None:
    created = await store.create(P + "default/a", doc("a", x=1))
    updated = await store.update(P + "default/a", doc("a", x=2), expected_revision=rv(created))
    assert rv(updated) == rv(created) + 1
    before = await store.current_revision()
    with pytest.raises(RevisionConflict):
        await store.update(P + "default/a", doc("a", x=3), expected_revision=rv(created))
    assert await store.current_revision() == before
    got = await store.get(P + "default/a")
    assert got is not None and got["spec"] == {"x": 2}
    unconditional = await store.update(P + "default/a", doc("a", x=4))
    assert rv(unconditional) == before + 1


async def test_update_and_delete_missing_key(store: Store) -> None:
    before = await store.current_revision()
    with pytest.raises(KeyNotFound):
        await store.update(P + "default/nope", doc("nope"))
    with pytest.raises(KeyNotFound):
        await store.delete(P + "default/nope")
    assert await store.current_revision() == before


async def test_delete_returns_last_state_at_deletion_revision(store: Store) -> None:
    created = await store.create(P + "default/a", doc("a", x=1))
    with pytest.raises(RevisionConflict):
        await store.delete(P + "default/a", expected_revision=rv(created) + 5)
    deleted = await store.delete(P + "default/a", expected_revision=rv(created))
    assert rv(deleted) == rv(created) + 1 == await store.current_revision()
    assert deleted["spec"] == {"x": 1}
    assert await store.get(P + "default/a") is None
    # The key can be created again.
    await store.create(P + "default/a", doc("a", x=9))


async def test_list_prefix_key_order_and_revision(store: Store) -> None:
    for name in ["c", "a", "b"]:
        await store.create(P + f"default/{name}", doc(name))
    await store.create(P + "other/z", doc("z"))
    await store.create("/registry/compute.ironcore.dev/machinepools/_/p", doc("p"))
    result = await store.list(P + "default/")
    assert [d["metadata"]["name"] for d in result.items] == ["a", "b", "c"]
    assert result.revision == await store.current_revision()
    assert not result.more
    assert len((await store.list(P)).items) == 4
    assert len((await store.list("")).items) == 5


async def test_list_pagination_with_predicate(store: Store) -> None:
    for i in range(10):
        await store.create(P + f"default/m{i:02d}", doc(f"m{i:02d}", even=i % 2 == 0))
    even = lambda d: d["spec"]["even"]  # noqa: E731
    first = await store.list(P, limit=3, predicate=even)
    assert [d["metadata"]["name"] for d in first.items] == ["m00", "m02", "m04"]
    assert first.more
    last_key = P + "default/m04"
    second = await store.list(P, limit=3, start_after=last_key, revision=first.revision, predicate=even)
    assert [d["metadata"]["name"] for d in second.items] == ["m06", "m08"]
    assert not second.more
    # Exactly `limit` matches left: no further page.
    exact = await store.list(P, limit=5, predicate=even)
    assert len(exact.items) == 5 and not exact.more


async def test_list_at_older_revision_is_a_consistent_snapshot(store: Store) -> None:
    for name in ["a", "b", "c", "d"]:
        await store.create(P + f"default/{name}", doc(name, v=0))
    page = await store.list(P, limit=2)
    assert [d["metadata"]["name"] for d in page.items] == ["a", "b"] and page.more
    snapshot_rev = page.revision
    # Changes after the first page must not show in the next pages read at its revision.
    await store.update(P + "default/c", doc("c", v=1))
    await store.delete(P + "default/d")
    await store.create(P + "default/e", doc("e", v=0))
    await store.update(P + "default/c", doc("c", v=2))
    rest = await store.list(P, start_after=P + "default/b", revision=snapshot_rev)
    assert [(d["metadata"]["name"], d["spec"]["v"]) for d in rest.items] == [("c", 0), ("d", 0)]
    assert all(rv(d) <= snapshot_rev for d in rest.items)
    now = await store.list(P)
    assert [(d["metadata"]["name"], d["spec"]["v"]) for d in now.items] == [
        ("a", 0),
        ("b", 0),
        ("c", 2),
        ("e", 0),
    ]


async def test_list_and_watch_at_compacted_revision(store: Store) -> None:
    base = await store.current_revision()
    for i in range(5):
        await store.create(P + f"default/m{i}", doc(f"m{i}"))
    await store.compact(base + 4)
    with pytest.raises(RevisionCompacted):
        await store.list(P, revision=base + 2)
    with pytest.raises(RevisionCompacted):
        await anext(aiter(store.watch(P, base + 2)))
    # At the compaction point itself both still work.
    assert len((await store.list(P, revision=base + 4)).items) == 4
    events = await collect(store.watch(P, base + 4), 1)
    assert [e.revision for e in events] == [base + 5]


async def test_watch_replays_from_revision_then_streams_live(store: Store) -> None:
    a = await store.create(P + "default/a", doc("a"))
    await store.update(P + "default/a", doc("a", x=1))
    await store.create("/registry/other/_/x", doc("x"))  # outside the prefix
    it = aiter(store.watch(P, rv(a) - 1))
    replay = await collect(it, 2)
    assert [(e.type, e.revision) for e in replay] == [("ADDED", rv(a)), ("MODIFIED", rv(a) + 1)]
    assert replay[1].object["spec"] == {"x": 1}
    assert all(rv(e.object) == e.revision for e in replay)
    deleted = await store.delete(P + "default/a")
    live = await collect(it, 1)
    assert live[0].type == "DELETED" and live[0].revision == rv(deleted)
    assert rv(live[0].object) == rv(deleted) and live[0].key == P + "default/a"


async def test_nothing_lost_between_list_and_watch(store: Store) -> None:
    await store.create(P + "default/a", doc("a"))
    listed = await store.list(P)
    await store.create(P + "default/b", doc("b"))
    events = await collect(store.watch(P, listed.revision), 1)
    assert events[0].object["metadata"]["name"] == "b"


async def test_watch_replays_history_beyond_the_ring(open_store: StoreFactory) -> None:
    store = await open_store(ring=4)
    base = await store.current_revision()
    for i in range(50):
        await store.create(P + f"default/m{i:02d}", doc(f"m{i:02d}"))
    events = await collect(store.watch(P, base), 50)
    assert [e.revision for e in events] == list(range(base + 1, base + 51))


async def test_slow_watcher_never_blocks_writers(open_store: StoreFactory) -> None:
    store = await open_store(ring=8)
    base = await store.current_revision()
    it = aiter(store.watch(P, base))
    first = asyncio.ensure_future(anext(it))
    await store.create(P + "default/first", doc("first"))
    assert (await asyncio.wait_for(first, 5)).revision == base + 1
    # The watcher does not read while 600 writes go through; none of them waits for it.
    for i in range(600):
        await store.create(P + f"default/m{i:04d}", doc(f"m{i:04d}"))
    events = await collect(it, 600)
    assert [e.revision for e in events] == list(range(base + 2, base + 602))


async def test_many_watchers_see_the_same_order(store: Store) -> None:
    base = await store.current_revision()
    its = [aiter(store.watch(P, base)) for _ in range(5)]
    readers = [asyncio.ensure_future(collect(it, 30)) for it in its]

    async def writer(w: int) -> None:
        for i in range(10):
            await store.create(P + f"default/w{w}-{i}", doc(f"w{w}-{i}"))
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(w) for w in range(3)))
    results = await asyncio.gather(*readers)
    orders = [[e.revision for e in events] for events in results]
    assert all(order == list(range(base + 1, base + 31)) for order in orders)


async def test_concurrent_read_modify_write_loses_no_update(store: Store) -> None:
    key = P + "default/counter"
    await store.create(key, {"metadata": {"name": "counter"}, "n": 0})

    async def increment(times: int) -> None:
        for _ in range(times):
            while True:
                current = await store.get(key)
                assert current is not None
                await asyncio.sleep(0)  # let the others interleave between read and write
                try:
                    await store.update(key, {**current, "n": current["n"] + 1}, expected_revision=rv(current))
                    break
                except RevisionConflict:
                    continue

    await asyncio.gather(*(increment(25) for _ in range(8)))
    final = await store.get(key)
    assert final is not None and final["n"] == 200


async def test_data_and_history_survive_restart(open_store: StoreFactory) -> None:
    store = await open_store()
    a = await store.create(P + "default/a", doc("a", x=1))
    await store.update(P + "default/a", doc("a", x=2))
    await store.create(P + "default/b", doc("b"))
    await store.delete(P + "default/b")
    revision = await store.current_revision()
    await store.close()

    reopened = await open_store()
    assert await reopened.current_revision() == revision
    got = await reopened.get(P + "default/a")
    assert got is not None and got["spec"] == {"x": 2}
    events = await collect(reopened.watch(P, rv(a)), 3)
    assert [e.type for e in events] == ["MODIFIED", "ADDED", "DELETED"]
    created = await reopened.create(P + "default/c", doc("c"))
    assert created["metadata"]["resourceVersion"] == str(revision + 1)


async def test_watch_ends_when_store_closes(open_store: StoreFactory) -> None:
    store = await open_store()
    it = aiter(store.watch(P, await store.current_revision()))
    pending = asyncio.ensure_future(anext(it))
    await asyncio.sleep(0)
    await store.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(pending, 5)


async def test_list_raw_matches_list(store: Store) -> None:
    for name in ["a", "b", "c", "d"]:
        await store.create(P + f"default/{name}", doc(name))
    old = await store.current_revision()
    await store.update(P + "default/b", doc("b", v=1))
    await store.delete(P + "default/c")
    for kwargs in [
        {},
        {"limit": 2},
        {"limit": 4},
        {"revision": old},
        {"revision": old, "limit": 3},
        {"start_after": P + "default/a", "limit": 1},
    ]:
        parsed = await store.list(P, **kwargs)  # type: ignore[arg-type]
        raw = await store.list_raw(P, **kwargs)  # type: ignore[arg-type]
        assert [orjson.loads(r) for r in raw.items] == parsed.items, kwargs
        assert (raw.revision, raw.more) == (parsed.revision, parsed.more), kwargs


# -- guards -----------------------------------------------------------------------------------------

U = "capacity/machinepools/p1"


async def test_guards_commit_with_the_object(store: Store) -> None:
    assert await store.read_guards([U, "other"]) == [GuardValue(U, None, 0), GuardValue("other", None, 0)]
    a = await store.create(P + "default/a", doc("a"), guards=[Guard(U, 0, {"charges": {"a": 2}})])
    [usage] = await store.read_guards([U])
    assert usage == GuardValue(U, {"charges": {"a": 2}}, rv(a))
    b = await store.update(P + "default/a", doc("a", x=1), expected_revision=rv(a),
                           guards=[Guard(U, usage.revision, {"charges": {"a": 3}})])
    assert (await store.read_guards([U]))[0] == GuardValue(U, {"charges": {"a": 3}}, rv(b))
    gone = await store.delete(P + "default/a", guards=[Guard(U, rv(b), None)])
    assert (await store.read_guards([U]))[0] == GuardValue(U, None, 0)
    assert rv(gone) == await store.current_revision()


async def test_a_moved_guard_refuses_the_whole_write(store: Store) -> None:
    first = await store.create(P + "default/a", doc("a"), guards=[Guard(U, 0, {"n": 1})])
    before = await store.current_revision()
    # Stale guard revisions: nothing is written, and the error tells what the guard holds now.
    with pytest.raises(GuardConflict) as info:
        await store.create(P + "default/b", doc("b"),
                           guards=[Guard("free", 0, {"x": 1}), Guard(U, 0, {"n": 2})])
    assert info.value.current == [GuardValue(U, {"n": 1}, rv(first))]
    with pytest.raises(GuardConflict):
        await store.update(P + "default/a", doc("a", x=1), guards=[Guard(U, rv(first) - 1, {"n": 3})])
    with pytest.raises(GuardConflict):
        await store.delete(P + "default/a", guards=[Guard(U, rv(first), None, check_only=True),
                                                    Guard("free", 7, None)])
    assert await store.current_revision() == before
    assert await store.get(P + "default/b") is None
    assert (await store.get(P + "default/a") or {})["spec"] == {}
    assert await store.read_guards([U, "free"]) == [GuardValue(U, {"n": 1}, rv(first)),
                                                    GuardValue("free", None, 0)]
    # The object's own precondition is judged first.
    with pytest.raises(RevisionConflict):
        await store.update(P + "default/a", doc("a"), expected_revision=rv(first) + 9,
                           guards=[Guard(U, 0, {})])
    with pytest.raises(KeyExists):
        await store.create(P + "default/a", doc("a"), guards=[Guard(U, 0, {})])
    # A check-only guard compares and leaves the key as it is.
    updated = await store.update(P + "default/a", doc("a", x=2),
                                 guards=[Guard(U, rv(first), None, check_only=True)])
    assert (await store.read_guards([U]))[0] == GuardValue(U, {"n": 1}, rv(first))
    assert rv(updated) == before + 1


async def test_guards_are_neither_listed_nor_watched(store: Store) -> None:
    base = await store.current_revision()
    await store.create(P + "default/a", doc("a"),
                       guards=[Guard("/registry/x", 0, {"n": 1}), Guard(U, 0, {"n": 1})])
    assert [d["metadata"]["name"] for d in (await store.list("")).items] == ["a"]
    assert len((await store.list_raw("")).items) == 1
    await store.create(P + "default/b", doc("b"))
    events = await collect(store.watch("", base), 2)
    assert [e.key for e in events] == [P + "default/a", P + "default/b"]


async def test_concurrent_guarded_writers_never_overcommit(store: Store) -> None:
    """The pattern capacity admission uses: read the usage, decide, write object and usage together."""
    room = 5

    async def bind(i: int) -> bool:
        while True:
            [usage] = await store.read_guards([U])
            charges = dict((usage.value or {}).get("charges") or {})
            if len(charges) >= room:
                return False
            charges[str(i)] = 1
            await asyncio.sleep(0)
            try:
                await store.create(P + f"default/m{i}", doc(f"m{i}"),
                                   guards=[Guard(U, usage.revision, {"charges": charges})])
                return True
            except GuardConflict:
                continue

    results = await asyncio.gather(*(bind(i) for i in range(20)))
    assert results.count(True) == room
    [usage] = await store.read_guards([U])
    assert usage.value is not None and len(usage.value["charges"]) == room
    assert len((await store.list(P)).items) == room


async def test_get_recent_may_lag_but_a_write_from_it_never_commits_over_a_newer_one(
        open_store: StoreFactory) -> None:
    first = await open_store()
    # Two apiservers on one store where the backend allows it (one SQLite file has one writer).
    second = await open_store() if first.recent_may_be_stale else first
    created = await first.create(P + "default/a", doc("a", x=1))
    assert await first.get_recent(P + "default/a") == created
    assert await first.get_recent(P + "default/missing") is None
    moved = await second.update(P + "default/a", doc("a", x=2), expected_revision=rv(created))
    seen = await first.get_recent(P + "default/a")
    assert seen in (created, moved)  # stale at most, never a value the store did not hold
    if seen == created:
        with pytest.raises(RevisionConflict):
            await first.update(P + "default/a", doc("a", x=3), expected_revision=rv(seen))
        assert await first.get_recent(P + "default/a") == moved  # after a conflict it reads afresh
    assert (await first.get(P + "default/a"))["spec"] == {"x": 2}


async def test_a_watcher_of_a_quiet_prefix_keeps_up_while_others_write_past_the_ring(
        open_store: StoreFactory) -> None:
    store = await open_store(ring=4)
    start = await store.current_revision()
    quiet = aiter(store.watch(P + "quiet/", start))
    waiting = asyncio.ensure_future(anext(quiet))
    for i in range(30):  # many times the ring, none of them the quiet watcher's
        await store.create(P + f"busy/b{i}", doc(f"b{i}"))
    assert not waiting.done()
    created = await store.create(P + "quiet/q", doc("q"))
    got = await asyncio.wait_for(waiting, 5)
    assert (got.key, got.revision) == (P + "quiet/q", rv(created))
