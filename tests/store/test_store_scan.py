"""``Store.scan_raw``, on every backend: a list read a page at a time, all pages at one revision."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from ironpool.store.etcd import EtcdStore
from ironpool.store.interface import RevisionCompacted, ScanPage, Store
from ironpool.store.sqlite import SQLiteStore

P = "/registry/compute.ironcore.dev/machines/"
_TESTS = itertools.count()


@pytest.fixture(params=["sqlite", "etcd"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s: Store
    if request.param == "sqlite":
        s = SQLiteStore(str(tmp_path / "store.db"))
    else:
        cluster = request.getfixturevalue("etcd_cluster")
        s = EtcdStore(cluster.endpoints + f"/scan{next(_TESTS)}", compaction_interval=0)
    yield s
    await s.close()


def doc(name: str, v: int, pad: int = 0) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"v": v, "pad": "x" * pad}}


def state(pages: list[ScanPage]) -> list[tuple[str, int]]:
    docs = [orjson.loads(i) for p in pages for i in p.items]
    return [(d["metadata"]["name"], d["spec"]["v"]) for d in docs]


async def test_pages_are_bounded_and_read_at_the_first_pages_revision(store: Store) -> None:
    names = [f"m{i:03d}" for i in range(60)]
    for name in names:
        await store.create(P + f"default/{name}", doc(name, 0, pad=1000))
    scan = store.scan_raw(P, page_bytes=10_000)
    pages = [await anext(scan)]
    revision = pages[0].revision
    # Writes after the first page: none of them shows in the following pages.
    await store.update(P + "default/m050", doc("m050", 1))
    await store.delete(P + "default/m055")
    await store.create(P + "default/m0555", doc("m0555", 0))
    await store.delete(P + "default/m001")  # already written: stays as it was
    pages += [page async for page in scan]
    assert state(pages) == [(name, 0) for name in names]
    assert {p.revision for p in pages} == {revision}
    assert all(p.more for p in pages[:-1]) and not pages[-1].more
    # A page ends at the first document past page_bytes (the sizes here are about 1.1 KB).
    assert max(sum(len(i) for i in p.items) for p in pages) < 10_000 + 1200
    assert len(pages) >= 6
    assert [k for p in pages for k in p.keys] == [P + f"default/{n}" for n in names]


async def test_keys_only_until_and_start_after(store: Store) -> None:
    for i in range(30):
        await store.create(P + f"default/m{i:02d}", doc(f"m{i:02d}", 0))
    pages = [p async for p in store.scan_raw(P, keys_only=True, start_after=P + "default/m04",
                                             until=P + "default/m20")]
    assert [k for p in pages for k in p.keys] == [P + f"default/m{i:02d}" for i in range(5, 21)]
    assert all(not p.items for p in pages)
    revision = pages[0].revision
    await store.update(P + "default/m07", doc("m07", 5))
    again = [p async for p in store.scan_raw(P, revision=revision, until=P + "default/m09")]
    assert state(again) == [(f"m{i:02d}", 0) for i in range(10)]


async def test_a_compacted_revision_fails_before_the_first_page(store: Store) -> None:
    base = await store.current_revision()
    for i in range(4):
        await store.create(P + f"default/m{i}", doc(f"m{i}", 0))
    await store.compact(base + 3)
    with pytest.raises(RevisionCompacted):
        await anext(store.scan_raw(P, revision=base + 1))
