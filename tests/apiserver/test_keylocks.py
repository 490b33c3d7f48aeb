"""KeyLocks: writers of one key queue in order, and a key's lock is dropped once nobody holds or
waits for it (also when a waiter is cancelled)."""

from __future__ import annotations

import asyncio

import pytest
from ironpool.apiserver.registry.keylocks import KeyLocks


async def test_writers_of_one_key_queue_and_the_lock_is_dropped_after() -> None:
    locks = KeyLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with locks.hold("k"):
            first_in.set()
            await release.wait()
            order.append("first")

    async def second() -> None:
        async with locks.hold("k"):
            order.append("second")

    a = asyncio.create_task(first())
    await first_in.wait()
    b = asyncio.create_task(second())
    async with locks.hold("other"):  # another key is not held up by "k"
        assert len(locks) == 2
    await asyncio.sleep(0)
    assert order == []  # the second waits for the first
    release.set()
    await asyncio.gather(a, b)
    assert order == ["first", "second"]
    assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_no_lock_behind() -> None:
    locks = KeyLocks()
    held = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("k"):
            held.set()
            await release.wait()

    async def waiter() -> None:
        async with locks.hold("k"):
            raise AssertionError("a cancelled waiter never holds the lock")

    h = asyncio.create_task(holder())
    await held.wait()
    w = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    w.cancel()
    with pytest.raises(asyncio.CancelledError):
        await w
    release.set()
    await h
    assert len(locks) == 0


async def test_an_error_in_the_block_releases_the_lock() -> None:
    locks = KeyLocks()
    with pytest.raises(ValueError):
        async with locks.hold("k"):
            raise ValueError("boom")
    assert len(locks) == 0
    async with locks.hold("k"):  # free again
        assert len(locks) == 1
