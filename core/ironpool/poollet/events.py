"""Kubernetes Events from the poollets: what a Machine waits for, runtime events, pool health.

Best effort, as in Kubernetes: a failed event write is logged and dropped, never fails a reconcile.
The same (object, reason, message) is recorded at most once per ``dedupe_seconds`` so a reconcile
loop cannot flood the API.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from ironpool.api.core import Event
from ironpool.client.rest import AsyncClient
from ironpool.poollet.conditions import now_rfc3339

log = logging.getLogger(__name__)


class EventRecorder:
    """Writes ``core/v1`` Events about API objects (``involvedObject``) for one component."""

    def __init__(self, client: AsyncClient, component: str, dedupe_seconds: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.component = component
        self.dedupe_seconds = dedupe_seconds
        self._clock = clock
        self._recent: dict[tuple[str, str, str, str], float] = {}

    async def record(self, obj: Any, type_: str, reason: str, message: str, action: str = "") -> bool:
        """Record an event about ``obj`` (a typed API object); False if deduplicated or it failed."""
        md = obj.metadata
        namespace = md.namespace or "default"
        key = (namespace, md.uid or md.name or "", reason, message)
        now = self._clock()
        last = self._recent.get(key)
        if last is not None and now - last < self.dedupe_seconds:
            return False
        if len(self._recent) > 4096:  # forget old entries instead of growing without bound
            self._recent = {k: t for k, t in self._recent.items() if now - t < self.dedupe_seconds}
        self._recent[key] = now
        stamp = now_rfc3339()
        event = Event.model_validate({
            "metadata": {"name": f"{md.name}.{secrets.token_hex(8)}", "namespace": namespace},
            "involvedObject": {"apiVersion": obj.api_version, "kind": obj.kind or type(obj).__name__,
                               "name": md.name, "namespace": md.namespace, "uid": md.uid},
            "reason": reason, "message": message[:1024], "type": type_, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "source": {"component": self.component},
            "reportingComponent": self.component, "action": action or reason,
        })
        try:
            await self.client.create(event, namespace=namespace)
        except Exception as exc:
            log.debug("could not record event %s on %s/%s: %s", reason, namespace, md.name, exc)
            return False
        return True
