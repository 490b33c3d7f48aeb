"""What only the SQLite backend has: URL options, WAL settings, automatic history compaction."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ironpool.store.interface import RevisionCompacted, StoreError, open_store
from ironpool.store.sqlite import SQLiteStore

from tests.helpers.wait import eventually

P = "/registry/compute.ironcore.dev/machineclasses/_/"


async def test_url_options(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/a.db?history=50&ring=8")
    assert isinstance(store, SQLiteStore) and store.history == 50 and store.ring_size == 8
    await store.close()
    with pytest.raises(ValueError, match=r"unknown sqlite option\(s\) \['histroy'\]"):
        open_store(f"sqlite:///{tmp_path}/a.db?histroy=5")
    with pytest.raises(ValueError, match="--store"):
        open_store("mysql://x")


async def test_wal_and_synchronous_normal(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"))
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    await store.close()


async def test_history_is_compacted_to_a_window_and_stays_so(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "a.db"), history=10)
    for i in range(1005):
        await store.create(P + f"c{i:04d}", {"metadata": {"name": f"c{i:04d}"}})
    # Compaction runs every 1000 writes and keeps the last `history` revisions.
    assert store.compacted_revision == 990
    (kept,) = store._db.execute("SELECT COUNT(*) FROM events").fetchone()
    assert kept == 15
    with pytest.raises(RevisionCompacted):
        await anext(aiter(store.watch(P, 500)))
    page = await store.list(P, revision=995, limit=3)
    assert len(page.items) == 3 and page.revision == 995
    await store.close()

    reopened = SQLiteStore(str(tmp_path / "a.db"), history=10)
    assert reopened.compacted_revision == 990 and await reopened.current_revision() == 1005
    with pytest.raises(RevisionCompacted):
        await reopened.list(P, revision=989)
    await reopened.close()


async def test_one_process_per_file(tmp_path: Path) -> None:
    first = SQLiteStore(str(tmp_path / "a.db"))
    with pytest.raises(StoreError, match="in use by another process"):
        SQLiteStore(str(tmp_path / "a.db"))
    await first.close()
    second = SQLiteStore(str(tmp_path / "a.db"))  # released on close
    await second.close()


def test_bad_option_values_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="history='ten' must be a positive integer"):
        SQLiteStore(f"{tmp_path}/a.db?history=ten")
    with pytest.raises(ValueError, match="ring='0' must be a positive integer"):
        SQLiteStore(f"{tmp_path}/a.db?ring=0")


async def test_concurrent_writes_share_one_commit_and_fail_alone(tmp_path: Path) -> None:
    import asyncio

    from ironpool.store.interface import KeyExists

    store = SQLiteStore(str(tmp_path / "a.db"))
    await store.create(P + "taken", {"metadata": {"name": "taken"}})
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    base = await store.current_revision()
    results = await asyncio.gather(
        *(store.create(P + f"c{i}", {"metadata": {"name": f"c{i}"}}) for i in range(5)),
        store.create(P + "taken", {"metadata": {"name": "taken"}}),
        store.create(P + "c9", {"metadata": {"name": "c9"}}),
        return_exceptions=True,
    )
    assert statements.count("COMMIT") == 1  # seven writes, one transaction
    assert isinstance(results[5], KeyExists)
    # The failed write took no revision; the others got contiguous ones in the order they came.
    assert [int(r["metadata"]["resourceVersion"]) for r in results if isinstance(r, dict)] == list(
        range(base + 1, base + 7))
    assert await store.current_revision() == base + 6
    assert len((await store.list(P)).items) == 7
    await store.close()


async def test_a_burst_of_large_writes_leaves_no_large_wal(tmp_path: Path) -> None:
    """100 writes of 1 MiB at once were one transaction, and the WAL grew to hold it (and stayed so);
    now a transaction takes about MAX_COMMIT_BYTES, and once writes pause the WAL is truncated."""
    from ironpool.store import sqlite_wal
    from ironpool.store.sqlite import MAX_COMMIT_BYTES

    store = SQLiteStore(str(tmp_path / "a.db"))
    wal = tmp_path / "a.db-wal"
    doc = {"metadata": {"name": "x"}, "data": {"blob": "x" * (1024 * 1024)}}
    await asyncio.gather(*(store.create(P + f"big{i:03d}", doc) for i in range(100)))
    # Every write committed, in several transactions: the WAL holds about one of them, not all.
    assert store.revision == 100
    assert wal.stat().st_size < 3 * MAX_COMMIT_BYTES + sqlite_wal.SETTLE_AFTER_BYTES, wal.stat().st_size
    await eventually(lambda: store._wal.settled == 1, 10, "the store settling after the burst")
    assert wal.stat().st_size == 0
    # Small steady writes do not settle again.
    for i in range(10):
        await store.update(P + f"big{i:03d}", {"metadata": {"name": "x"}})
    assert store._wal.settled == 1
    await store.close()
