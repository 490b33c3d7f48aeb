"""A per-user limit on API requests being handled at once (Kubernetes' max-requests-inflight, kept
per user as its priority-and-fairness keeps flows apart), so one busy or hostile client cannot take
every worker: past the limit its requests get 429 with ``Retry-After`` while other users, and
``/healthz`` and ``/readyz`` (never counted), are served. Watches are long-running and not counted
once their stream started, as in Kubernetes (they have a limit of their own, :mod:`.watch_slots`).

A memory ceiling sheds load the same way: while the process's resident memory is above it, API
requests get 429 with ``Retry-After`` (``/healthz``, ``/readyz`` and watches already streaming go on),
so a burst of large writes or lists is refused before the kernel or an allocator failure ends the
process. The ceiling is ``--memory-limit``, else 80 % of the cgroup's ``memory.max`` when one is set;
without either there is none. Memory Python has freed is not always given back to the system, so
above the ceiling the process collects garbage and trims the C heap (glibc's ``malloc_trim``) once a
second at most, before it refuses: a spike that has passed does not leave the server refusing.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from pathlib import Path

from ironpool.api import errors
from ironpool.memory import malloc_trim, resident_bytes

DEFAULT_PER_USER = 400  # Kubernetes' default --max-requests-inflight, here for each user
CGROUP_SHARE = 0.8  # of the cgroup's memory.max, the ceiling when none is given
_RSS_CACHE_SECONDS = 0.05  # resident memory is read at most this often (a read costs ~10 µs)
_TRIM_EVERY_SECONDS = 1.0


def cgroup_memory_max(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The ``memory.max`` of this process's cgroup (v2), or None when unlimited or unknown."""
    try:
        relative = Path("/proc/self/cgroup").read_text().strip().rpartition(":")[2]
        value = (root / relative.lstrip("/") / "memory.max").read_text().strip()
    except OSError:
        return None
    return int(value) if value.isdigit() else None


def default_memory_limit() -> int | None:
    """The ceiling when none is configured: :data:`CGROUP_SHARE` of the cgroup's limit, if any."""
    ceiling = cgroup_memory_max()
    return None if ceiling is None else int(ceiling * CGROUP_SHARE)


class MemoryCeiling:
    """Raises TooManyRequests while resident memory is above ``limit`` bytes (None: never)."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit <= 0:
            raise ValueError(f"the memory limit must be positive, got {limit}")
        self.limit = limit
        self.rejected = 0
        self._rss = 0
        self._read_at = -1.0
        self._trimmed_at = -_TRIM_EVERY_SECONDS

    def resident(self) -> int:
        now = time.monotonic()
        if now - self._read_at >= _RSS_CACHE_SECONDS:
            self._rss, self._read_at = resident_bytes(), now
        return self._rss

    def check(self) -> None:
        if self.limit is None or self.resident() <= self.limit:
            return
        now = time.monotonic()
        if now - self._trimmed_at >= _TRIM_EVERY_SECONDS:
            self._trimmed_at = now
            gc.collect()
            malloc_trim()
            self._read_at = -1.0
        if self.resident() > self.limit:
            self.rejected += 1
            raise errors.TooManyRequests(
                f"the apiserver is using {self._rss >> 20} MiB, above its memory limit of "
                f"{self.limit >> 20} MiB; please try again later",
                retry_after_seconds=1,
            )


class InFlight:
    """Counts requests per user; :meth:`hold` raises TooManyRequests past ``per_user``, or while
    the process is above its memory ceiling (``memory_limit`` bytes; None: see the module doc)."""

    def __init__(self, per_user: int = DEFAULT_PER_USER, memory_limit: int | None = None) -> None:
        if per_user <= 0:
            raise ValueError(f"the in-flight limit per user must be positive, got {per_user}")
        self.per_user = per_user
        self.memory = MemoryCeiling(memory_limit if memory_limit is not None else default_memory_limit())
        self._counts: dict[str, int] = {}
        self.rejected = 0

    def current(self, user: str) -> int:
        return self._counts.get(user, 0)

    @contextlib.contextmanager
    def hold(self, user: str) -> Iterator[None]:
        self.memory.check()
        count = self._counts.get(user, 0)
        if count >= self.per_user:
            self.rejected += 1
            raise errors.TooManyRequests(
                f"too many requests in flight for user {user!r} (limit {self.per_user}); "
                "please try again later",
                retry_after_seconds=1,
            )
        self._counts[user] = count + 1
        try:
            yield
        finally:
            left = self._counts[user] - 1
            if left:
                self._counts[user] = left
            else:
                del self._counts[user]
