"""Status helpers, as Kubernetes writes statuses: a condition's transition time moves only when its
status changes, and a status is written only when it says something new.

- :func:`condition` builds one condition against the object's previous conditions (what a controller
  computing its whole status uses: the poollets);
- :func:`with_condition` / :func:`set_condition` set one condition in an object's JSON, leaving the
  others (what a writer of one condition uses: the scheduler, binding, eviction);
- :func:`status_differs` says whether a desired status says anything the current one does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ironpool.api.meta import Condition, now_rfc3339

SCHEDULED = "Scheduled"

#: a condition's field that stamps each write: a change of it alone is no news
UPDATE_STAMP = "lastUpdateTime"


def scheduled_message(key: str, pool: str) -> str:
    """What the ``Scheduled`` condition and Event say of a bound object (kube-scheduler's words)."""
    return f"Successfully assigned {key} to {pool}"


def _get(c: Condition | Mapping[str, Any], field: str, json_name: str) -> Any:
    return c.get(json_name) if isinstance(c, Mapping) else getattr(c, field)


def transition_time(previous: Iterable[Condition | Mapping[str, Any]] | None, ctype: str, status: str,
                    now: str) -> str:
    """When condition ``ctype`` took ``status``: the previous condition's time if it already had that
    status, else ``now``."""
    for old in previous or ():
        if _get(old, "type", "type") == ctype:
            since = _get(old, "last_transition_time", "lastTransitionTime")
            return str(since) if _get(old, "status", "status") == status and since else now
    return now


def condition(ctype: str, status: str, reason: str, message: str,
              previous: Iterable[Condition | Mapping[str, Any]] | None, now: str,
              **extra: Any) -> dict[str, Any]:
    """One condition as JSON; ``extra`` fields (``observedGeneration``, ``lastUpdateTime``) that are not
    None are added."""
    out: dict[str, Any] = {"type": ctype, "status": status, "reason": reason, "message": message,
                           "lastTransitionTime": transition_time(previous, ctype, status, now)}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def with_condition(obj: dict[str, Any], ctype: str, status: str, reason: str,
                   message: str) -> list[dict[str, Any]] | None:
    """The object's conditions with ``ctype`` set; None if it already says exactly that."""
    conditions = [dict(c) for c in ((obj.get("status") or {}).get("conditions") or [])]
    now = now_rfc3339()
    for c in conditions:
        if c.get("type") == ctype:
            if c.get("status") == status and c.get("reason") == reason and c.get("message") == message:
                return None
            c.update(status=status, reason=reason, message=message,
                     lastTransitionTime=transition_time([c], ctype, status, now), lastUpdateTime=now)
            return conditions
    conditions.append(condition(ctype, status, reason, message, None, now, lastUpdateTime=now))
    return conditions


def set_condition(obj: dict[str, Any], ctype: str, status: str, reason: str, message: str) -> None:
    """:func:`with_condition` written into ``obj``'s status (in place)."""
    conditions = with_condition(obj, ctype, status, reason, message)
    if conditions is not None:
        obj["status"] = {**(obj.get("status") or {}), "conditions": conditions}


def _without_stamps(field: str, value: Any) -> Any:
    if field == "conditions" and isinstance(value, list):
        return [{k: v for k, v in c.items() if k != UPDATE_STAMP} if isinstance(c, dict) else c
                for c in value]
    return value


def status_differs(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True if a field of ``desired`` differs from ``current`` (fields only ``current`` has are someone
    else's and ignored; so are the conditions' update stamps)."""
    opts = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    return any(orjson.dumps(_without_stamps(k, current.get(k)), option=opts)
               != orjson.dumps(_without_stamps(k, v), option=opts) for k, v in desired.items())
