"""An asyncio rate-limited work queue with client-go's semantics.

* a key is queued at most once (``add`` of a queued key is a no-op);
* a key is never handed to two workers at once: a key added while it is being processed is marked
  dirty and queued again, once, when the worker calls ``done``;
* ``add_after`` delays a key (the earliest pending time wins); ``add_rate_limited`` delays it by the
  rate limiter (per-key exponential backoff, optionally combined with a global token bucket);
  ``forget`` resets a key's backoff after a success.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)
Clock = Callable[[], float]


class QueueShutDown(Exception):
    """``get`` on a queue that was shut down and has nothing left to hand out."""


class RateLimiter(Protocol[K_contra]):
    """How long a key must wait before it is retried."""

    def when(self, key: K_contra) -> float: ...
    def forget(self, key: K_contra) -> None: ...
    def num_requeues(self, key: K_contra) -> int: ...


class ExponentialBackoff(Generic[K]):
    """Per-key backoff: ``base * 2**failures``, capped at ``cap`` seconds."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base <= 0 or cap < base:
            raise ValueError(f"need 0 < base <= cap, got base={base} cap={cap}")
        self.base, self.cap = base, cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if failures >= 64:  # 2**64 * base overflows any sane cap; avoid the float blow-up
            return self.cap
        return min(self.base * (2**failures), self.cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class TokenBucket(Generic[K]):
    """A global limit of ``qps`` retries per second with bursts of ``burst`` (not per key)."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps, self.burst, self._clock = qps, burst, clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, key: K) -> float:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        # Reserve a token even if it is not there yet: the debt is the wait.
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: K) -> None:
        pass

    def num_requeues(self, key: K) -> int:
        return 0


class MaxOf(Generic[K]):
    """The longest wait of several limiters (client-go's default combines backoff and a bucket)."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one limiter")
        self.limiters = limiters

    def when(self, key: K) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: K) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_rate_limiter(base: float = 0.005, cap: float = 1000.0, qps: float = 10.0,
                         burst: int = 100) -> MaxOf[Hashable]:
    """client-go's default: 5 ms doubling to 1000 s per key, and 10 qps / 100 burst overall."""
    return MaxOf(ExponentialBackoff(base, cap), TokenBucket(qps, burst))


class WorkQueue(Generic[K]):
    """The queue controllers' workers ``get`` keys from and mark ``done``.

    ``add_after`` needs a running event loop; everything else is synchronous except ``get``.
    """

    def __init__(self, rate_limiter: RateLimiter[K] | None = None, name: str = "") -> None:
        self.name = name
        self.rate_limiter: RateLimiter[K] = rate_limiter or ExponentialBackoff()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def _notify(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def add(self, key: K) -> None:
        """Queue ``key`` unless it is already queued; if it is in flight, requeue it after ``done``."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._notify()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` in ``delay`` seconds; an earlier pending time for the same key wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        handle = loop.call_at(ready_at, self._fire, key)
        self._waiting[key] = (ready_at, handle)

    def _fire(self, key: K) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> None:
        """Queue ``key`` after its rate-limited backoff (a failure to process it)."""
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (it was processed successfully)."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.num_requeues(key)

    async def get(self) -> K:
        """The next key, waiting for one; raises QueueShutDown once shut down."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(self.name or "work queue")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # Pass a wake-up we consumed on to the next getter so no key is stranded.
                if waiter.done() and not waiter.cancelled():
                    self._notify()
                raise
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        if self._queue:
            self._notify()
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was added meanwhile, queue it again now."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._notify()

    def shutdown(self) -> None:
        """Stop accepting keys, drop queued and delayed ones, and wake every waiting ``get``."""
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        self._queue.clear()
        self._dirty.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def __aiter__(self) -> AsyncIterator[K]:
        """Yield keys until shutdown; the consumer must still call ``done``."""
        while True:
            try:
                yield await self.get()
            except QueueShutDown:
                return
