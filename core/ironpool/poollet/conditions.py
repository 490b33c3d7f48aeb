"""Status conditions as JSON dicts, keeping ``lastTransitionTime`` while the status does not change."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ironpool.api.meta import Condition


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    ctype: str,
    status: str,
    reason: str,
    message: str,
    previous: Iterable[Condition] | None,
    now: str,
    **extra: Any,
) -> dict[str, Any]:
    """One condition; its transition time is carried over from ``previous`` when the status is the same."""
    transition = now
    for old in previous or ():
        if old.type == ctype and old.status == status and old.last_transition_time:
            transition = old.last_transition_time
    out: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message,
                           "lastTransitionTime": transition}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def find(conditions: Iterable[Condition] | None, ctype: str) -> Condition | None:
    for c in conditions or ():
        if c.type == ctype:
            return c
    return None


class ProbeHealth:
    """Debounces the runtime probe behind a pool's ``Ready`` condition.

    One slow ``Status`` call (libvirt busy starting twenty domains on a loaded host) must not flip the
    pool to ``Ready=False`` and make the scheduler skip it; ``threshold`` failures in a row do.
    """

    def __init__(self, threshold: int = 3) -> None:
        self.threshold = threshold
        self.failures = 0

    def record(self, ok: bool, message: str) -> tuple[bool, str]:
        """The (ok, message) to publish for this probe result."""
        if ok:
            self.failures = 0
            return True, message
        self.failures += 1
        if self.failures < self.threshold:
            return True, f"{message} (failure {self.failures} of {self.threshold} tolerated)"
        return False, message
