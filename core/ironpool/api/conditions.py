"""Setting one condition in an object's ``status.conditions`` as Kubernetes does: the transition
time moves only when the status changes, and an unchanged condition is left alone."""

from __future__ import annotations

from typing import Any

from ironpool.api.meta import now_rfc3339

SCHEDULED = "Scheduled"


def scheduled_message(key: str, pool: str) -> str:
    """What the ``Scheduled`` condition and Event say of a bound object (kube-scheduler's words)."""
    return f"Successfully assigned {key} to {pool}"


def with_condition(obj: dict[str, Any], ctype: str, status: str, reason: str,
                   message: str) -> list[dict[str, Any]] | None:
    """The object's conditions with ``ctype`` set; None if it already says exactly that."""
    conditions = [dict(c) for c in ((obj.get("status") or {}).get("conditions") or [])]
    now = now_rfc3339()
    for c in conditions:
        if c.get("type") == ctype:
            if c.get("status") == status and c.get("reason") == reason and c.get("message") == message:
                return None
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update(status=status, reason=reason, message=message, lastUpdateTime=now)
            return conditions
    conditions.append({"type": ctype, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now, "lastUpdateTime": now})
    return conditions


def set_condition(obj: dict[str, Any], ctype: str, status: str, reason: str, message: str) -> None:
    """:func:`with_condition` written into ``obj``'s status (in place)."""
    conditions = with_condition(obj, ctype, status, reason, message)
    if conditions is not None:
        obj["status"] = {**(obj.get("status") or {}), "conditions": conditions}
