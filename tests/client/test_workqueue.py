"""WorkQueue semantics (client-go's): dedup, one worker per key, dirty requeue, delays, rate limits."""

from __future__ import annotations

import asyncio

import pytest
from ironpool.client.workqueue import (
    ExponentialBackoff,
    MaxOf,
    QueueShutDown,
    TokenBucket,
    WorkQueue,
    default_rate_limiter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_add_deduplicates_queued_keys() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


async def test_key_added_while_processing_is_requeued_once_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    # In flight: not handed out again, not even queued yet.
    assert len(q) == 0
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_a_key_is_never_processed_by_two_workers_at_once() -> None:
    q: WorkQueue[int] = WorkQueue()
    in_flight: set[int] = set()
    overlaps = 0
    processed = 0

    async def worker() -> None:
        nonlocal overlaps, processed
        async for key in q:
            if key in in_flight:
                overlaps += 1
            in_flight.add(key)
            await asyncio.sleep(0)  # let other workers run while this key is held
            q.add(key % 3)  # re-adding keys that are in flight must not hand them out twice
            in_flight.discard(key)
            processed += 1
            q.done(key)
            if processed >= 200:
                q.shutdown()

    for i in range(10):
        q.add(i)
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(4))), timeout=10)
    assert overlaps == 0
    assert processed >= 200


async def test_get_waits_for_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("x")
    assert await asyncio.wait_for(getter, timeout=2) == "x"


async def test_shutdown_wakes_waiting_getters_and_ignores_adds() -> None:
    q: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.shutdown()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), timeout=2)
    assert all(isinstance(r, QueueShutDown) for r in results)
    q.add("late")
    assert len(q) == 0
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_cancelled_getter_does_not_strand_a_key() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("k")
    first.cancel()  # cancelled after it was woken: the wake-up must pass to the second getter
    assert await asyncio.wait_for(second, timeout=2) == "k"


async def test_add_after_delays_and_keeps_the_earliest_time() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("k", 5.0)
    q.add_after("k", 0.05)  # earlier wins
    q.add_after("k", 10.0)  # later is ignored
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), timeout=2) == "k"
    elapsed = loop.time() - start
    assert 0.04 <= elapsed < 2
    q.done("k")
    q.shutdown()


def test_exponential_backoff_doubles_to_cap_and_forget_resets() -> None:
    rl: ExponentialBackoff[str] = ExponentialBackoff(base=0.005, cap=1.0)
    delays = [rl.when("a") for _ in range(10)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1.0
    assert rl.num_requeues("a") == 10
    assert rl.when("b") == 0.005  # per key
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == 0.005
    for _ in range(200):
        rl.when("c")
    assert rl.when("c") == 1.0  # no float overflow after many failures


def test_exponential_backoff_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="base"):
        ExponentialBackoff(base=0, cap=1)
    with pytest.raises(ValueError, match="cap"):
        ExponentialBackoff(base=2, cap=1)


def test_token_bucket_with_fake_clock() -> None:
    clock = FakeClock()
    bucket: TokenBucket[str] = TokenBucket(qps=10, burst=2, clock=clock)
    assert bucket.when("a") == 0.0
    assert bucket.when("b") == 0.0
    assert bucket.when("c") == pytest.approx(0.1)  # burst used up: one token per 100 ms
    assert bucket.when("d") == pytest.approx(0.2)
    clock.now += 1.0  # refills, capped at burst
    assert bucket.when("e") == 0.0
    assert bucket.when("f") == 0.0
    assert bucket.when("g") == pytest.approx(0.1)


def test_max_of_takes_the_longest_wait() -> None:
    clock = FakeClock()
    rl: MaxOf[str] = MaxOf(ExponentialBackoff(0.005, 100.0), TokenBucket(qps=1, burst=1, clock=clock))
    assert rl.when("a") == 0.005
    assert rl.when("b") == pytest.approx(1.0)  # bucket empty
    assert rl.num_requeues("a") == 1
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert default_rate_limiter().when("x") == pytest.approx(0.005)


async def test_add_rate_limited_uses_backoff_and_forget() -> None:
    q: WorkQueue[str] = WorkQueue(ExponentialBackoff(base=0.01, cap=0.04))
    loop = asyncio.get_running_loop()
    waits = []
    for _ in range(4):
        start = loop.time()
        q.add_rate_limited("k")
        key = await asyncio.wait_for(q.get(), timeout=2)
        waits.append(loop.time() - start)
        q.done(key)
    assert q.num_requeues("k") == 4
    assert waits[0] >= 0.009 and waits[2] >= 0.039 and waits[3] >= 0.039
    q.forget("k")
    assert q.num_requeues("k") == 0
    q.shutdown()
