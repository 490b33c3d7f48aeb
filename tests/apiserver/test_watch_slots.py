"""The per-user watch slots (the limit, and a slot given back however a stream ends: finished,
failed, closed, or dropped before it ever started) and the per-user seats of costly work."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator

import pytest
from ironpool.api import errors
from ironpool.apiserver.serving.watch_slots import HeldStream, WatchSlots


async def events(n: int, fail: bool = False) -> AsyncIterator[int]:
    for i in range(n):
        yield i
    if fail:
        raise RuntimeError("store went away")


async def test_limit_per_user_and_every_way_a_slot_comes_back() -> None:
    slots = WatchSlots(per_user=2)
    finished = HeldStream(events(2), slots.take("mallory"))
    failing = HeldStream(events(1, fail=True), slots.take("mallory"))
    with pytest.raises(errors.TooManyRequests, match="too many watches open for user 'mallory' "
                                                     r"\(limit 2\)") as refused:
        slots.take("mallory")
    assert refused.value.retry_after_seconds == 1 and slots.rejected == 1
    assert slots.take("alice")  # another user is not affected
    assert [e async for e in finished] == [0, 1]
    assert slots.current("mallory") == 1
    with pytest.raises(RuntimeError):
        async for _ in failing:
            pass
    assert slots.current("mallory") == 0
    closed = HeldStream(events(5), slots.take("mallory"))
    assert await anext(closed) == 0
    await closed.aclose()
    await closed.aclose()  # given back once only
    assert slots.current("mallory") == 0
    # A stream whose client left before it started is never iterated nor closed: dropping it is enough.
    HeldStream(events(5), slots.take("mallory"))
    gc.collect()
    assert slots.current("mallory") == 0
    with pytest.raises(ValueError, match="must be positive"):
        WatchSlots(0)


async def test_seats_take_turns_per_user_and_queue_within_a_bound() -> None:
    import asyncio

    from ironpool.apiserver.serving.seats import Seats

    seats = Seats(per_user=2, queue=2)
    order: list[str] = []
    release = asyncio.Event()

    async def work(name: str, user: str = "mallory", bounded: bool = True) -> None:
        async with seats.hold(user, bounded):
            order.append(name)
            await release.wait()

    running = [asyncio.ensure_future(work(n)) for n in ("a", "b", "c", "d")]
    await asyncio.sleep(0)
    assert order == ["a", "b"] and seats.held("mallory") == 2 and seats.waiting("mallory") == 2
    with pytest.raises(errors.TooManyRequests, match="waiting \\(limit 2\\)"):
        async with seats.hold("mallory"):
            pass
    unbounded = asyncio.ensure_future(work("e", bounded=False))  # a starting watch waits regardless
    async with seats.hold("alice"):  # another user's seats are its own
        assert seats.held("alice") == 1
    running[2].cancel()  # one waiting gives up: the seat goes to the next in line
    release.set()
    await asyncio.gather(*running, unbounded, return_exceptions=True)
    assert order == ["a", "b", "d", "e"]
    assert seats.held("mallory") == 0 and seats._users == {}

