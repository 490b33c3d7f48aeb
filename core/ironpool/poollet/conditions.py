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
