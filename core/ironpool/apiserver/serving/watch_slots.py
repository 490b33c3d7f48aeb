"""A per-user limit on watch streams open at once, so one user cannot hold the connections, memory
and event fan-out of everyone else: past :attr:`WatchSlots.per_user` a new watch gets 429 with
``Retry-After`` while the user's open watches go on (Kubernetes counts a watch only while it starts;
a long-running stream holds what a request does not, so here each is counted for its whole life).

A slot is taken before the stream's headers go out and given back when the stream ends, is closed,
or is dropped unread (a client gone before its stream started): :class:`HeldStream` holds it.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

from ironpool.api import errors

DEFAULT_WATCHES_PER_USER = 1000


class WatchSlots:
    """Counts the watch streams of each user."""

    def __init__(self, per_user: int = DEFAULT_WATCHES_PER_USER) -> None:
        if per_user <= 0:
            raise ValueError(f"the watch limit per user must be positive, got {per_user}")
        self.per_user = per_user
        self._counts: dict[str, int] = {}
        self.rejected = 0

    def current(self, user: str) -> int:
        return self._counts.get(user, 0)

    def take(self, user: str) -> Callable[[], None]:
        """One of ``user``'s slots, or TooManyRequests; the function that gives it back (once)."""
        count = self._counts.get(user, 0)
        if count >= self.per_user:
            self.rejected += 1
            raise errors.TooManyRequests(
                f"too many watches open for user {user!r} (limit {self.per_user}); close some or "
                "try again later", retry_after_seconds=1)
        self._counts[user] = count + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if given_back:
                return
            given_back = True
            left = self._counts[user] - 1
            if left:
                self._counts[user] = left
            else:
                del self._counts[user]

        return give_back


class HeldStream:
    """An async iterator over ``stream`` that gives ``release`` back when the stream ends or fails,
    when it is closed, or when it is garbage (never started: its generator's ``finally`` never ran)."""

    def __init__(self, stream: AsyncIterator[Any], release: Callable[[], None]) -> None:
        self._stream = stream
        self._release = weakref.finalize(self, release)  # runs once, whichever comes first

    def __aiter__(self) -> HeldStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await anext(self._stream)
        except BaseException:
            self._release()
            raise

    async def aclose(self) -> None:
        self._release()
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()
