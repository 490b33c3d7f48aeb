"""The background tasks of one scheduler part (bindings, Reservation writes): started without being
awaited, each kept until it ends so it is not collected mid-flight, and cancelled and awaited
together when the part stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any


class TaskSet:
    """Tasks started by :meth:`spawn` and not yet ended."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Cancel every task and wait until each has ended (what it raised is dropped: it is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def __len__(self) -> int:
        return len(self._tasks)
