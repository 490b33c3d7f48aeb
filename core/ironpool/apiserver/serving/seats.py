"""Seats: each user's share of the work that takes the event loop in turns, as Kubernetes' priority
and fairness gives each flow its seats.

Most requests run start to end in one go (a get, a create up to its group commit). Two kinds take
many turns of the event loop, some objects at a time: a filtered list (every object matched) and a
watch's initial events (every object of its collection sent). Each such request holds one of its
user's :data:`SEATS_PER_USER` seats while it works; more wait their turn (a list at most
:data:`QUEUE_PER_USER` deep, then 429 with ``Retry-After``; a watch, already counted by its slot,
waits without bound). So one user's many costly requests take turns among themselves, and a request
of anyone else (``/healthz``, an administrator, a pool's heartbeat) waits behind at most a few turns'
work, whatever that user sends. A watch's seat is given back once its initial events are sent, as
Kubernetes counts a watch in flight until then.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

from ironpool.api import errors

SEATS_PER_USER = 2
QUEUE_PER_USER = 128


class _UserSeats:
    __slots__ = ("held", "waiters")

    def __init__(self) -> None:
        self.held = 0
        self.waiters: deque[asyncio.Future[None]] = deque()


class Seats:
    """The seats of every user (a user's entry exists while it holds or waits for one)."""

    def __init__(self, per_user: int = SEATS_PER_USER, queue: int = QUEUE_PER_USER) -> None:
        if per_user <= 0 or queue < 0:
            raise ValueError(f"seats per user must be positive and the queue not negative, got "
                             f"{per_user} and {queue}")
        self.per_user = per_user
        self.queue = queue
        self._users: dict[str, _UserSeats] = {}
        self.rejected = 0

    def held(self, user: str) -> int:
        seats = self._users.get(user)
        return 0 if seats is None else seats.held

    def waiting(self, user: str) -> int:
        seats = self._users.get(user)
        return 0 if seats is None else len(seats.waiters)

    @contextlib.asynccontextmanager
    async def hold(self, user: str, bounded: bool = True) -> AsyncIterator[None]:
        """One of ``user``'s seats for the block, first come first served; waits for one, or
        (``bounded``, past the queue) raises TooManyRequests."""
        seats = self._users.get(user)
        if seats is None:
            seats = self._users[user] = _UserSeats()
        if seats.held < self.per_user and not seats.waiters:
            seats.held += 1
        else:
            if bounded and len(seats.waiters) >= self.queue:
                self.rejected += 1
                raise errors.TooManyRequests(
                    f"too many costly requests (filtered lists, starting watches) of user {user!r} "
                    f"waiting (limit {self.queue}); please try again later", retry_after_seconds=1)
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            seats.waiters.append(turn)
            try:
                await turn  # a seat given back is handed over here: ``held`` stays as it is
            except BaseException:
                if turn.done() and not turn.cancelled():
                    self._give_back(user, seats)  # handed over, then cancelled: hand it on
                else:
                    seats.waiters.remove(turn)
                raise
        try:
            yield
        finally:
            self._give_back(user, seats)

    def _give_back(self, user: str, seats: _UserSeats) -> None:
        while seats.waiters:
            turn = seats.waiters.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        seats.held -= 1
        if not seats.held:
            self._users.pop(user, None)
