"""The loop every update and delete runs in: read the object, decide, write with the revision read as
the precondition, and read again when another writer got there first (Kubernetes' ``GuaranteedUpdate``).

The first attempt reads what the store saw of the object last (``Store.get_recent``: on etcd, no
round trip when this apiserver wrote or watched the object lately); it may be stale, which the
write's precondition catches (``RevisionConflict``), and the next attempt reads afresh. An answer
that is not a committed write (a refusal, a no-op, a dry run) is never given from a possibly stale
read: the attempt raises :class:`Unconfirmed` (or an API error) and runs again on a fresh read.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.registry.objectmeta import conflict, not_found
from ironpool.store.interface import Document, GuardConflict, KeyNotFound, RevisionConflict

#: attempts before a write gives up on a busy object (409 with Retry-After)
CONFLICT_RETRIES = 16
#: how long a write goes on deciding again while the state admission decided on keeps moving (guard
#: keys such as an address block every create through every apiserver moves): past the quick
#: retries, with a few milliseconds of jitter between attempts, so a loaded apiserver whose view lags
#: the others' still gets its turn instead of a 409
GUARD_RETRY_SECONDS = 10.0

#: ``attempt(fresh)``: one read-modify-write, reading with ``Store.get`` when ``fresh``, else
#: ``Store.get_recent``
Attempt = Callable[[bool], Awaitable[Document]]


class Unconfirmed(Exception):
    """An attempt on a possibly stale read reached an answer that commits nothing: confirm it on a
    fresh read."""


def too_many_writers(info: ResourceInfo, name: str) -> errors.Conflict:
    return errors.Conflict(f"{info.plural} {name!r}: too many concurrent writers, try again",
                           kind=info.plural, name=name, retry_after_seconds=1)


class GuardRetries:
    """Whether a write whose guard keys moved should be decided again (see ``GUARD_RETRY_SECONDS``)."""

    def __init__(self) -> None:
        self.attempts = 0
        self.deadline: float | None = None

    async def again(self) -> bool:
        self.attempts += 1
        if self.attempts < CONFLICT_RETRIES:
            return True
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + GUARD_RETRY_SECONDS
        if now >= self.deadline:
            return False
        await asyncio.sleep(random.uniform(0.001, 0.02))  # jitter, not a secret
        return True


async def read_modify_write(info: ResourceInfo, name: str, pinned: bool, attempt: Attempt,
                            fresh: bool = False) -> Document:
    """Run ``attempt`` until it commits (see the module docstring); losing to a concurrent writer
    means reading again, unless the client ``pinned`` a version (then 409). ``fresh``: read afresh
    from the first attempt on."""
    guard = GuardRetries()
    conflicts = 0
    while True:
        try:
            return await attempt(fresh)
        except RevisionConflict:
            if pinned and fresh:
                raise conflict(info, name) from None
            conflicts += 1
            if conflicts >= CONFLICT_RETRIES:
                raise too_many_writers(info, name) from None
        except GuardConflict:
            # the state admission decided on moved, not the object: decide again
            if not await guard.again():
                raise too_many_writers(info, name) from None
        except KeyNotFound:
            raise not_found(info, name) from None
        except (errors.ApiError, Unconfirmed):
            if fresh:
                raise
        fresh = True
