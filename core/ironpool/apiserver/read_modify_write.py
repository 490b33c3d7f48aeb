"""The loop every update and delete runs in: read the object, decide, write with the revision read as
the precondition, and read again when another writer got there first (Kubernetes' ``GuaranteedUpdate``).

The first attempt reads what the store saw of the object last (``Store.get_recent``: on etcd, no
round trip when this apiserver wrote or watched the object lately); it may be stale, which the
write's precondition catches (``RevisionConflict``), and the next attempt reads afresh. An answer
that is not a committed write (a refusal, a no-op, a dry run) is never given from a possibly stale
read: the attempt raises :class:`Unconfirmed` (or an API error) and runs again on a fresh read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.objectmeta import conflict, not_found
from ironpool.store.interface import Document, GuardConflict, KeyNotFound, RevisionConflict

#: attempts before a write gives up on a busy object (409 with Retry-After)
CONFLICT_RETRIES = 16

#: ``attempt(fresh)``: one read-modify-write, reading with ``Store.get`` when ``fresh``, else
#: ``Store.get_recent``
Attempt = Callable[[bool], Awaitable[Document]]


class Unconfirmed(Exception):
    """An attempt on a possibly stale read reached an answer that commits nothing: confirm it on a
    fresh read."""


def too_many_writers(info: ResourceInfo, name: str) -> errors.Conflict:
    return errors.Conflict(f"{info.plural} {name!r}: too many concurrent writers, try again",
                           kind=info.plural, name=name, retry_after_seconds=1)


async def read_modify_write(info: ResourceInfo, name: str, pinned: bool, attempt: Attempt,
                            fresh: bool = False) -> Document:
    """Run ``attempt`` until it commits (see the module docstring); losing to a concurrent writer
    means reading again, unless the client ``pinned`` a version (then 409). ``fresh``: read afresh
    from the first attempt on."""
    for _ in range(CONFLICT_RETRIES):
        try:
            return await attempt(fresh)
        except RevisionConflict:
            if pinned and fresh:
                raise conflict(info, name) from None
        except GuardConflict:
            pass  # the state admission decided on moved, not the object: decide again
        except KeyNotFound:
            raise not_found(info, name) from None
        except (errors.ApiError, Unconfirmed):
            if fresh:
                raise
        fresh = True
    raise too_many_writers(info, name)
