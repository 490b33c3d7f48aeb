"""PrefixWaiters: a write wakes only the watchers of its prefix; the others move past it asleep."""

from __future__ import annotations

import asyncio

import pytest
from ironpool.store.interface import StoreEvent
from ironpool.store.waiters import PrefixWaiters


def event(key: str, revision: int) -> StoreEvent:
    return StoreEvent("ADDED", key, {"metadata": {}}, revision)


async def test_only_the_watchers_of_a_prefix_wake_and_the_others_move_on() -> None:
    waiters = PrefixWaiters()
    machines = asyncio.ensure_future(waiters.wait("/m/", 10))
    pools = asyncio.ensure_future(waiters.wait("/p/", 10))
    await asyncio.sleep(0)  # both wait now
    waiters.publish([event("/m/a", 11), event("/m/b", 12)])
    assert await asyncio.wait_for(machines, 1) == 10  # woken: reads 11 and 12 itself
    await asyncio.sleep(0)
    assert not pools.done()
    waiters.publish([event("/m/c", 13), event("/p/x", 14)])
    assert await asyncio.wait_for(pools, 1) == 12  # moved past 11-12 asleep, reads on from 13


async def test_a_cancelled_watcher_stops_waiting_and_wake_all_releases_the_rest() -> None:
    waiters = PrefixWaiters()
    gone = asyncio.ensure_future(waiters.wait("/a/", 1))
    kept = asyncio.ensure_future(waiters.wait("/b/", 1))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert len(waiters) == 1
    waiters.wake_all()
    assert await asyncio.wait_for(kept, 1) == 1
    waiters.publish([event("/a/x", 2)])  # nobody waits: nothing to do


async def test_watchers_of_a_shared_prefix_of_every_key_and_of_a_partial_name_all_wake() -> None:
    waiters = PrefixWaiters()
    kinds = [asyncio.ensure_future(waiters.wait("/m/", 5)) for _ in range(2)]  # an HTTP watch, a mirror
    everything = asyncio.ensure_future(waiters.wait("", 5))
    partial = asyncio.ensure_future(waiters.wait("/m/ab", 5))  # not at a "/": a name's beginning
    other = asyncio.ensure_future(waiters.wait("/m/x/", 5))
    await asyncio.sleep(0)
    waiters.publish([event("/p/a", 6)])
    assert await asyncio.wait_for(everything, 1) == 5
    waiters.publish([event("/m/abc", 7)])
    assert [await asyncio.wait_for(k, 1) for k in kinds] == [6, 6]  # 6 was not theirs
    assert await asyncio.wait_for(partial, 1) == 6
    await asyncio.sleep(0)
    assert not other.done() and len(waiters) == 1
    waiters.wake_all()
    assert await asyncio.wait_for(other, 1) == 7  # everything published so far was not its own
