"""A per-user limit on API requests being handled at once (Kubernetes' max-requests-inflight, kept
per user as its priority-and-fairness keeps flows apart), so one busy or hostile client cannot take
every worker: past the limit its requests get 429 with ``Retry-After`` while other users, and
``/healthz`` and ``/readyz`` (never counted), are served. Watches are long-running and not counted
once their stream started, as in Kubernetes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ironpool.api import errors

DEFAULT_PER_USER = 400  # Kubernetes' default --max-requests-inflight, here for each user


class InFlight:
    """Counts requests per user; :meth:`hold` raises TooManyRequests past ``per_user``."""

    def __init__(self, per_user: int = DEFAULT_PER_USER) -> None:
        if per_user <= 0:
            raise ValueError(f"the in-flight limit per user must be positive, got {per_user}")
        self.per_user = per_user
        self._counts: dict[str, int] = {}
        self.rejected = 0

    def current(self, user: str) -> int:
        return self._counts.get(user, 0)

    @contextlib.contextmanager
    def hold(self, user: str) -> Iterator[None]:
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
