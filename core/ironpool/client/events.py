"""Kubernetes Events about API objects, as every controller writes them (client-go's ``record``).

Best effort, as in Kubernetes: a failed write is logged and dropped, never fails the caller. The same
(object, reason, message) is written at most once per ``dedupe_seconds``, so a reconcile loop or a
scheduler retrying an unschedulable Machine cannot flood the API. Objects may be typed models or JSON
dicts (the scheduler works on raw dicts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from ironpool.api.core import Event
from ironpool.api.meta import now_rfc3339
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model

log = logging.getLogger(__name__)

_EVENTS = resource_for_model(Event)


def _involved(obj: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """``involvedObject`` of ``obj``: apiVersion, kind, name, namespace, uid."""
    if isinstance(obj, BaseModel):
        md: Any = getattr(obj, "metadata", None)
        return {"apiVersion": getattr(obj, "api_version", None),
                "kind": getattr(obj, "kind", None) or type(obj).__name__,
                "name": md.name, "namespace": md.namespace, "uid": md.uid}
    m = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": m.get("name"),
            "namespace": m.get("namespace"), "uid": m.get("uid")}


class EventRecorder:
    """Writes ``core/v1`` Events about API objects (``involvedObject``) for one component."""

    def __init__(self, client: AsyncClient, component: str, dedupe_seconds: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.component = component
        self.dedupe_seconds = dedupe_seconds
        self._clock = clock
        self._recent: dict[tuple[str, str, str, str], float] = {}

    async def record(self, obj: Mapping[str, Any] | BaseModel, type_: str, reason: str, message: str,
                     action: str = "") -> bool:
        """Record an event about ``obj``; False if it was a duplicate or could not be written."""
        involved = _involved(obj)
        # Cluster-scoped objects' events live in "default", as in Kubernetes.
        namespace = involved["namespace"] or "default"
        key = (namespace, involved["uid"] or involved["name"] or "", reason, message)
        now = self._clock()
        last = self._recent.get(key)
        if last is not None and now - last < self.dedupe_seconds:
            return False
        if len(self._recent) > 4096:  # forget old entries instead of growing without bound
            self._recent = {k: t for k, t in self._recent.items() if now - t < self.dedupe_seconds}
        self._recent[key] = now
        stamp = now_rfc3339()
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{involved['name'] or 'object'}.", "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason, "message": message[:1024], "type": type_, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "source": {"component": self.component},
            "reportingComponent": self.component, "action": action or reason,
        }
        try:
            await self.client.create_raw(_EVENTS, event, namespace)
        except Exception as exc:
            log.debug("could not record event %s on %s/%s: %s", reason, namespace, involved["name"], exc)
            return False
        return True
